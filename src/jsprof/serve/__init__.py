"""`jsprof serve`: the field-profiling collector (ASGI app on uvicorn) over `jsprof.store`.

Importing this package loads nothing heavy: `cli.py` and `config.py` are stdlib-only, and the
app (`app.py`, Starlette) is imported when the server starts.
"""
