"""Typed exceptions. Library code raises these; only cli.py turns them into exit codes."""


class JsprofError(Exception):
    """A user-facing error: the message is one line saying what, where and what to do."""


class TraceFormatError(JsprofError):
    """A trace file is malformed: the message names the file, field and index."""


class ErrorAt:
    """The one shape of a reader's message: `source: where: problem`.

    `prefix` goes before every `where` (e.g. `jsprof.tracks[1].trace.` or `profile.`).
    """

    __slots__ = ("source", "prefix")

    def __init__(self, source: str, prefix: str = "") -> None:
        self.source = source
        self.prefix = prefix

    def __call__(self, where: str, problem: str) -> TraceFormatError:
        return TraceFormatError(f"{self.source}: {self.prefix}{where}: {problem}")

    error = __call__


def shown(value: object, limit: int = 60) -> str:
    """`value` as a reader's message quotes it: its repr, cut to `limit` characters. A
    file's value is data of any size (a 5,000-character marker made a 5 kB error line)."""
    r = repr(value)
    return r if len(r) <= limit else f"{r[:limit]}... ({len(r):,} characters)"


class UsageError(JsprofError):
    """A command was called with arguments that cannot work."""


class EngineError(JsprofError):
    """An engine is missing, failed to start or failed while profiling."""


class JSError(JsprofError):
    """An uncaught JavaScript exception; `js_stack` holds the engine's stack text.

    `compile` is True when the script given did not compile (nothing of it ran): `where`
    then names the place, `file:line:column` (1-based), when the engine said it."""

    compile: bool = False
    where: str | None = None
    # What the user can do about it, when jsprof knows (one line, said after the error).
    hint: str | None = None

    def __init__(self, message: str, js_stack: str = "", name: str = "Error") -> None:
        super().__init__(message)
        self.js_stack = js_stack
        self.name = name
