"""The page's console as a terminal shows it: Runtime.RemoteObjects formatted the way the
DevTools console prints them, and uncaught errors as their stacks."""

from __future__ import annotations


def _preview_value(p: dict) -> str:
    t = p.get("type")
    v = p.get("value", "")
    if t == "string":
        return repr_js_string(v)
    if t == "object" and p.get("subtype") not in (None, "null"):
        return v or p.get("subtype", "")
    return str(v)


def repr_js_string(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def format_remote(o: dict, top: bool = True) -> str:
    """A Runtime.RemoteObject as the console shows it (strings unquoted at the top level)."""
    t = o.get("type")
    if t == "string":
        return o.get("value", "") if top else repr_js_string(o.get("value", ""))
    if t == "undefined":
        return "undefined"
    if t == "boolean":
        return "true" if o.get("value") else "false"
    if t == "number":
        return o.get("description") or str(o.get("value"))
    if t == "bigint":
        return o.get("description") or str(o.get("unserializableValue", ""))
    if t == "symbol":
        return o.get("description", "Symbol()")
    if t == "function":
        return o.get("description", "function")
    sub = o.get("subtype")
    if sub == "null":
        return "null"
    if sub == "error":
        return o.get("description", "Error")
    pv = o.get("preview")
    if pv and sub in (None, "array", "typedarray"):
        props = pv.get("properties", [])
        if sub in ("array", "typedarray"):
            body = ", ".join(_preview_value(p) for p in props)
        else:
            body = ", ".join(f"{p.get('name')}: {_preview_value(p)}" for p in props)
        if pv.get("overflow"):
            body += ", …"
        if sub in ("array", "typedarray"):
            return f"[{body}]"
        cls = o.get("className", "Object")
        prefix = "" if cls == "Object" else cls + " "
        return prefix + "{" + body + "}"
    return o.get("description") or str(o.get("value", ""))


def format_console(args: list[dict]) -> str:
    """Arguments joined by spaces; a leading format string's %s %d %i %f %o %O %c apply."""
    if not args:
        return ""
    parts: list[str] = []
    rest = list(args)
    first = rest[0]
    if first.get("type") == "string" and "%" in first.get("value", "") and len(rest) > 1:
        fmt = first["value"]
        rest = rest[1:]
        out = []
        i = 0
        while i < len(fmt):
            ch = fmt[i]
            if ch == "%" and i + 1 < len(fmt):
                spec = fmt[i + 1]
                if spec == "%":
                    out.append("%")
                    i += 2
                    continue
                if spec in "sdifoOc" and rest:
                    a = rest.pop(0)
                    if spec == "c":
                        pass  # CSS: no meaning on a terminal
                    elif spec in "di":
                        v = a.get("value")
                        out.append(str(int(v)) if isinstance(v, (int, float)) and v == v else "NaN")
                    elif spec == "f":
                        v = a.get("value")
                        out.append(str(v) if isinstance(v, (int, float)) else "NaN")
                    else:
                        out.append(format_remote(a, top=spec == "s"))
                    i += 2
                    continue
            out.append(ch)
            i += 1
        parts.append("".join(out))
    parts.extend(format_remote(a) for a in rest)
    return " ".join(parts)


STDERR_TYPES = {"error", "warning", "assert", "trace"}


def exception_text(details: dict) -> str:
    """An uncaught error's stack, or the rejected value, as one text."""
    exc = details.get("exception") or {}
    if exc.get("subtype") == "error" and exc.get("description"):
        text = str(exc["description"])
        if "\n    at " not in text and details.get("url"):
            # A SyntaxError has no stack: where it is comes only beside it (0-based).
            line = int(details.get("lineNumber") or 0) + 1
            col = int(details.get("columnNumber") or 0) + 1
            text += f"\n    at {details['url']}:{line}:{col}"
        return text
    head = str(details.get("text") or "Uncaught")
    if exc:
        return f"{head} {format_remote(exc, top=False)}"
    return head
