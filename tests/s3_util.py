"""An S3-API server on loopback for the s3:// store's tests: moto's server mode (an
emulator of the S3 API, `moto[server]` from PyPI) as a real subprocess, and the AWS
variables that point boto3 (in this process and in the collectors) at it."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import boto3

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "jsprof-test-key",
    "AWS_SECRET_ACCESS_KEY": "jsprof-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def moto_server() -> Iterator[dict[str, str]]:
    """moto's S3 server on 127.0.0.1; yields the environment that reaches it."""
    port = _free_port()
    # Its log (a line per request) goes to a file: into a pipe nobody read until the end,
    # it filled the pipe's 64 KiB after ~600 requests and moto's server then hung in a
    # write, answering nothing more (read timeouts in whichever test came next).
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
    )
    env = {**CREDENTIALS, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    try:
        deadline = time.monotonic() + 120  # its first start imports much: a busy machine
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise AssertionError(log.read().decode(errors="replace")[-2000:])
            try:
                client(env).list_buckets()
                break
            except Exception:  # noqa: BLE001 - not listening yet
                assert time.monotonic() < deadline, "moto's server never answered"
                time.sleep(0.2)
        yield env
    finally:
        proc.kill()
        proc.wait()
        log.close()


def client(env: dict[str, str]) -> object:
    return boto3.session.Session().client(
        "s3", endpoint_url=env["AWS_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env["AWS_DEFAULT_REGION"],
    )


def new_bucket(env: dict[str, str]) -> str:
    name = f"jsprof-{secrets.token_hex(6)}"
    client(env).create_bucket(Bucket=name)
    return name


@contextmanager
def aws_env(env: dict[str, str]) -> Iterator[None]:
    """`env` in this process's environment (boto3 reads it), restored after."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
