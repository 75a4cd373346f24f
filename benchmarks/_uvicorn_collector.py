"""`jsprof serve --workers N` as it would be on uvicorn's own supervisor (`uvicorn
--workers N`: uvicorn.supervisors.Multiprocess), for benchmarks/bench_supervisor.py.

    python benchmarks/_uvicorn_collector.py SERVE-ARGS...   (the arguments of `jsprof serve`)

The parent does what `jsprof serve` does before serving (parse, bind, recover the store,
the metrics folder, the port line), then hands the socket to Multiprocess, which spawns
the workers; each worker builds the same app from the same arguments (`app_factory`, read
from the environment: spawned workers get no Python objects from the parent) with the
same uvicorn settings as `serve/server.py`'s workers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ARGS_ENV = "JSPROF_BENCH_SERVE_ARGS"


def _config(argv: list[str]):
    from jsprof.serve import cli as serve_cli

    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd")
    serve_cli.add_parser(sub)
    args = ap.parse_args(["serve", *argv])
    config = serve_cli._config(args)
    config.read_token = args.read_token
    return args, config


def app_factory():
    """Run in each spawned worker."""
    from jsprof.serve.app import create_app
    from jsprof.serve.protocol import GuardedProtocol, connection_cap
    from jsprof.serve.server import _tune_gc
    from jsprof.store import Store

    _, config = _config(json.loads(os.environ[ARGS_ENV]))
    GuardedProtocol.configure(
        config.read_timeout, config.body_timeout, connection_cap(config.max_connections)
    )
    app = create_app(config, Store(config.store))
    _tune_gc()
    return app


def main(argv: list[str]) -> int:
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from jsprof.serve import server
    from jsprof.serve.protocol import GuardedProtocol
    from jsprof.store import Store

    args, config = _config(argv)
    os.environ[ARGS_ENV] = json.dumps(argv)
    sock = server.bind(args.host, args.port)
    store = Store(config.store)
    store.recover()
    store.close()
    server._metrics_dir()
    print(f"jsprof serve: listening on {server.url_for(sock, args.host)}", flush=True)
    uconf = uvicorn.Config(
        "_uvicorn_collector:app_factory",
        factory=True,
        workers=config.workers,
        http=GuardedProtocol,
        log_config=None,
        log_level="warning",
        access_log=False,
        server_header=False,
        lifespan="on",
        timeout_graceful_shutdown=server._GRACE_S,
        timeout_keep_alive=5,
    )
    Multiprocess(uconf, sockets=[sock]).run()
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(sys.argv[1:]))
