"""The HTML viewer page: header, tabs, legend, the canvas and the views' sections, the
page's styles, and its data blocks after its scripts."""

from __future__ import annotations

from .escape import esc
from .frames import Frames
from .layout import FONT
from .scripts import flame_script, page_csp, viewer_modules

_PAGE_CSS = """
:root { color-scheme: light; }
body { margin: 0; background: #fbfbfa; color: #1d1d1f;
  font: 13px system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
.top { position: sticky; top: 0; z-index: 3; background: rgba(251,251,250,0.97);
  border-bottom: 1px solid #e3e3e6; }
header { padding: 10px 16px 4px; display: flex; align-items: baseline; gap: 6px 18px; }
/* One line however long the title: the title and subtitle give way (cut with an ellipsis,
   the whole text in their tooltip), never the tabs and the search box. */
h1 { font-size: 16px; margin: 0; font-weight: 600; flex: 0 10 auto; min-width: 8em;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.sub { color: #6e6e73; flex: 0 1 auto; min-width: 6em; white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; }
nav.tabs, .controls { flex: none; }
@media (max-width: 720px) { header { flex-wrap: wrap; } }
nav.tabs { display: flex; gap: 2px; }
nav.tabs a { padding: 3px 10px; border-radius: 6px; color: #0b61c4; text-decoration: none; }
nav.tabs a.on { background: #0b61c4; color: #fff; }
.controls { margin-left: auto; display: flex; gap: 8px; align-items: center; }
#fg-search { font: inherit; padding: 4px 8px; width: 220px; border: 1px solid #c8c8cc;
  border-radius: 6px; background: #fff; }
#fg-reset, #fg-track { font: inherit; padding: 4px 10px; border: 1px solid #c8c8cc;
  border-radius: 6px; background: #fff; cursor: pointer; }
#fg-reset { visibility: hidden; }
#fg-status { color: #8a2be2; height: 1.35em; line-height: 1.35em; padding: 0 16px 4px;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
#fg-range { color: #0b61c4; display: flex; gap: 6px; align-items: center; white-space: nowrap; }
#fg-range[hidden] { display: none; }
#fg-range button { font: inherit; padding: 1px 8px; border: 1px solid #c8c8cc; border-radius: 6px;
  background: #fff; cursor: pointer; }
.facts { padding: 2px 16px 4px; display: flex; flex-wrap: wrap; gap: 4px 18px; color: #333; }
.facts b { font-weight: 600; color: #6e6e73; }
.legend { padding: 2px 16px 4px; color: #444; display: flex; flex-wrap: wrap; gap: 4px 14px; }
.legend span.sw { display: inline-block; width: 10px; height: 10px; border-radius: 2px;
  margin-right: 5px; vertical-align: -1px; box-shadow: inset 0 0 0 1px rgba(0,0,0,0.15); }
#fg-wrap { margin: 6px 6px 12px; position: relative; }
#fg-canvas { position: absolute; left: 0; top: 0; outline: none; }
#fg-canvas:focus-visible { box-shadow: 0 0 0 2px #0b61c4; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0);
  white-space: nowrap; }
#fg-tip { position: fixed; display: none; max-width: 560px; white-space: pre-wrap;
  word-break: break-all; background: rgba(29,29,31,0.94); color: #f5f5f7; padding: 7px 9px;
  border-radius: 6px; font-size: 12px; line-height: 1.45; pointer-events: none;
  box-shadow: 0 4px 14px rgba(0,0,0,0.18); z-index: 4; }
footer { color: #8e8e93; padding: 0 16px 14px; font-size: 12px; }
.sw-grid { display: grid; grid-template-columns: minmax(420px, 46%) 1fr; gap: 12px;
  padding: 8px 12px; }
.sw-table { overflow: auto; max-height: calc(100vh - 130px); border: 1px solid #e3e3e6;
  border-radius: 6px; background: #fff; }
table.fn { border-collapse: collapse; width: 100%; font-size: 12px; }
table.fn th { position: sticky; top: 0; background: #f2f2f4; text-align: right;
  padding: 4px 6px; cursor: pointer; user-select: none; white-space: nowrap; }
table.fn th.name { text-align: left; }
table.fn td { padding: 2px 6px; text-align: right; white-space: nowrap;
  font-variant-numeric: tabular-nums; border-top: 1px solid #f0f0f2; }
table.fn td.name { text-align: left; overflow: hidden; text-overflow: ellipsis;
  max-width: 260px; font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
table.fn td.loc { text-align: left; color: #6e6e73; overflow: hidden; text-overflow: ellipsis;
  max-width: 220px; }
table.fn tr { cursor: pointer; }
table.fn tr:hover td { background: #f4f8fd; }
table.fn tr.sel td { background: #dbe9fb; }
.panel h2 { font-size: 13px; margin: 6px 0 4px; font-weight: 600; color: #444; }
.panel svg { display: block; }
.panel .note { color: #6e6e73; font-size: 12px; }
.panel svg text, #v-time svg text { font: FONTpx ui-monospace, "DejaVu Sans Mono", Menlo,
  Consolas, monospace; fill: #1d1d1f; pointer-events: none; }
.panel svg g, #v-time svg g { cursor: pointer; }
.panel svg g:hover rect, #v-time svg g:hover rect { stroke: #1d1d1f; stroke-width: 0.8; }
.empty { color: #6e6e73; padding: 20px 16px; }
#v-time { padding: 6px 12px 16px; }
.tl-bar { display: flex; gap: 10px; align-items: center; padding: 2px 0 6px; }
.tl-bar button { font: inherit; padding: 3px 10px; border: 1px solid #c8c8cc;
  border-radius: 6px; background: #fff; cursor: pointer; }
.tl-bar .note, .note { color: #6e6e73; font-size: 12px; }
canvas { display: block; }
.lane { margin: 4px 0 8px; border-top: 1px solid #e3e3e6; }
.lane-name { font-weight: 600; color: #444; padding: 3px 0; font-size: 12px; }
.lane canvas { cursor: crosshair; }
.flane { display: flex; align-items: stretch; }
.flane .fname { width: 250px; flex: none; padding: 0 8px 0 0; font-size: 12px; overflow: hidden;
  text-overflow: ellipsis; white-space: nowrap; text-align: right; color: #444;
  font-family: ui-monospace, "DejaVu Sans Mono", monospace; line-height: 16px; }
.flane canvas { cursor: crosshair; }
#v-time .panel { margin-top: 10px; }
#v-source { padding: 8px 16px 16px; }
#v-source .panel { max-width: 1400px; }
.panel .links { font-size: 12px; padding: 2px 0; }
.panel .links a { color: #0b61c4; }
table.src td { border-top: none; padding: 0 6px; }
table.src th, table.src td { width: 1%; }
table.src th.name, table.src td.code { width: auto; }
table.src td.ln { color: #8e8e93; }
table.src td.code { text-align: left; white-space: pre; font-family: ui-monospace,
  "DejaVu Sans Mono", Menlo, Consolas, monospace; color: #1d1d1f; }
table.src tr.hot td.code { background: #fff4ef; }
table.src td.code .cut { color: #8e8e93; }
table.src td.code mark.col { background: #ffd60a; color: inherit; }
table.src tr.gap td { color: #8e8e93; text-align: left; padding: 2px 6px; }
table.src tr:hover td { background: #f4f8fd; }
.tfbar { padding: 2px 16px 4px; display: flex; flex-wrap: wrap; gap: 4px 6px; align-items: center;
  color: #444; font-size: 12px; }
.tfbar .tf-title { color: #6e6e73; }
.tfbar button { font: inherit; padding: 1px 8px; border: 1px solid #c8c8cc; border-radius: 10px;
  background: #fff; cursor: pointer; max-width: 380px; overflow: hidden; text-overflow: ellipsis;
  white-space: nowrap; }
.tfbar button.on { border-color: #0b61c4; color: #0b61c4; }
.tfbar button.bad { text-decoration: line-through; color: #b3261e; }
.tfbar .tf-sep { color: #8e8e93; }
.tfbar input { font: inherit; padding: 1px 8px; width: 200px; border: 1px solid #c8c8cc;
  border-radius: 10px; margin-left: auto; }
#fg-menu { position: fixed; z-index: 5; background: #fff; border: 1px solid #c8c8cc;
  border-radius: 6px; box-shadow: 0 4px 14px rgba(0,0,0,0.18); padding: 4px 0; min-width: 250px;
  font-size: 12px; }
#fg-menu .menu-head { padding: 3px 12px 5px; color: #6e6e73; max-width: 360px; overflow: hidden;
  text-overflow: ellipsis; white-space: nowrap;
  font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
#fg-menu button { display: flex; width: 100%; justify-content: space-between; gap: 16px;
  font: inherit; padding: 3px 12px; border: none; background: none; text-align: left;
  cursor: pointer; }
#fg-menu button:hover, #fg-menu button:focus { background: #dbe9fb; outline: none; }
#fg-menu button[disabled] { color: #aeaeb2; cursor: default; background: none; }
#fg-menu kbd { font: inherit; color: #6e6e73; }
#v-bottomup, #v-calltree { padding: 6px 12px 16px; }
.tt-box { overflow: auto; max-height: calc(100vh - 150px); border: 1px solid #e3e3e6;
  border-radius: 6px; background: #fff; }
table.tt { outline: none; }
table.tt td.name { max-width: 520px; }
table.tt td.loc { max-width: 360px; }
table.tt .tog { display: inline-block; width: 1.1em; color: #6e6e73; }
table.tt tr.hit td.name { color: #8a2be2; font-weight: 600; }
table.tt tr.more td { color: #0b61c4; text-align: left; }
""".replace("FONT", str(FONT))

