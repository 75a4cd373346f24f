"""The name table `writer_for` consults before importing a format (so `jsprof record` does not
import every format to check `-o`) agrees with the formats themselves."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jsprof import formats
from jsprof.errors import UsageError


def test_table_matches_every_format() -> None:
    table = {name: ext for name, (_, ext) in formats.TABLE.items()}
    real = {f.name: f.extensions for f in formats.FORMATS.values() if f.write is not None}
    assert table == real
    assert [f.name for f in formats.READERS] + [f.name for f in formats.WRITE_ONLY] == list(
        formats.TABLE
    )
    for name, (module, _) in formats.TABLE.items():
        assert sys.modules[f"jsprof.formats.{module}"].FORMAT is formats.FORMATS[name]


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("a.json", "jsprof"),
        ("a.jsprof.json", "jsprof"),
        ("a.SPEEDSCOPE.json.gz", "speedscope"),
        ("a.trace.json", "chrome-trace"),
        ("a.pb.gz", "pprof"),
        ("a.cpuprofile", "cpuprofile"),
        ("-", "jsprof"),
    ],
)
def test_writer_for_by_extension(path: str, name: str) -> None:
    assert formats.writer_for(path, None).name == name


def test_writer_for_unknown() -> None:
    with pytest.raises(UsageError, match=r"cannot tell the output format from 'a\.txt'"):
        formats.writer_for("a.txt", None)
    with pytest.raises(UsageError, match="choose one of: jsprof, cpuprofile, chrome-trace,"):
        formats.writer_for("a.json", "nope")


def test_writer_for_imports_only_its_format() -> None:
    code = (
        "import sys; from jsprof.formats import writer_for; writer_for('a.json', None); "
        "print(sorted(m for m in sys.modules if m.startswith('jsprof.formats.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    for other in ("pprof", "speedscope", "chrometrace", "perfetto", "firefox", "folded"):
        assert f"'jsprof.formats.{other}'" not in out, out
    assert "'jsprof.formats.jsprof'" in out
