"""`jsprof serve --forward URL`: a real collector pushes what it stores, as OTLP profiles, to
a loopback OTLP/HTTP receiver that decodes each request with `opentelemetry-proto`; a 503
is retried; a receiver that does not answer delays no upload."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as svc

import jsprof
from formats_util import jsprof_cli, one_line_error
from serve_util import FIXTURES, Collector, fixture_bytes


class Receiver:
    """An OTLP/HTTP profiles endpoint on loopback: answers the first `fail` requests 503,
    holds requests while `hold` is clear, keeps every request it decodes."""

    def __init__(self, fail: int = 0, hold: bool = False, status: int = 503) -> None:
        self.requests: list[svc.ExportProfilesServiceRequest] = []
        self.paths: list[str] = []
        self.types: list[str] = []
        self.fail = fail
        self.status = status
        self.arrived = threading.Event()
        self.release = threading.Event()
        if not hold:
            self.release.set()
        self.held = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.paths.append(self.path)
                outer.types.append(self.headers["Content-Type"])
                if not outer.release.is_set():
                    outer.held += 1
                    outer.release.wait(120)
                if outer.fail > 0:
                    outer.fail -= 1
                    self.send_response(outer.status)
                    self.end_headers()
                    return
                outer.requests.append(svc.ExportProfilesServiceRequest.FromString(body))
                out = svc.ExportProfilesServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
                outer.arrived.set()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def _observations(req) -> list[tuple[int, tuple[str, ...]]]:
    """(timestamp ns, leaf-first function names) of every observation in a request."""
    d = req.dictionary
    s = d.string_table
    out = []
    for rp in req.resource_profiles:
        for sp in rp.scope_profiles:
            for prof in sp.profiles:
                for sample in prof.samples:
                    names = tuple(
                        s[d.function_table[d.location_table[li].lines[0].function_index]
                          .name_strindex]
                        for li in d.stack_table[sample.stack_index].location_indices)
                    out += [(ts, names) for ts in sample.timestamps_unix_nano]
    return out


def _wait(cond, what: str, limit: float = 90) -> None:
    end = time.monotonic() + limit  # a bound on waiting, not on how fast it must be
    while not cond():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.05)


def test_uploads_are_forwarded_as_otlp_with_a_retry(tmp_path: Path) -> None:
    rx = Receiver(fail=1)
    c = Collector(tmp_path / "st", "--app", "shop:k1", "--forward", rx.url)
    try:
        status, body = c.post(fixture_bytes(), query="app=shop&key=k1&release=v1.2&route=/cart")
        assert status == 202, body
        _wait(lambda: rx.requests, "the forwarded request")
        assert rx.paths[0] == "/v1development/profiles"
        assert rx.types[0] == "application/x-protobuf"
        assert len(rx.paths) >= 2  # the 503 was retried
        req = rx.requests[0]
        res = {a.key: a.value.string_value
               for a in req.resource_profiles[0].resource.attributes}
        assert res["service.name"] == "shop" and res["service.version"] == "v1.2"
        assert res["http.route"] == "/cart"
        # every sample of the upload, at its time, with its stack (leaf first)
        track = jsprof.load(FIXTURES / "trace-basic.json").tracks[0]
        status, stored = c.get(body["id"])
        assert status == 200
        rec = jsprof.load(_bytes_file(tmp_path, stored))
        t = rec.tracks[0]
        got = sorted(_observations(req))
        assert len(got) == track.trace.num_samples == t.trace.num_samples
        from fractions import Fraction

        origin = round(Fraction(t.time_origin) * 10**6) if t.time_origin is not None else 0
        want = []
        for time_ms, sid in zip(t.trace.sample_time, t.trace.sample_stack.tolist(),
                                strict=True):
            names = (tuple(t.trace.frames[f].name or "(anonymous)"
                           for f in reversed(t.trace.stack_frames(sid)))
                     if sid >= 0 else ("(idle)",))
            want.append((int(np.rint(time_ms * 1e6)) + origin, names))
        assert got == sorted(want)
    finally:
        c.stop()
        rx.close()


def _bytes_file(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "stored.jsprof.json"
    p.write_bytes(data)
    return p


def test_a_receiver_that_does_not_answer_delays_no_upload(tmp_path: Path) -> None:
    rx = Receiver(hold=True)
    c = Collector(tmp_path / "st", "--app", "shop:k1", "--forward", rx.url + "/custom/path")
    try:
        first, _ = c.post(fixture_bytes())
        assert first == 202
        _wait(lambda: rx.held >= 1, "the forward to reach the receiver")
        # the forwarder is stuck in a request the receiver holds: uploads still go in
        ids = []
        for name in ("trace-idle.json", "trace-builtins.json"):
            status, body = c.post(fixture_bytes(name))
            assert status == 202, body
            ids.append(body["id"])
        assert rx.held >= 1 and not rx.requests and not rx.release.is_set()
        for i in ids:
            assert c.get(i)[0] == 200
        rx.release.set()
        _wait(lambda: sum(len(_observations(r)) for r in rx.requests) == sum(
            jsprof.load(FIXTURES / n).num_samples
            for n in ("trace-basic.json", "trace-idle.json", "trace-builtins.json")),
            "every upload forwarded")
        assert set(rx.paths) == {"/custom/path"}
    finally:
        c.stop()
        rx.close()


def test_a_bad_forward_url_is_one_line(tmp_path: Path) -> None:
    r = jsprof_cli("serve", "--store", str(tmp_path / "st"), "--app", "shop:k1", "--port", "0",
                   "--forward", "ftp://example.com/x")
    assert r.returncode == 2
    assert "--forward 'ftp://example.com/x': expected an http(s)" in one_line_error(r.stderr)


def test_a_full_queue_drops_and_a_4xx_is_not_retried() -> None:
    from jsprof.serve.forward import Forwarder

    doc = fixture_bytes()
    full = Forwarder("http://127.0.0.1:9/", size=1)  # not started: nothing takes from it
    assert full.url == "http://127.0.0.1:9/v1development/profiles"
    assert full.offer({}, doc) and not full.offer({}, doc) and full.dropped == 1
    rx = Receiver(fail=10, status=400)
    fw = Forwarder(rx.url, linger=0.01)
    fw.start()
    try:
        # the store's document: a ProfilerTrace; the meta the collector keeps beside it
        assert fw.offer({"app": "shop", "timeOrigin": 1.7e12}, doc)
        _wait(lambda: fw.failed == 1, "the batch given up")
        assert len(rx.paths) == 1 and fw.sent == 0  # 400: the endpoint's final word
    finally:
        fw.stop()
        rx.close()
