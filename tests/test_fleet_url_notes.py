"""`fleet flame --url` and `fleet export --url` say what the local path says of damaged
records: their answers are a page and a file, so the counts travel in headers."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from fleet_util import make_trace, upload
from jsprof.cli import main
from jsprof.store import Store
from jsprof.store import segment as seg
from serve_util import READ_TOKEN, Collector

T0 = 1.7e12


def _notes(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("jsprof: note:")]


def test_flame_and_export_over_url_print_the_damaged_records_note(
    tmp_path: Path, capsys, monkeypatch,  # noqa: ANN001
) -> None:
    path = tmp_path / "st"
    st = Store(path)
    rng = np.random.default_rng(8)
    for i in range(6):
        upload(st, f"u{i}", make_trace(rng, 200), app="shop", release="1.0",
               receivedAt=T0 + i * 60e3)
    st.close()
    (segment,) = (path / "segments").glob("*.seg")
    fd = os.open(segment, os.O_RDONLY)
    heads = [h for h in seg.scan(fd) if isinstance(h, seg.RecordHeader)]
    os.close(fd)
    data = bytearray(segment.read_bytes())
    data[heads[2].end - 5] ^= 0x04  # in a body: its checksum fails
    segment.write_bytes(bytes(data))

    col = Collector(path, "--app", "shop:k1", "--compact-every", "0")
    try:
        auth = {"Authorization": f"Bearer {READ_TOKEN}"}
        for route in ("flame?app=shop&format=svg", "export?app=shop"):
            status, headers, _ = col.request("GET", f"/v1/query/{route}", headers=auth,
                                             timeout=300)
            assert status == 200
            assert headers["x-jsprof-damaged-records"] == "1", headers
            assert headers["x-jsprof-pending-uploads"] == "0"
        monkeypatch.setenv("JSPROF_READ_TOKEN", READ_TOKEN)
        capsys.readouterr()
        remote, local = [], []
        for cmd, out in (("flame", "f.svg"), ("export", "e.jsprof.json")):
            assert main(["fleet", cmd, "--url", col.url, "--app", "shop",
                         "-o", str(tmp_path / f"url-{out}")]) == 0
            remote.append(_notes(capsys.readouterr().err))
            assert main(["fleet", cmd, "--store", str(path), "--app", "shop",
                         "-o", str(tmp_path / f"local-{out}")]) == 0
            local.append(_notes(capsys.readouterr().err))
        # The same sentence, but for where the store is (the client does not know its path).
        for r, lo in zip(remote, local, strict=True):
            assert len(r) == len(lo) == 1, (r, lo)
            assert r[0] == lo[0].replace(f"the store {path}", "the collector's store").replace(
                f"--store {path}", "--store PATH")
            assert r[0].startswith("jsprof: note: 1 damaged record in the collector's store")
    finally:
        col.stop()