VIEWS = (("flame", "Flame"), ("time", "Time"), ("sandwich", "Sandwich"), ("bottomup", "Bottom-up"),
         ("calltree", "Call tree"), ("source", "Source"))


def html_document(
    fr: Frames,
    data: str,
    title: str,
    subtitle: str,
    legend: list,
    width: int,
    model: str,
    views: tuple[str, ...],
    source: str | None = None,
    index: str | None = None,
    facts: list[tuple[str, str, str]] | None = None,
    samples: str | None = None,
    fetches: bool = False,
) -> str:
    facts_html = "".join(
        f'<span data-fact="{esc(k)}"><b>{esc(label)}</b> {esc(value)}</span>'
        for k, label, value in facts or ()
    )
    if facts_html:
        facts_html = f'<div class="facts" id="fg-facts">{facts_html}</div>\n'
    legend_html = "".join(
        f'<span><span class="sw" style="background:{fill}"></span>{esc(label)}</span>'
        for fill, label in legend[:12]
    )
    # Only this exact script may run: a hash-pinned Content-Security-Policy, no network
    # (`fetches`: its own origin's, for a view read when opened).
    csp = page_csp("html", fetches)
    tabs = "".join(
        f'<a href="#view={v}" data-tab="{v}">{label}</a>' for v, label in VIEWS if v in views
    )
    sections = "".join(
        f'<section id="v-{v}" data-v="{v}" hidden></section>' for v in views if v != "flame"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{_PAGE_CSS}</style>\n</head>\n<body>\n"
        # The header sticks: title, tabs, search and Reset stay on screen while a tall
        # graph scrolls under them.
        f'<div class="top"><header><h1 title="{esc(title)}">{esc(title)}</h1>'
        f'<span class="sub" title="{esc(subtitle)}">{esc(subtitle)}</span>'
        f'<nav class="tabs">{tabs}</nav>'
        '<div class="controls"><select id="fg-track" aria-label="Track" hidden></select>'
        '<button id="fg-reset" type="button">Reset zoom</button>'
        '<input id="fg-search" type="search" placeholder="Search frames ( / )" '
        'aria-label="Search frames by name or location" autocomplete="off"></div></header>\n'
        f'{facts_html}<div class="legend">{legend_html}</div>\n<div id="fg-status"></div></div>\n'
        # Scripts off: no picture (the graph is drawn by the script from columns), a line
        # that says so and where the static picture comes from.
        '<main><section id="v-flame" data-v="flame"><noscript><p class="empty">This viewer '
        "draws with its script, and scripts are off here. Allow them for this file, or write "
        "the static picture with <code>jsprof flame TRACE -o flame.svg</code>.</p></noscript>"
        f'<div id="fg-wrap" style="height:{fr.height}px"><canvas id="fg-canvas" role="img" '
        'tabindex="0" aria-label="Flame graph. Arrow keys move between frames, Enter zooms '
        'into one, Escape resets; the frame\'s details are read out." aria-describedby="fg-live">'
        "</canvas></div>\n"
        '<div id="fg-live" class="sr-only" aria-live="polite"></div>\n'
        "<footer>Click a frame to zoom, Esc to reset; hover for details; with the graph "
        "focused, arrow keys move between frames and Enter zooms.</footer></section>"
        f"{sections}</main>\n"
        '<div id="fg-tip" role="tooltip"></div>\n'
        f'<script type="application/json" id="fg-data">{data}</script>\n'
        + "".join(f"<script>{m}</script>\n" for m in viewer_modules())
        + f"<script>{flame_script()}</script>\n"
        # The views' data after the script: the flame graph is drawn before these are read.
        f'<script type="application/json" id="fg-model">{model}</script>\n'
        + (f'<script type="application/json" id="fg-source">{source}</script>\n' if source else "")
        + (f'<script type="application/json" id="fg-index">{index}</script>\n' if index else "")
        + (f'<script type="application/json" id="fg-samples">{samples}</script>\n'
           if samples else "")
        + "</body>\n</html>\n"
    )
