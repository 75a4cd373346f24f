"""Finding and reading source maps, and the original sources they name: the file side of
`analysis.sourcemap` (which reads nothing), called by the CLI and fleet.

Where maps come from (`--sourcemap DIR|FILE`, or beside local scripts):
- a FILE: a `.map` applied to the resource whose name matches its `file` field (or to
  every resource but Node's own `node:` modules when the map names no file);
- a DIR: for each resource, `DIR/<basename>.map`, else the `//# sourceMappingURL=` of
  `DIR/<basename>`;
- with neither, a `file://` resource that exists locally: its `sourceMappingURL` comment
  (relative path or inline `data:` URL) or a `.map` beside it.
Map files are data: parsed as JSON with size limits, never evaluated. An original source
the map does not carry (`sourcesContent`) is read from a local file on demand, only to find
where a function ends.

The map classes and the model (numpy) are imported by the functions that read maps:
`local_map_named` (is there a map beside these scripts?) is asked by `record --engine
node`'s summary, which needs no numpy when there is none (recorded.py), nor orjson and
dataclasses (~13 ms of CPU to import: issue 32), imported where a map is read or applied.
"""

from __future__ import annotations

import base64
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlparse

from .errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .analysis.sourcemap import SourceMap
    from .trace import Recording

MAX_SOURCE_BYTES = 16 << 20  # an original source read to find where its functions end
_URL_COMMENT = re.compile(rb"[#@]\s*sourceMappingURL=(\S+)\s*(?:\*/)?\s*$")


def read_source(url: str) -> str | None:
    """The text of a local original source (a path or file:// URL), None when it is not
    a readable local file or is larger than MAX_SOURCE_BYTES."""
    path = _local_path(url)
    if path is None:
        return None
    try:
        st = path.stat()
        # Regular files only: a trace may name /dev/zero or a FIFO, which would never end.
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SOURCE_BYTES:
            return None
        with open(path, "rb") as f:
            raw = f.read(MAX_SOURCE_BYTES + 1)  # a file that grew since stat is still capped
    except OSError:
        return None
    if len(raw) > MAX_SOURCE_BYTES:
        return None
    return raw.decode("utf-8", "replace")


def _with_reader(sm: SourceMap) -> SourceMap:
    sm.read_source = read_source
    return sm


def _read_limited(path: Path) -> bytes:
    from .analysis.sourcemap import MAX_MAP_BYTES, SourceMapError

    try:
        if path.stat().st_size > MAX_MAP_BYTES:
            raise SourceMapError(f"{path}: larger than the {MAX_MAP_BYTES} byte source map limit")
        return path.read_bytes()
    except OSError as e:
        raise SourceMapError(f"{path}: cannot read source map ({e.strerror})") from None


def load_map(path: str | os.PathLike) -> SourceMap:
    import orjson

    from .analysis.sourcemap import SourceMap, SourceMapError

    p = Path(path)
    try:
        doc = orjson.loads(_read_limited(p))
    except orjson.JSONDecodeError as e:
        raise SourceMapError(f"{p}: not valid JSON ({e})") from None
    return _with_reader(SourceMap(doc, str(p), str(p.parent)))


def _map_url(script: Path) -> str | None:
    """The URL of the script's `sourceMappingURL` comment (in its last five lines)."""
    try:
        with open(script, "rb") as f:
            f.seek(max(0, script.stat().st_size - 65536))
            tail = f.read()
    except OSError:
        return None
    m = None
    for line in reversed(tail.splitlines()[-5:]):
        m = _URL_COMMENT.search(line.strip())
        if m:
            break
    return None if m is None else m.group(1).decode("utf-8", "replace")


def local_map_named(resources: list[str]) -> bool:
    """Whether `find_maps(resources, None)` finds a map to read (a local script's inline
    or existing sourceMappingURL target, or a `.map` beside it), without reading one."""
    for r in resources:
        local = _local_path(r)
        if local is None or not local.is_file():
            continue
        url = _map_url(local)
        if url is not None and (url.startswith("data:") or (local.parent / unquote(url)).is_file()):
            return True
        if local.with_name(local.name + ".map").is_file():
            return True
    return False


def _from_comment(script: Path) -> SourceMap | None:
    from .analysis.sourcemap import SourceMap, SourceMapError

    url = _map_url(script)
    if url is None:
        return None
    if url.startswith("data:"):
        header, _, payload = url.partition(",")
        raw = base64.b64decode(payload) if header.endswith(";base64") else unquote(payload).encode()
        import orjson

        try:
            sm = SourceMap(orjson.loads(raw), f"{script} (inline map)", str(script.parent))
            return _with_reader(sm)
        except orjson.JSONDecodeError as e:
            raise SourceMapError(f"{script}: inline source map is not valid JSON ({e})") from None
    target = script.parent / unquote(url)
    return load_map(target) if target.is_file() else None


