"""jsprof's helper inside each page and worker (js/chromium_page.js, plus the expressions
we evaluate): all of it carries the source URL `INTERNAL_URL`, and `strip_internal`
removes those frames (and built-ins, as the native Profiler does) from a CDP profile."""

from __future__ import annotations

import functools
from importlib import resources as _res

INTERNAL_URL = "jsprof-internal://chromium_page.js"
SOURCE_URL = f"\n//# sourceURL={INTERNAL_URL}"


_BEGIN, _END = "// ---- timeline: begin", "// ---- timeline: end"
_MARK = "/*jsprof:timeline*/"


def timeline_source() -> str:
    """The browser client's Timeline block (js/jsprof-client.js, between its markers) as
    plain script: one copy of what is observed and how, for the fleet and local runs."""
    text = _res.files("jsprof").joinpath("js", "jsprof-client.js").read_text("utf-8")
    block = text[text.index(_BEGIN) : text.index(_END)]
    return block.replace("export const ", "const ").replace("export function ", "function ")


@functools.cache
def attach_timeline_source() -> str:
    """What `record --cdp` evaluates in the tab it attaches to: the Timeline alone."""
    text = _res.files("jsprof").joinpath("js", "chromium_attach_timeline.js").read_text("utf-8")
    return text.replace(_MARK, timeline_source()) + SOURCE_URL


@functools.cache
def helper_source() -> str:
    """The helper, with the client's Timeline inlined, marked as ours."""
    text = _res.files("jsprof").joinpath("js", "chromium_page.js").read_text("utf-8")
    return text.replace(_MARK, timeline_source()) + SOURCE_URL


_PSEUDO = ("(root)", "(program)", "(idle)", "(garbage collector)")


def _dropped(cf: dict) -> bool:
    """jsprof's own code, or a built-in/API function (no script: scriptId 0), which the
    native Profiler never shows either (its time goes to the JavaScript caller)."""
    if cf.get("url") == INTERNAL_URL:
        return True
    return str(cf.get("scriptId", "")) == "0" and cf.get("functionName") not in _PSEUDO


def strip_internal(profile: dict) -> dict:
    """The profile without jsprof's own frames and built-ins (see `_dropped`): their
    children and samples go to the nearest caller; URL fragments are dropped, as the
    native Profiler does."""
    nodes = profile.get("nodes") or []
    by_id = {n["id"]: n for n in nodes}
    parent: dict[int, int] = {}
    for n in nodes:
        for c in n.get("children") or ():
            parent[c] = n["id"]
    internal = {n["id"] for n in nodes if _dropped(n.get("callFrame") or {})}
    has_fragment = any("#" in n.get("callFrame", {}).get("url", "") for n in nodes)
    if not internal and not has_fragment:
        return profile

    def keep(i: int) -> int:
        while i in internal and i in parent:
            i = parent[i]
        return i

    out_nodes = []
    for n in nodes:
        if n["id"] in internal and n["id"] in parent:
            continue
        m = dict(n)
        cf = m.get("callFrame")
        if cf and "#" in cf.get("url", ""):
            m["callFrame"] = dict(cf, url=cf["url"].split("#", 1)[0])
        kids: list[int] = []
        stack = list(n.get("children") or ())
        while stack:
            c = stack.pop(0)
            if c in internal:
                stack[:0] = list(by_id[c].get("children") or ())
            else:
                kids.append(c)
        m["children"] = kids
        out_nodes.append(m)
    out = dict(profile)
    out["nodes"] = out_nodes
    if internal:
        out["samples"] = [keep(s) if s in internal else s for s in profile.get("samples") or []]
    return out
