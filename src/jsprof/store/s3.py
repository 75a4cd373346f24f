"""`s3://bucket/prefix` as an `objects.ObjectStore`, through boto3 (the `s3` extra).

Why boto3: the store's guarantees rest on conditional writes (`If-None-Match: *` to create
a segment object or take the compactor's lease, `If-Match: <etag>` to commit the manifest
or renew the lease), which boto3's `put_object` sends as `IfNoneMatch`/`IfMatch`; pyarrow's
S3FileSystem has no conditional put.

Where and as whom: the standard AWS variables, read by botocore itself
(`AWS_ENDPOINT_URL` or `AWS_ENDPOINT_URL_S3`, `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_PROFILE`, `AWS_REGION`/
`AWS_DEFAULT_REGION`), never the URL: a URL with credentials in it is refused, so no
secret reaches a command line or a log line.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from .errors import ObjectStoreError, StoreError


def parse_url(url: str) -> tuple[str, str]:
    """(bucket, prefix without a trailing slash) of `s3://bucket/prefix`."""
    rest = url[len("s3://"):]
    bucket, _, prefix = rest.partition("/")
    if "@" in bucket or ":" in bucket:
        raise StoreError(
            "s3:// URL: credentials or a port do not belong in it; set AWS_ACCESS_KEY_ID, "
            "AWS_SECRET_ACCESS_KEY and AWS_ENDPOINT_URL in the environment"
        )
    if not bucket:
        raise StoreError(f"{url}: no bucket; use s3://bucket/prefix")
    return bucket, prefix.strip("/")


class S3Objects:
    def __init__(self, url: str) -> None:
        from ..extras import require

        require("s3", "a store on s3://")
        import boto3
        import botocore.config

        self.bucket, self.prefix = parse_url(url)
        self.url = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        # One client per object: boto3 clients are thread-safe; sessions are not, hence
        # the lock around making it.
        with _SESSION_LOCK:
            self.client = boto3.session.Session().client(
                "s3",
                region_name=region or "us-east-1",
                config=botocore.config.Config(
                    retries={"max_attempts": 4, "mode": "standard"},
                    connect_timeout=5, read_timeout=30, max_pool_connections=32,
                ),
            )
        import botocore.exceptions

        self._client_error = botocore.exceptions.ClientError
        self._errors = (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _fail(self, what: str, key: str, e: Exception) -> ObjectStoreError:
        # botocore's messages name the operation and the S3 error code, never a credential
        return ObjectStoreError(f"{self.url}: cannot {what} {key}: {e}")

    def _code(self, e: Any) -> str:
        if isinstance(e, self._client_error):
            return str(e.response.get("Error", {}).get("Code", ""))
        return ""

    def get(self, key: str) -> tuple[bytes, str] | None:
        try:
            r = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
            return r["Body"].read(), r["ETag"]
        except self._errors as e:
            if self._code(e) in ("NoSuchKey", "404"):
                return None
            raise self._fail("read", key, e) from None

    def put(self, key: str, data: bytes) -> str:
        try:
            return self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)[
                "ETag"]
        except self._errors as e:
            raise self._fail("write", key, e) from None

    def put_new(self, key: str, data: bytes) -> bool:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data,
                                   IfNoneMatch="*")
            return True
        except self._errors as e:
            # 412: the key exists; 409: a concurrent conditional write to it is in flight
            if self._code(e) in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            raise self._fail("create", key, e) from None

    def put_if(self, key: str, data: bytes, etag: str) -> str | None:
        try:
            return self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data,
                                          IfMatch=etag)["ETag"]
        except self._errors as e:
            if self._code(e) in ("PreconditionFailed", "ConditionalRequestConflict",
                                 "NoSuchKey"):
                return None
            raise self._fail("replace", key, e) from None

    def list(self, prefix: str) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        cut = len(self.prefix) + 1 if self.prefix else 0
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self._key(prefix))
            for page in pages:
                for o in page.get("Contents", []):
                    out.append((o["Key"][cut:], int(o["Size"])))
        except self._errors as e:
            raise self._fail("list", prefix or "/", e) from None
        return sorted(out)

    def aged(self, prefix: str) -> list[tuple[str, float]]:
        from email.utils import parsedate_to_datetime

        out: list[tuple[str, float]] = []
        cut = len(self.prefix) + 1 if self.prefix else 0
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self._key(prefix))
            for page in pages:
                date = page.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
                now = parsedate_to_datetime(date) if date else None
                for o in page.get("Contents", []):
                    # no Date header: age 0, so nothing is judged old by this machine's clock
                    age = (now - o["LastModified"]).total_seconds() if now else 0.0
                    out.append((o["Key"][cut:], age))
        except self._errors as e:
            raise self._fail("list", prefix or "/", e) from None
        return sorted(out)

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except self._errors as e:
            raise self._fail("delete", key, e) from None


_SESSION_LOCK = threading.Lock()
