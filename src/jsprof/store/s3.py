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
import time
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

        self._offset: float | None = None  # the bucket's clock minus this machine's
        self.client.meta.events.register("after-call.s3", self._dated)
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

    def _pages(self, prefix: str, start_after: str | None, end_before: str | None,
               max_keys: int | None = None) -> Any:
        """(reply Date or None, [(key under the prefix, listed object)]) per page of
        ListObjectsV2, from `start_after`, no page fetched once a key reached
        `end_before`, nor once `max_keys` keys came. With `end_before` the pages grow from
        one key (1, then twice what came so far): a range that is often empty costs one
        key, not a page of a thousand keys past its end, and one that holds N keys costs
        at most about 3N."""
        from email.utils import parsedate_to_datetime

        cut = len(self.prefix) + 1 if self.prefix else 0
        args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self._key(prefix)}
        if start_after is not None:
            args["StartAfter"] = self._key(start_after)
        if end_before is not None:
            args["MaxKeys"] = 1
        seen = 0
        try:
            while True:
                if max_keys is not None:
                    args["MaxKeys"] = max(1, min(args.get("MaxKeys", 1000), max_keys - seen))
                page = self.client.list_objects_v2(**args)
                date = page.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
                now = parsedate_to_datetime(date) if date else None
                got = [(o["Key"][cut:], o) for o in page.get("Contents", [])]
                ended = end_before is not None and any(k >= end_before for k, _ in got)
                yield now, [(k, o) for k, o in got if end_before is None or k < end_before]
                seen += len(got)
                if ended or not page.get("IsTruncated") or (max_keys is not None
                                                            and seen >= max_keys):
                    return
                args.pop("StartAfter", None)
                args["MaxKeys"] = min(1000, 2 * seen + 8) if end_before is not None else 1000
                args["ContinuationToken"] = page["NextContinuationToken"]
        except self._errors as e:
            raise self._fail("list", prefix or "/", e) from None

    def list(self, prefix: str, start_after: str | None = None,
             end_before: str | None = None, max_keys: int | None = None
             ) -> list[tuple[str, int]]:
        return sorted((k, int(o["Size"])) for _now, page in
                      self._pages(prefix, start_after, end_before, max_keys) for k, o in page)

    def aged(self, prefix: str, start_after: str | None = None,
             end_before: str | None = None) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        for now, page in self._pages(prefix, start_after, end_before):
            for key, o in page:
                # no Date header: age 0, so nothing is judged old by this machine's clock
                out.append((key, (now - o["LastModified"]).total_seconds() if now else 0.0))
        return sorted(out)

    def clock(self) -> float:
        """The bucket's clock: this machine's, set by the `Date` of the bucket's last
        reply (any request's: one read of a key nobody writes when none came yet). A
        `Date` says whole seconds: within about a second and a round trip."""
        if self._offset is None:
            try:
                self.client.head_object(Bucket=self.bucket, Key=self._key("leases/.clock"))
            except self._errors:
                pass  # 404 (or 403): its reply's Date was read all the same
            if self._offset is None:
                raise ObjectStoreError(f"{self.url}: the bucket's replies carry no Date "
                                       "header: its clock is unknown")
        return time.time() + self._offset

    def _dated(self, http_response: Any = None, **_kw: Any) -> None:
        """botocore's after-call hook (every reply, errors too): the bucket's clock."""
        from email.utils import parsedate_to_datetime

        date = getattr(http_response, "headers", {}).get("date") if http_response else None
        if date:
            try:
                # a Date is floored to its second: its middle is the better guess
                self._offset = parsedate_to_datetime(date).timestamp() + 0.5 - time.time()
            except (TypeError, ValueError):
                pass

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except self._errors as e:
            raise self._fail("delete", key, e) from None


_SESSION_LOCK = threading.Lock()
