"""Source transform: register every class with the instrumenting runtime as it is created.

Parsed with tree-sitter-javascript (a real parser: strings, comments, regexps and template
literals never confuse it). Only insertions are made, never on a new line, so every line
number in the program (stack traces, `Error().stack`, sampled profiles) stays the same;
columns to the right of an insertion on the same line shift.

- `class Shape {...}` (statement, also `export`/`export default`) ->
  `class Shape {...};Shape=__jsprof_register(Shape,"Shape",LINE);` -- the binding a class
  declaration creates is mutable, so it is rebound to the registered (construct-trapping)
  class, and every later `new Shape()` / `extends Shape` outside the body sees it.
- a class expression `class {...}` -> `(__jsprof_register(class {...},"Hint",LINE,1))`;
  the parentheses keep `new class {...}()` meaning what it meant, the hint and the flag
  say what name the spec would have inferred (`const C = class {}` -> "C"), which the
  wrapping call would otherwise lose.
- `export default class {...}` (anonymous: its binding cannot be rebound) -> a static
  block registering `this`, so its methods are watched but its constructor is not.
- inside a named class's own body, `new Shape(...)` and `extends Shape` ->
  `new (__jsprof_register(Shape,"Shape",LINE,3))(...)`: the inner binding is the raw
  class, so a static factory (`static make(n) { return new Shape(n) }`), a subclass
  defined in the body, or a static field (`static ORIGIN = new Shape(0)`, registering the
  class early) would otherwise construct past the watched class uncounted.

Sources that do not parse are returned unchanged: the engine then reports the syntax
error at the original position.

Run as `python -m jsprof.instrument.transform FILE` (or `-` for stdin) it prints the
transformed source (the Node loader uses that for files it meets during the run).
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any

REGISTER = "__jsprof_register"


@functools.cache
def _parser() -> Any:
    try:
        import tree_sitter
        import tree_sitter_javascript
    except ImportError as e:  # pragma: no cover - a dependency of the package
        from ..errors import EngineError

        raise EngineError(
            f"the instrumenting profiler needs tree-sitter-javascript ({e}); "
            "reinstall jsprof (`pip install -e .`)"
        ) from None
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_javascript.language()))


def _js_str(s: str) -> str:
    # JSON string literals are valid JS string literals (U+2028/9 too, since ES2019).
    return json.dumps(s)


def _inferred_name(node: Any) -> tuple[str | None, bool]:
    """(label for the report, whether the spec's NamedEvaluation would give the class it)."""
    parent = node.parent
    if parent is None:
        return None, False
    t = parent.type
    if t == "variable_declarator" and parent.child_by_field_name("value") == node:
        name = parent.child_by_field_name("name")
        if name is not None and name.type == "identifier":
            return name.text.decode(), True
    if t in ("assignment_expression", "assignment_pattern"):
        left = parent.child_by_field_name("left")
        if left is not None and parent.child_by_field_name("right") == node:
            if left.type in ("identifier", "shorthand_property_identifier_pattern"):
                return left.text.decode(), True
            if left.type == "member_expression":
                prop = left.child_by_field_name("property")
                # obj.X = class {} infers no name, but "X" is still the best label.
                return (prop.text.decode() if prop is not None else None), False
    if t == "pair" and parent.child_by_field_name("value") == node:
        key = parent.child_by_field_name("key")
        if key is not None and key.type in ("property_identifier", "identifier"):
            return key.text.decode(), True
        if key is not None and key.type == "string":
            return key.text.decode()[1:-1], True
    if t == "field_definition":
        prop = parent.child_by_field_name("property")
        if prop is not None and prop.type == "property_identifier":
            return prop.text.decode(), True
    if t == "export_statement":
        return "default", True
    return None, False


def _inner_binding_edits(body: Any, name: str, line: int, edits: list) -> None:
    """`new Shape(...)` and `extends Shape` inside Shape's own body use the class's inner
    binding, which is the raw class (the language does not let it be rebound): route them
    through the registration call, which returns the watched class (registering it first
    when a static initializer runs before the class is complete)."""
    stack = list(body.children)
    while stack:
        node = stack.pop()
        if node.type in ("class_declaration", "class"):
            inner = node.child_by_field_name("name")
            if inner is not None and inner.text.decode() == name:
                continue  # a nested class of the same name: its own binding from here on
        target = None
        if node.type == "new_expression":
            target = node.child_by_field_name("constructor")
        elif node.type == "class_heritage":
            target = next((c for c in node.named_children), None)
        if target is not None and target.type == "identifier" and target.text.decode() == name:
            edits.append((target.start_byte, 500, f"({REGISTER}("))
            edits.append((target.end_byte, -500, f",{_js_str(name)},{line},3))"))
        stack.extend(node.children)


def transform(source: str) -> str:
    """The source with a registration call for every class (see the module docstring)."""
    if "class" not in source:
        return source  # the cheap common case: nothing to register
    data = source.encode("utf-8")
    tree = _parser().parse(data)
    if tree.root_node.has_error:
        return source
    # (byte offset, order, text): at one offset, closers of inner classes go first,
    # then openers of outer classes (outermost first).
    edits: list[tuple[int, int, str]] = []
    stack = [(tree.root_node, 0)]
    while stack:
        node, depth = stack.pop()
        for child in node.children:
            stack.append((child, depth + 1))
        line = node.start_point[0] + 1
        if node.type == "class_declaration":
            name = node.child_by_field_name("name")
            if name is None:
                continue
            n = name.text.decode()
            end = node.parent.end_byte if node.parent.type == "export_statement" else node.end_byte
            edits.append((end, -depth, f";{n}={REGISTER}({n},{_js_str(n)},{line});"))
        elif node.type == "class" and node.is_named:
            body = node.child_by_field_name("body")
            name = node.child_by_field_name("name")
            if node.parent is not None and node.parent.type == "export_statement":
                # `export default class {}`: the default binding cannot be rebound.
                label = name.text.decode() if name is not None else "default"
                text = f"static{{{REGISTER}(this,{_js_str(label)},{line},2)}}"
                edits.append((body.start_byte + 1, 1000 + depth, text))
                continue
            if name is not None:
                label, infer = name.text.decode(), False
            else:
                label, infer = _inferred_name(node)
            edits.append((node.start_byte, 1000 + depth, f"({REGISTER}("))
            hint = _js_str(label) if label is not None else "void 0"
            edits.append((node.end_byte, -depth, f",{hint},{line},{int(infer)}))"))
        if node.type in ("class_declaration", "class") and node.is_named:
            name = node.child_by_field_name("name")
            body = node.child_by_field_name("body")
            if name is not None and body is not None:
                _inner_binding_edits(body, name.text.decode(), line, edits)
    if not edits:
        return source
    edits.sort(key=lambda e: (e[0], e[1]))
    out = bytearray()
    pos = 0
    for off, _, text in edits:
        out += data[pos:off]
        out += text.encode("utf-8")
        pos = off
    out += data[pos:]
    return out.decode("utf-8")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[0] == "-":
        source = sys.stdin.buffer.read().decode("utf-8")
    else:
        with open(argv[0], encoding="utf-8") as f:
            source = f.read()
    sys.stdout.buffer.write(transform(source).encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
