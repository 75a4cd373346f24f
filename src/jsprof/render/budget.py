"""`jsprof budget`'s readable text, drawn from its `--json` document (one document, two
renderings), and the facts its flame diff page shows under the header."""

from __future__ import annotations

from typing import Any

from ..words import printable
from .base import Renderer

WHY = {
    "slower": "NEW is slower than the budget allows",
    "faster": "NEW is faster by more than the budget",
    "same": "any change is within the budget",
    "unsure": "not decided",
}


def _pct(x: float | None) -> str:
    return "unbounded" if x is None else f"{x:+.1f}%"


def _interval(ci: list) -> str:
    return f"{_pct(ci[0])} to {_pct(ci[1])}"


def _location(c: dict) -> str:
    return f" ({printable(c['resource'])})" if c.get("resource") else ""


class BudgetText(Renderer):
    """The verdict, its interval and rounds, then the functions that changed (the one that
    explains most first), each with its ms per run before -> after and its interval."""

    kind = "text"
    extension = ".txt"

    def render(self, doc: dict) -> str:
        level = f"{100.0 * doc['ciLevel']:.4g}%"
        v = doc["verdict"]
        budget = f"+{doc['budgetPct']:.3g}%"
        if doc.get("maxSlowerMs") is not None:
            budget += f" (the larger of {doc['maxSlowerPct'] or 0:g}% and "
            budget += f"{doc['maxSlowerMs']:g} ms)"
        lines = [f"{v.upper()}: {WHY[v]} ({budget})"]
        left_out = doc.get("unmeasuredRuns") or 0
        if doc["changePct"] is None:
            lines.append(f"  too few runs measured anything to compare ({doc['rounds']} "
                         f"rounds a side, {left_out} runs measured 0 ms)")
        else:
            lines.append(
                f"  {doc['metric']}: {doc['beforeMsPerRun']:.3f} -> {doc['afterMsPerRun']:.3f} "
                f"({doc['changePct']:+.1f}%, {level} interval {_interval(doc['interval'])})"
            )
        why = {"decided": "decided", "time cap": f"time cap {doc['timeCapS']:g} s reached",
               "max rounds": f"--max-rounds {doc['maxRounds']} reached"}[doc["stoppedBy"]]
        lines.append(
            f"  {doc['rounds']} rounds a side on {doc['engine']} ({doc['clock']} clock), "
            f"{doc['elapsedS']:.0f} s; {why}"
        )
        if left_out:
            lines.append(f"  {left_out} runs left out: no sample outside waiting (the work is "
                         "shorter than the sampling interval, or the engine hardly ran)")
        if v == "unsure":
            lines.append("  more rounds (--max-rounds, --time-cap) or a quieter machine "
                         "narrow the interval")
        changed = doc["changed"]
        if changed:
            lines.append(f"functions that changed (self ms per run, {level} intervals; "
                         "the one that explains most first):")
            for c in changed:
                lines.append(
                    f"  {printable(c['name'])}{_location(c)}: {c['beforeMsPerRun']:.2f} -> "
                    f"{c['afterMsPerRun']:.2f} ms ({c['changeMsPerRun']:+.2f} ms, interval "
                    f"{c['changeMsCi'][0]:+.2f} to {c['changeMsCi'][1]:+.2f}; "
                    f"{_interval(c['changePctCi'])}); {c['explainsPct']:.0f}% of the change"
                )
        elif v == "slower":
            lines.append("no single function's change stands out from the noise: the time "
                         "moved a little everywhere (see the flame diff)")
        return "\n".join(lines) + "\n"


def summary_text(res: Any) -> str:
    return BudgetText().render(res.json())


def facts(res: Any) -> list[tuple[str, str, str]]:
    """The flame diff page's header lines: the verdict and its numbers."""
    doc = res.json()
    out = [("verdict", "verdict", doc["verdict"])]
    if doc["changePct"] is not None:
        out.append(("change", "change",
                    f"{doc['changePct']:+.1f}% ({_interval(doc['interval'])})"))
    out.append(("rounds", "rounds", str(doc["rounds"])))
    out.append(("metric", "metric", doc["metric"]))
    if doc["changed"]:
        out.append(("first", "changed most", doc["changed"][0]["name"]))
    return out
