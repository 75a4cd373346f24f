"""`jsprof fleet regressions`: which functions got slower from one release to the next.

Releases in version order when every one parses as a version (1.9.0 < 1.10.0), else in
the order of their first upload. Each consecutive pair is a `fleet diff` (shares of all
time, a 95 % interval from resampling traces); a function regressed at the first release
where its self share rose by more than `min_change` percentage points and the interval
of that rise excludes zero. It is reported once, with before/after, ms per page load and
a few of that release's upload ids.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ..errors import UsageError


def version_order(releases: list[str]) -> list[str] | None:
    """`releases` in version order when every one parses as a version, else None."""
    pat = re.compile(r"v?\d+(\.\d+)*")
    if not releases or not all(pat.fullmatch(r) for r in releases):
        return None
    return sorted(releases, key=lambda r: tuple(int(x) for x in r.lstrip("v").split(".")))


def regressions(s: Any, f: Any, min_change: float = 2.0, min_traces: int = 5,
                min_samples: int = 1000, reps: int = 200, examples: int = 3) -> dict:
    from . import api

    if f.release is not None:
        raise UsageError("fleet regressions compares every release in order; drop --release")
    if not 0 <= min_change < float("inf"):
        raise UsageError(f"--min-change {min_change}: expected percentage points, 0 or more")
    opts = api.options(s, f.app)
    # The rule of every query: a filter (--route, --env, --since, --where) that matches no
    # upload is a mistake, not "no regressions".
    api.require_match(s, f, len(s.engine.uploads(s.snap, f)))
    first_seen = list(reversed(opts["releases"]))  # options: newest first upload first
    order = version_order(first_seen) or first_seen
    found: list[dict] = []
    seen: set[tuple[str, str | None]] = set()
    skipped: list[dict] = []
    for before, after in zip(order, order[1:], strict=False):
        base_f, new_f = replace(f, release=before), replace(f, release=after)
        try:
            doc, _ = api.diff(s, base_f, new_f, None, (), min_traces, min_samples, None, reps)
        except UsageError as e:
            skipped.append({"release": after, "baseRelease": before, "reason": str(e)})
            continue
        loads_b = max(doc["base"]["pageLoads"], 1)
        loads_a = max(doc["new"]["pageLoads"], 1)
        ids = None
        for r in doc["rows"]:
            ci = r["selfPpCi"]
            key = (r["name"], r["resource"])
            if (key in seen or r["selfPp"] is None or r["selfPp"] <= min_change or ci is None
                    or not ci[0] > 0):
                continue
            seen.add(key)
            if ids is None:
                ids = [u["id"] for u in api.list_uploads(s, new_f, examples)["uploads"]]
            found.append({
                "name": r["name"], "resource": r["resource"], "line": r.get("line"),
                "release": after, "baseRelease": before,
                "beforeSelfPct": r["baseSelfPct"], "afterSelfPct": r["newSelfPct"],
                "selfPp": r["selfPp"], "selfPpCi": ci,
                "beforeMsPerLoad": round(r["baseSelfPct"] / 100 * doc["base"]["totalMs"]
                                         / loads_b, 3),
                "afterMsPerLoad": round(r["newSelfPct"] / 100 * doc["new"]["totalMs"]
                                        / loads_a, 3),
                "exampleIds": ids,
            })
    return {"releases": order, "minChangePp": min_change, "regressions": found,
            "skipped": skipped}
