"""The SVG picture: static frames (a picture even where scripts do not run) and a small
inline script (flame_svg.js) for zoom, search and details."""

from __future__ import annotations

from .escape import esc
from .frames import Frames
from .layout import FONT, PAD
from .scripts import svg_script

# The SVG picture's styles (the HTML page draws on a canvas and has its own).
_CSS = """
#fg-frames text { font: FONTpx ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
  fill: #1d1d1f; pointer-events: none; }
#fg-frames g { cursor: pointer; }
#fg-frames g:hover rect { stroke: #1d1d1f; stroke-width: 0.8; }
#fg-frames g.fg-anc rect { opacity: 0.45; }
#fg-frames g.fg-hit rect { fill: hsl(300,80%,62%); }
""".replace("FONT", str(FONT))


def svg_document(fr: Frames, data: str, title: str, subtitle: str, width: int) -> str:
    top = 44
    height = top + fr.height + 26
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
        f'<svg xmlns="http://www.w3.org/2000/svg" id="fg-svg" version="1.1" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">\n'
        f"<style>{_CSS}\n"
        ".fg-ui { font: 12px system-ui, 'DejaVu Sans', sans-serif; fill: #333; }\n"
        ".fg-btn { cursor: pointer; fill: #0b61c4; }\n</style>\n"
        f'<rect width="100%" height="100%" fill="#fbfbfa"/>\n'
        f'<text class="fg-ui" x="{width / 2}" y="18" text-anchor="middle" '
        f'style="font-size:15px;font-weight:600">{esc(title)}</text>\n'
        f'<text class="fg-ui" x="{PAD}" y="36" style="fill:#777">{esc(subtitle)}</text>\n'
        f'<text class="fg-ui fg-btn" id="fg-reset" x="{PAD}" y="18" '
        'style="visibility:hidden">Reset zoom</text>\n'
        f'<text class="fg-ui fg-btn" id="fg-search-button" x="{width - PAD}" y="18" '
        'text-anchor="end">Search</text>\n'
        f'<text class="fg-ui" id="fg-status" x="{width - PAD}" y="36" '
        'text-anchor="end"></text>\n'
        f'<g transform="translate(0,{top})">{fr.svg}</g>\n'
        f'<text class="fg-ui" id="fg-details" x="{PAD}" y="{height - 9}"></text>\n'
        f'<script type="application/json" id="fg-data">{data}</script>\n'
        # CDATA so the script's own `<` and `&` are plain text in XML.
        f'<script type="text/javascript"><![CDATA[{svg_script()}]]></script>\n'
        "</svg>\n"
    )
