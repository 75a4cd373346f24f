"""Matching one script across releases: bundlers rename it every build.

A release diff without source maps matches functions by name and resource, and bundlers
put a content hash or the version into each script's URL, so every function would look new
in NEW and removed from BASE. The rule (docs/field.md's "Field profiles" says it too), applied
to a resource's URL after its query and fragment are dropped:

- in the file name, a `.HASH` or `-HASH` part before the extension is taken out, where
  HASH is 8 or more hex digits with at least one digit (webpack `main.3f2a1c9b.chunk.js`
  -> `main.chunk.js`), or 8 to 12 characters of `A-Za-z0-9_` with a digit or a capital
  after the first letter beside a lower-case letter (Vite/Rollup/esbuild
  `index-DiwrgTda.js`, `index-B3KQ9XZP.js` -> `index.js`; `user-Settings.js` stays);
- a folder that is a version (`1.4.2`, `v2.0`, `1.4.2-rc.1`) or 8+ hex digits with a digit
  is taken out (`/static/1.4.2/app.js` -> `/static/app.js`).

`fleet diff --exact-resources` turns it off (resources must then be equal).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..analysis.diff import ResourceMatcher

_HEX = r"(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{8,}"
_B64 = r"(?=\w*[0-9]|\w+[A-Z])(?=\w*[a-z]|[0-9A-Z_]*[0-9])\w{8,12}"
# `.HEX` (webpack) anywhere before the extension; `-HASH` (Vite, Rollup, esbuild) last.
_FILE_HEX = re.compile(rf"\.{_HEX}(?=\.)")
_FILE_DASH = re.compile(rf"[-.](?:{_HEX}|{_B64})(?=\.[A-Za-z0-9]+$)")
_VERSION_DIR = re.compile(rf"^(?:v?\d+(?:\.\d+)+(?:[-+][0-9A-Za-z.-]+)?|{_HEX})$")


def strip_build_marks(url: str) -> str:
    """`url` with the content hash of its file name and its version folders taken out."""
    head, sep, path = _split_origin(url)
    parts = path.split("/")
    name = parts[-1]
    bare = _FILE_HEX.sub("", name)
    bare = _FILE_DASH.sub("", bare)
    dirs = [p for p in parts[:-1] if not _VERSION_DIR.match(p)]
    return head + sep + "/".join([*dirs, bare or name])


def _split_origin(url: str) -> tuple[str, str, str]:
    """(`https://host`, ``, `/path`) for a URL; ("", "", path) for a path."""
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/]*)(.*)$", url)
    if m:
        return m[1], "", m[2]
    return "", "", url


class ReleaseMatcher(ResourceMatcher):
    """ResourceMatcher whose match key also drops content hashes and version folders."""

    def own_key(self, url: str) -> str:
        return strip_build_marks(super().own_key(url))


def matcher(base: Iterable[str], new: Iterable[str], exact: bool = False) -> ResourceMatcher:
    """The matcher a release diff keys resources with (`exact`: as they are)."""
    cls = ResourceMatcher if exact else ReleaseMatcher
    return cls.for_pair(base, new)
