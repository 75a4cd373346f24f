"""Flame graphs as one self-contained SVG or HTML file: no external URLs, works offline.

The SVG draws its frames statically (rects, labels and <title> tooltips), so it is a
picture even where scripts do not run (an SVG in an <img>, an image viewer); a small
inline script (flame_svg.js) adds click-to-zoom, search and hover details. The HTML page
is the viewer: its script (flame.js) draws the flame graph on a canvas from binary
columns of the drawn frames and words their tooltips itself (a static SVG of tens of
thousands of elements was most of a big page's open), and lays out the other views from
JSON blocks. Frame names come from the profiled program, so they are untrusted: they
reach the page only as escaped XML/HTML text or as JSON with `<`, `>`, `&` and
U+2028/2029 escaped, and the HTML page's Content-Security-Policy allows only its own
script (by hash), so even a slip in escaping could not run an injected handler.

Layout, colours and pruning are rendering decisions; the numbers come from the CallTree.
One module a job: escape (text into the documents), layout (geometry, frames placed),
colours (the one colour rule), frames (the drawn frames: SVG elements or the page's
columns), model, index, timeline and source (the viewer's data blocks), scripts (the
inlined JavaScript, package data in render/, and the CSP), svg and page (the two
documents), document (`render_flame`, FlameRenderer: a tree to one document).
"""

from .colours import GREY, NO_RESOURCE, fill_rule
from .document import FlameRenderer, render_flame
from .escape import clean, esc, script_json
from .index import INDEX_NODES, INDEX_TRACK_CELLS, tree_index
from .layout import CHAR_W, FONT, PAD, ROOT_FN, ROW, WIDTH, FlameLayout, layout, track_widths
from .model import MODEL_FUNCTIONS, MODEL_NODES, MODEL_SHARE, function_table, viewer_model
from .page import VIEWS
from .scripts import VIEWER_MODULES, flame_script, page_csp, svg_script, viewer_modules
from .source import source_model
from .timeline import SPAN_LANES, time_model

__all__ = [
    "CHAR_W", "FONT", "GREY", "INDEX_NODES", "INDEX_TRACK_CELLS", "MODEL_FUNCTIONS",
    "MODEL_NODES", "MODEL_SHARE", "NO_RESOURCE", "PAD", "ROOT_FN", "ROW", "SPAN_LANES",
    "VIEWER_MODULES", "VIEWS", "WIDTH", "FlameLayout", "FlameRenderer", "clean", "esc",
    "fill_rule", "flame_script", "function_table", "layout", "page_csp", "render_flame",
    "script_json", "source_model", "svg_script", "time_model", "track_widths", "tree_index",
    "viewer_model", "viewer_modules",
]
