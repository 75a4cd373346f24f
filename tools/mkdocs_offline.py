"""MkDocs hook (mkdocs.yml `hooks:`): the built site works offline and from file://.

The search plugin writes search/search_index.json, which a file:// page cannot fetch; this
writes the same index as search/search_index.js, a classic script that sets
`window.jsprofSearchIndex`, which tools/docs_theme/search/main.js (replacing the plugin's
Worker-based one) loads. The theme's highlight.js, the only thing it loaded from a CDN, is
off in mkdocs.yml: code is highlighted at build time (Pygments, inline styles).
"""

from __future__ import annotations

import os
from pathlib import Path


def on_post_build(config, **kwargs) -> None:
    folder = Path(config["site_dir"]) / "search"
    text = (folder / "search_index.json").read_text(encoding="utf-8")
    # JSON is a JavaScript expression; `</` and U+2028/9 escaped all the same (data, not code)
    text = text.replace("</", "<\\/").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    tmp = folder / "search_index.js.tmp"
    tmp.write_text(f"window.jsprofSearchIndex = {text};\n", encoding="utf-8")
    os.replace(tmp, folder / "search_index.js")
    # The plugin's Worker script is not used (main.js searches in the page).
    (folder / "worker.js").unlink(missing_ok=True)
