"""One script across releases: bundlers rename it every build.

Bundlers put a content hash or the version into each script's URL, so without a rule every
function would be one function per release: listed once per release in an all-releases
`fleet top`, split in the merged flame graph, new in NEW and removed from BASE in a diff.
The rule (docs/field.md's "One function across releases" says it too) names each script by
its URL with:

- its `?query` and `#fragment` dropped (cache busters: `app.js?v=1.4.2`);
- in the file name, a `.HASH` or `-HASH` part before the extension taken out, where
  HASH is 8 or more hex digits with at least one digit (webpack `main.3f2a1c9b.chunk.js`
  -> `main.chunk.js`), or 8 to 12 characters of `A-Za-z0-9_` with a digit or a capital
  after the first letter beside a lower-case letter (Vite/Rollup/esbuild
  `index-DiwrgTda.js`, `index-B3KQ9XZP.js` -> `index.js`; `user-Settings.js` stays);
- a folder that is a version (`1.4.2`, `v2.0`, `1.4.2-rc.1`) or 8+ hex digits with a digit
  taken out (`/static/1.4.2/app.js` -> `/static/app.js`).

Every fleet query applies it where a release's frames are read (`release.named`,
after source maps), so top, flame, the dashboard, diff and regressions see one identity.
`--url-rule REGEX=REPL` (HTTP `url_rule=`, repeatable) adds a substitution after it (Python
`re.sub`, in order; REPL may use `\\1`); `--url-rule none` drops what came before it (the
default too): `--url-rule none` alone keeps URLs as recorded. `fleet diff
--exact-resources` is `--url-rule none` for the diff's matching.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..analysis.diff import (  # the rule's URL part: the store's rollups group by it too
    ResourceMatcher,
    match_resource,
    strip_build_marks,
)
from ..errors import UsageError


class ReleaseMatcher(ResourceMatcher):
    """ResourceMatcher whose match key also drops content hashes and version folders."""

    def own_key(self, url: str) -> str:
        return strip_build_marks(super().own_key(url))


def matcher(base: Iterable[str], new: Iterable[str], exact: bool = False) -> ResourceMatcher:
    """The matcher a release diff keys resources with (`exact`: as they are)."""
    cls = ResourceMatcher if exact else ReleaseMatcher
    return cls.for_pair(base, new)


MAX_RULES = 20
MAX_RULE_CHARS = 500


class ScriptIdentity:
    """A script URL -> the name it has across releases (the module's rule, then the
    `--url-rule` substitutions)."""

    def __init__(self, rules: Sequence[str] = (), option: str = "--url-rule") -> None:
        self.default = True
        self.subs: list[tuple[re.Pattern[str], str]] = []
        if len(rules) > MAX_RULES:
            raise UsageError(f"{option}: {len(rules)} rules; at most {MAX_RULES}")
        for i, rule in enumerate(rules):
            if rule == "none":
                self.default = False
                self.subs = []
                continue
            where = f"{option} {rule[:60]!r} (number {i + 1})"
            if len(rule) > MAX_RULE_CHARS:
                raise UsageError(f"{where}: longer than {MAX_RULE_CHARS} characters")
            pattern, eq, repl = rule.rpartition("=")
            if not eq or not pattern:
                raise UsageError(f"{where}: expected REGEX=REPL (e.g. '/build-[0-9]+/=/'), "
                                 "or none")
            try:
                rx = re.compile(pattern)
                rx.sub(repl, "")  # a bad group reference in REPL fails here, not mid-query
            except (re.error, IndexError) as e:
                raise UsageError(f"{where}: {e}") from None
            self.subs.append((rx, repl))
        self._memo: dict[str, str] = {}

    @property
    def exact(self) -> bool:
        """URLs kept as recorded."""
        return not self.default and not self.subs

    def __call__(self, url: str | None) -> str | None:
        if url is None:
            return None
        got = self._memo.get(url)
        if got is None:
            u = url
            if self.default:
                u = strip_build_marks(match_resource(u) or u)
            for rx, repl in self.subs:
                u = rx.sub(repl, u)
            got = self._memo[url] = u or url
        return got
