"""Queries over the field store (top, flame, diff, export) on DuckDB or Dask.

`store/` holds the data; this package reads its Parquet tables and returns the same
Recording and analysis tables a local trace gives, so `render/` draws both alike.
"""
