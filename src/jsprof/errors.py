"""Typed exceptions. Library code raises these; only cli.py turns them into exit codes."""


class JsprofError(Exception):
    """A user-facing error: the message is one line saying what, where and what to do."""


class TraceFormatError(JsprofError):
    """A trace file is malformed: the message names the file, field and index."""


class UsageError(JsprofError):
    """A command was called with arguments that cannot work."""


class EngineError(JsprofError):
    """An engine is missing, failed to start or failed while profiling."""


class JSError(JsprofError):
    """An uncaught JavaScript exception; `js_stack` holds the engine's stack text."""

    def __init__(self, message: str, js_stack: str = "", name: str = "Error") -> None:
        super().__init__(message)
        self.js_stack = js_stack
        self.name = name