def _local_path(resource: str) -> Path | None:
    if resource.startswith("file://"):
        return Path(unquote(urlparse(resource).path))
    if resource and "://" not in resource:
        return Path(resource)  # a path as given to the engine: absolute, or from the cwd
    return None


def _basename(resource: str) -> str:
    path = urlparse(resource).path if "://" in resource else resource
    return os.path.basename(path)


def script_lines_for(where: str | None) -> Callable[[str], list[int] | None]:
    """A script URL -> the line starts of the script as `find_maps` finds its map (in
    `where`, a DIR or beside a .map FILE, by its basename; else the local script itself),
    None when it is not there: where a long animation frame's entry point, given as a
    character offset, lies (`analysis.busy`)."""
    from .script_lines import line_starts

    cache: dict[str, list[int] | None] = {}

    def lines(url: str) -> list[int] | None:
        if url not in cache:
            if where is None:
                local = _local_path(url)
                path = None if local is None else str(local)
            else:
                d = Path(where) if os.path.isdir(where) else Path(where).parent
                base = _basename(url)
                path = str(d / base) if base else None
            text = None if path is None else read_source(path)
            cache[url] = None if text is None else line_starts(text)
        return cache[url]

    return lines


def find_maps(resources: list[str], where: str | None) -> dict[str, SourceMap]:
    """Source maps per resource, from `where` (a DIR or a .map FILE) or beside the scripts."""
    from .analysis.sourcemap import SourceMapError

    found: dict[str, SourceMap] = {}
    if where is not None and not os.path.exists(where):
        raise SourceMapError(f"{where}: no such file or directory (give a .map file or a folder)")
    if where is not None and not (os.path.isfile(where) or os.path.isdir(where)):
        # A socket or a FIFO: nothing to read maps from (it would be taken as no maps).
        raise SourceMapError(f"{where}: not a file or a folder (give a .map file or a folder)")
    single = load_map(where) if where is not None and os.path.isfile(where) else None
    for r in resources:
        sm = None
        if single is not None:
            if single.file is None:
                # a map naming no script: any script's but Node's own (no bundle is there)
                sm = None if r.startswith("node:") else single
            elif _basename(single.file) == _basename(r):
                sm = single
        elif where is not None:
            base = _basename(r)
            cand = Path(where) / f"{base}.map"
            if base and cand.is_file():
                sm = load_map(cand)
            elif base and (Path(where) / base).is_file():
                sm = _from_comment(Path(where) / base)
        else:
            local = _local_path(r)
            if local is not None and local.is_file():
                sm = _from_comment(local)
                beside = local.with_name(local.name + ".map")
                if sm is None and beside.is_file():
                    sm = load_map(beside)
        if sm is not None:
            found[r] = sm
    return found


def apply(
    rec: Recording,
    where: str | None = None,
    texts: dict[str, str] | None = None,
    notes: list[str] | None = None,
) -> Recording:
    """Every track with source maps applied (from `where`, else beside local scripts).
    `texts`, when given, gets the original sources the maps carry (`sourcesContent`) by
    their URL, for a viewer that shows them; `notes` a line per map that does not match
    its script (not applied: `analysis.sourcemap.apply_to_trace`), and one line when the
    maps `where` names fit no script of the recording (nothing was applied)."""
    from dataclasses import replace

    from .analysis import sourcemap
    from .trace import Recording, spans_without_calls

    tracks = []
    found = False
    for t in rec.tracks:
        maps = find_maps(t.trace.resources, where)
        found = found or bool(maps)
        if texts is not None:
            for sm in maps.values():
                for s, content in enumerate(sm.contents):
                    if content is not None:
                        texts.setdefault(sm.source_url(s), content)
        mapped = sourcemap.apply_to_trace(t.trace, maps, notes)
        tracks.append(
            replace(t, trace=mapped, spans=spans_without_calls(t.spans) if maps else t.spans)
        )
    if where is not None and not found and notes is not None:
        notes.append(_none_fits(rec, where))
    return Recording(tracks)


def _none_fits(rec: Recording, where: str) -> str:
    """The line for a --sourcemap FILE|DIR that fits none of the recording's scripts:
    without it the report is the recorded one and looks as if the map had been applied."""
    scripts = sorted({
        _basename(r) for t in rec.tracks for r in t.trace.resources
        if r and not r.startswith("node:") and _basename(r)
    })
    have = ", ".join(scripts[:4]) + (f" and {len(scripts) - 4} more" if len(scripts) > 4 else "")
    have = f"its scripts are {have}" if scripts else "it names no script"
    if os.path.isfile(where):
        file = load_map(where).file
        if file is None:  # applied to every script but Node's own: there was none
            return f"{where}: not applied: {have}"
        return (f"{where}: the source map of {_basename(file)} (its `file` field), a "
                f"script this trace does not run ({have}); not applied: give the map of one "
                "of them")
    return (f"{where}: no source map there for any script of this trace ({have}: looked for "
            "<script>.map, or the script with a sourceMappingURL comment); shown as recorded")


