"""The documentation site builds with `mkdocs build --strict`: a broken relative link, a
missing picture or a page left out of the nav fails the build (and so `make test`)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_mkdocs_builds_strict(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert p.returncode == 0, p.stderr
    pages = {"index", "getting-started", "local-profiling", "engines", "profiler-api", "formats",
             "field", "scale", "store", "design"}
    for page in pages:
        html = tmp_path / "site" / ("index.html" if page == "index" else f"{page}/index.html")
        assert html.stat().st_size > 0, page
