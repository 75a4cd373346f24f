"""A V8 CPU profile as the inspector sent it: the bytes of its reply to `Profiler.stop`,
kept unparsed until the track is made. A tsc recording's slices are some 7 MB of JSON
(31,000 nodes, each a dict of dicts once parsed); read in C straight into columns
(`formats._v8profile.read_profile_text`) they cost a fifth of the parse and the node
columns read from those dicts (issue 32). No numpy here: the CDP client imports this."""

from __future__ import annotations

import re
from typing import Any

# The reply to Profiler.stop as Node's inspector writes it (no sessionId: the main
# thread's; a worker's replies come quoted inside NodeWorker messages, and cdp.py matches
# them unquoted).
_REPLY = re.compile(rb'\{"id":(\d+),"result":\{"profile":')
_TAIL = b"}}"


class ProfileText:
    """One Profile's JSON text (`raw[start:]` up to the reply's closing braces)."""

    __slots__ = ("raw", "start", "_read", "_dict")

    def __init__(self, raw: bytes, start: int) -> None:
        self.raw, self.start = raw, start
        self._read: tuple | None = None
        self._dict: dict | None = None

    def read(self) -> tuple | None:
        """`formats._v8profile.read_profile`'s parts, read in C; None for text the C
        reader leaves to the checked path (`as_dict`, then read_profile)."""
        if self._read is None:
            from ..formats._v8profile import read_profile_text

            got = read_profile_text(self.raw, self.start)
            if got is None or self.raw[got[1]:].strip() != _TAIL:
                return None
            self._read = got[0]
        return self._read

    def num_samples(self) -> int:
        """How many samples it holds, counted in the text (a progress count, no parse: the
        text `"samples":[` cannot occur inside a JSON string, whose quotes are escaped)."""
        i = self.raw.find(b'"samples":[', self.start)
        if i < 0:
            return 0
        i += len(b'"samples":[')
        j = self.raw.find(b"]", i)
        return 0 if j <= i else self.raw.count(b",", i, j) + 1

    def as_dict(self) -> dict:
        if self._dict is None:
            import orjson

            self._dict = orjson.loads(self.raw)["result"]["profile"]
        return self._dict

    def get(self, key: str, default: Any = None) -> Any:
        """As the parsed Profile's dict would answer (a slice's endTime, when Node was
        killed: parsed then)."""
        return self.as_dict().get(key, default)


def reply_with_profile(raw: bytes) -> dict | None:
    """A reply to Profiler.stop as {"id", "result": {"profile": ProfileText}}, unparsed;
    None for any other message."""
    m = _REPLY.match(raw)
    if m is None or not raw.endswith(_TAIL):
        return None
    return {"id": int(m[1]), "result": {"profile": ProfileText(raw, m.end())}}