# The files the viewer may embed by default: scripts and pages, by their name.
SOURCE_SUFFIXES = (
    ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".mts", ".cts", ".html", ".htm", ".vue",
    ".svelte",
)


def embeddable(path: str | os.PathLike, roots: list[Path]) -> bool:
    """Whether the viewer may put the file at `path` in a page that gets shared: a script
    or page (by its suffix) inside one of `roots` (symlinks followed), in no hidden folder
    of it (.ssh, .git, .env...). A trace names its scripts itself, so a hostile one could
    name /etc/passwd or ~/.ssh/id_rsa; only the folders the user's command points at count."""
    try:
        p = Path(path).resolve(strict=True)
    except (OSError, RuntimeError):
        return False
    if not p.name.lower().endswith(SOURCE_SUFFIXES):
        return False
    for root in roots:
        if p.is_relative_to(root):
            if not any(part.startswith(".") for part in p.relative_to(root).parts):
                return True
    return False


def too_broad(root: Path) -> bool:
    """Whether a folder is too broad to read scripts from unless the user names it
    (--embed-source): the file system's root, the home folder or one holding it. A trace
    names its scripts itself: from there, any script the user has would go into a page
    that gets shared."""
    try:
        home = Path.home().resolve()
    except (RuntimeError, KeyError, OSError):  # no HOME and no passwd entry
        home = None
    return root == Path(root.anchor) or (home is not None and home.is_relative_to(root))


class SourceReader:
    """The text of a script by its resource URL, for `flame`'s source view: a source map's
    `sourcesContent` (`texts`, from `apply`), a local file inside `roots` (the trace's
    folder and the current one), or (for a URL that is no local file there, like
    `http://host/js/app.js`) the file under `embed_dir` at the URL's path (`DIR/js/app.js`),
    else its name (`DIR/app.js`). None when none is there; a local file outside those
    folders is not read (`refused` names it); files over MAX_SOURCE_BYTES are not read.
    `embedded` lists the local files read and the sources served from maps'
    `sourcesContent`, for the command to say what the page holds.
    A root that is `too_broad` (/, the home folder) does not count unless it is `embed_dir`:
    `broad` names those left out, and `broad_refused` those a file was not read for."""

    def __init__(
        self,
        embed_dir: str | None = None,
        texts: dict[str, str] | None = None,
        roots: list[str | os.PathLike] | None = None,
    ) -> None:
        if embed_dir is not None and not os.path.isdir(embed_dir):
            raise UsageError(
                f"--embed-source {embed_dir}: not a folder (give the folder that holds the "
                "scripts)"
            )
        self.base = Path(embed_dir).resolve() if embed_dir is not None else None
        self.texts = texts if texts is not None else {}  # filled later, by apply
        given = [Path(r).resolve() for r in (roots or [])]
        self.roots = [r for r in given if not too_broad(r) or r == self.base]
        self.broad = [r for r in dict.fromkeys(given) if r not in self.roots]
        if self.base is not None:
            self.roots.append(self.base)
        self.refused: set[str] = set()
        self.broad_refused: list[Path] = []
        self.embedded: list[str] = []

    def _read_local(self, path: Path | None) -> str | None:
        if path is None or not path.is_file():
            return None
        if not embeddable(path, self.roots):
            for root in self.broad:
                if root not in self.broad_refused and embeddable(path, [root]):
                    self.broad_refused.append(root)
            return None
        got = read_source(str(path))
        if got is not None:
            self.embedded.append(str(path))
        return got

    def __call__(self, url: str) -> str | None:
        if url in self.texts:
            # a map's sourcesContent goes into the page too: said with the local files
            # (the line named only the minified script whose map it came through)
            self.embedded.append(url)
            return self.texts[url]
        local = _local_path(url)
        got = self._read_local(local)
        if got is not None:
            return got
        if self.base is not None:
            path = unquote(urlparse(url).path if "://" in url else url).lstrip("/")
            for rel in (path, os.path.basename(path)):
                cand = (self.base / rel).resolve()
                # Only files inside DIR: a URL's `..` does not climb out of it.
                if rel and cand.is_relative_to(self.base):
                    got = self._read_local(cand)
                    if got is not None:
                        return got
        if local is not None and local.is_file():
            self.refused.add(url)
        return None


def source_reader(
    embed_dir: str | None = None,
    texts: dict[str, str] | None = None,
    roots: list[str | os.PathLike] | None = None,
) -> SourceReader:
    """A SourceReader (see there)."""
    return SourceReader(embed_dir, texts, roots)
