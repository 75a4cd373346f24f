"""The names V8 gives JavaScript functions, read from their source.

One parse of a script (tree-sitter) gives every function its place and the name V8 would
print for it in a profile (a `.cpuprofile`'s `callFrame.functionName`), so that a frame
can be named from the code the developer wrote: a source map's original source (a
minified receiver such as `f.parseStatement` becomes acorn's `pp$8.parseStatement`) or,
on QuickJS, a script whose anonymous functions QuickJS leaves unnamed (`pp.next =
function () {}` is `pp.next` under V8, nameless under QuickJS).

V8's rules, as measured on node 20 (tests/test_names.py pins them on V8 itself):
- a function's own name wins: its declared name (`var Node = function Node() {}` ->
  `Node`), a method's key (`get x`, `set x`, `#p`, `'str key'`, `7`), a class's
  constructor is the class, and the ES2015 name a definition gets where it is the value
  of a variable (`var f = function () {}`, `const f = () => {}`), of an assignment to a
  plain identifier, of an object literal's key (`{k: function () {}}` -> `k`), of a class
  field, or of a default (`f = function () {}`);
- otherwise the name V8's parser infers (FuncNameInferrer): the assignment targets and
  literal keys it sits under, joined by dots (`a.b.c = function () {}` -> `a.b.c`,
  `o.q = o.r || function () {}` -> `o.q`, `var o = {a: [function () {}]}` -> `o.a`),
  `prototype` left out (`X.prototype.m` -> `X.m`), `this` left out and a computed key
  as `<computed>` (`o[k] = ...` -> `o.<computed>`, but `o["s"]` -> `o.s`), two variable
  names in a row as the last one, a chain of assignments as all of them
  (`a.x = b.y = function () {}` -> `a.x.b.y`), and inside a function whose own name
  starts with a capital letter (a constructor) that name first (`function T() {
  this.m = function () {} }` -> `T.m`);
- but an arrow function or a call that completes while a function still waits for its
  name takes it out of the inferrer's list: of array elements or a ternary's branches
  `[() => 1, () => 2]` only the last arrow is named, of `[function () {}, f(x)]` none
  (two function expressions in a row are both named);
- nothing else: a function passed as an argument, returned or called at once is
  anonymous (``).
A few inferences V8 makes from the parser's state rather than the syntax (an arrow in a
call's arguments named after an assignment later in the same statement) are not made.

Positions: engines report a function at different tokens (V8 the `(` of its parameters,
QuickJS the `function` keyword, a method's key or an arrow's first parameter; a source
map moves either to a nearby original token), so a position is looked up in the
function's *head*: from its first character to the start of its body.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Set
from typing import Any, NamedTuple

from .trace import ProfilerTrace

FUNCTION_TYPES = (
    "function_declaration",
    "function_expression",
    "generator_function_declaration",
    "generator_function",
    "arrow_function",
    "method_definition",
)
_DECLARATIONS = ("function_declaration", "generator_function_declaration")
_EXPRESSIONS = ("function_expression", "generator_function")
# What a function's name sees through on its way up to an assignment or a key: V8's
# inferrer keeps the names it has while it parses these.
_THROUGH = frozenset(
    {
        "parenthesized_expression",
        "ternary_expression",
        "binary_expression",
        "sequence_expression",
        "array",
        "object",
        "await_expression",
    }
)
_VAR, _LITERAL, _ENCLOSING = 0, 1, 2
MAX_TEXT_CHARS = 64 << 20  # a source larger than this is not parsed for names


class JsFunction(NamedTuple):
    """One function of a script: its V8 name ('' when V8 has none) and where it is,
    1-based lines and columns (characters): its first character, the position V8 reports
    for it (the `(` of its parameters; an arrow's and a class's first character) and
    its body's first character; and its last line."""

    name: str
    line: int
    column: int
    v8_line: int
    v8_column: int
    body_line: int
    body_column: int
    end_line: int  # its last line (0: unknown, the function does not parse cleanly)


# At a class's first character V8 reports its default constructor (a class without a
# constructor of its own; named as the class) and the function running its instance
# fields' initializers (`<instance_members_initializer>`); a constructor of its own is at
# `constructor(` (measured, Node 20).
_CLASS_TYPES = ("class_declaration", "class", "abstract_class_declaration")
# a class field (TypeScript's grammar calls it public_field_definition, its key `name`)
_FIELD_TYPES = ("field_definition", "public_field_definition")
# An original source in TypeScript (a source map's, typically) is read with TypeScript's
# grammar: JavaScript's loses a class's methods at the first type annotation.
DIALECTS = ("javascript", "typescript", "tsx")
_TS_SUFFIXES = {".ts": "typescript", ".mts": "typescript", ".cts": "typescript",
                ".tsx": "tsx"}


def dialect_of(url: str) -> str:
    """The grammar a script's URL or path asks for: TypeScript's for .ts/.mts/.cts, TSX's
    for .tsx, else JavaScript's."""
    path = url.split("?", 1)[0].split("#", 1)[0].lower()
    dot = path.rfind(".")
    return _TS_SUFFIXES.get(path[dot:], "javascript") if dot >= 0 else "javascript"


@functools.cache
def _language(dialect: str = "javascript") -> Any:
    import tree_sitter

    if dialect == "javascript":
        import tree_sitter_javascript

        return tree_sitter.Language(tree_sitter_javascript.language())
    import tree_sitter_typescript

    grammar = (
        tree_sitter_typescript.language_tsx
        if dialect == "tsx"
        else tree_sitter_typescript.language_typescript
    )
    return tree_sitter.Language(grammar())


@functools.cache
def _query(dialect: str = "javascript") -> Any:
    import tree_sitter

    language = _language(dialect)
    kinds = " ".join(
        f"({t})" for t in FUNCTION_TYPES + _CLASS_TYPES if language.id_for_node_kind(t, True)
    )
    return tree_sitter.Query(language, f"[{kinds}] @f")


def parse(text: str, dialect: str = "javascript") -> Any:
    """The tree-sitter tree of `text` (JavaScript, or TypeScript: `DIALECTS`)."""
    import tree_sitter

    return tree_sitter.Parser(_language(dialect)).parse(text.encode("utf-8"))


class FunctionNames:
    """Every function of one script with its V8 name, looked up by position (`at`)."""

    def __init__(self, text: str, dialect: str = "javascript") -> None:
        self._lines = text.split("\n")
        self._ascii = text.isascii()
        tree = parse(text, dialect)
        self._root = tree.root_node
        self.has_error = bool(tree.root_node.has_error)
        import tree_sitter

        nodes = tree_sitter.QueryCursor(_query(dialect)).captures(tree.root_node).get("f", [])
        heads = []
        for node in nodes:
            body = node.child_by_field_name("body")
            if body is None:
                continue
            heads.append((tuple(node.start_point), tuple(body.start_point), node))
        heads.sort(key=lambda h: h[0])
        self._starts = [h[0] for h in heads]
        self._ends = [h[1] for h in heads]
        self._nodes = [h[2] for h in heads]
        self._names: dict[int, str] = {}
        # dropped_functions of the bodies asked about so far: naming the few functions a
        # profile sampled walks only the bodies that hold them (a source map's whole
        # original sources were walked: 1.3 s of a 3.8 s report of prettier on QuickJS)
        self._dropped: set[int] = set()
        self._scopes: set[int] = set()

    def __len__(self) -> int:
        return len(self._nodes)

    def _point(self, line: int, column: int) -> tuple[int, int] | None:
        row = line - 1
        if not 0 <= row < len(self._lines):
            return None
        col = max(column - 1, 0)
        if not self._ascii:
            col = len(self._lines[row][:col].encode("utf-8"))
        return row, col

    def _char_col(self, row: int, byte_col: int) -> int:
        if self._ascii:
            return byte_col + 1
        return len(self._lines[row].encode("utf-8")[:byte_col].decode("utf-8", "replace")) + 1

    def index_at(self, line: int, column: int) -> int | None:
        """The innermost function whose head (first character to its body's) holds the
        1-based position, by its index; None outside every head."""
        p = self._point(line, column)
        if p is None:
            return None
        i = bisect.bisect_right(self._starts, p) - 1
        # A head holds another only through a default parameter: look a few back.
        for j in range(i, max(i - 8, -1), -1):
            if self._starts[j] <= p < self._ends[j]:
                return j
        return None

    def name(self, i: int) -> str:
        got = self._names.get(i)
        if got is None:
            node = self._nodes[i]
            scope = scope_of(node)
            if scope.id not in self._scopes:
                self._scopes.add(scope.id)
                self._dropped |= dropped_in_scope(scope)
            got = self._names[i] = v8_name(node, self._dropped)
        return got

    def function(self, i: int) -> JsFunction:
        (r, c), (br, bc) = self._starts[i], self._ends[i]
        node = self._nodes[i]
        # V8: an arrow at its first character (`async` included), others at `(`
        params = None if node.type == "arrow_function" else node.child_by_field_name("parameters")
        vr, vc = tuple((params or node).start_point)
        return JsFunction(
            self.name(i),
            r + 1,
            self._char_col(r, c),
            vr + 1,
            self._char_col(vr, vc),
            br + 1,
            self._char_col(br, bc),
            0 if node.has_error else int(node.end_point.row) + 1,
        )

    def at(self, line: int, column: int) -> JsFunction | None:
        """The function whose head holds the 1-based position (see `index_at`)."""
        i = self.index_at(line, column)
        return None if i is None else self.function(i)

    def initializer_at(self, line: int, column: int) -> tuple[str, int, int] | None:
        """V8's name and 1-based place for the function that runs a class's field
        initializers when the position is in one (outside any function of its own):
        `<instance_members_initializer>` for instance fields, at the class's first
        character; `<static_initializer>` for static fields and static blocks, at the
        `static` of the class's last static field, else of its first static block
        (measured, Node 20). QuickJS runs static ones in nameless functions placed at the
        first initializer's code and a static block's `{`."""
        p = self._point(line, column)
        if p is None:
            return None
        node = self._root.descendant_for_point_range(p, p)
        while node is not None:
            t = node.type
            if t in FUNCTION_TYPES:
                return None
            member = node if t == "class_static_block" else None
            if t in _FIELD_TYPES and node.parent is not None and (
                node.parent.type == "class_body"
            ):
                member = node
            if member is not None:
                body = member.parent
                cls = body.parent if body is not None else None
                if member.type in _FIELD_TYPES and not _is_static(member):
                    at = cls if cls is not None and cls.type in _CLASS_TYPES else member
                    return "<instance_members_initializer>", *self._v8_point(at)
                statics = [m for m in body.named_children if m.type in _FIELD_TYPES
                           and _is_static(m)] if body is not None else []
                blocks = [m for m in body.named_children if m.type == "class_static_block"
                          ] if body is not None else []
                at = statics[-1] if statics else (blocks[0] if blocks else member)
                return "<static_initializer>", *self._v8_point(at)
            node = node.parent
        return None

    def _v8_point(self, node: Any) -> tuple[int, int]:
        r, c = node.start_point
        return r + 1, self._char_col(r, c)

    def functions(self) -> list[JsFunction]:
        return [self.function(i) for i in range(len(self._nodes))]


def _text(node: Any) -> str:
    return node.text.decode("utf-8", "replace")


def _key_name(key: Any) -> str | None:
    """A property key's static name (None for a computed one)."""
    t = key.type
    if t in ("property_identifier", "private_property_identifier", "identifier", "number"):
        return _text(key)
    if t == "string":
        return "".join(_text(c) for c in key.named_children if c.type == "string_fragment")
    return None


def _unparen(node: Any) -> Any:
    while node is not None and node.type == "parenthesized_expression":
        node = node.parent
    return node


def _class_name(cls: Any) -> str:
    name = cls.child_by_field_name("name")
    if name is not None:
        return _text(name)
    return _own_context_name(cls) or ""


def _own_context_name(node: Any) -> str | None:
    """The ES2015 name an anonymous function or class gets from where it stands (the
    value of a variable, of an assignment to an identifier, of a literal key or class
    field, a default, `export default`), None elsewhere. Parentheses do not hide it."""
    child = node
    parent = node.parent
    while parent is not None and parent.type == "parenthesized_expression":
        child, parent = parent, parent.parent
    if parent is None:
        return None
    t = parent.type
    if t == "variable_declarator" and parent.child_by_field_name("value") == child:
        target = parent.child_by_field_name("name")
        return _text(target) if target.type == "identifier" else None
    if t in ("assignment_expression", "assignment_pattern", "object_assignment_pattern"):
        if parent.child_by_field_name("right") == child:
            target = parent.child_by_field_name("left")
            if target.type in ("identifier", "shorthand_property_identifier_pattern"):
                return _text(target)
        return None
    if t == "pair" and parent.child_by_field_name("value") == child:
        return _key_name(parent.child_by_field_name("key"))
    if t in _FIELD_TYPES and parent.child_by_field_name("value") == child:
        prop = parent.child_by_field_name("property") or parent.child_by_field_name("name")
        return None if prop is None else _key_name(prop)
    if t == "export_statement" and parent.child_by_field_name("value") == child:
        return "default"
    return None


def _own_name(fn: Any) -> str | None:
    t = fn.type
    if t in _DECLARATIONS or t in _EXPRESSIONS:
        name = fn.child_by_field_name("name")
        if name is not None:
            return _text(name)
    if t == "method_definition":
        key = fn.child_by_field_name("name")
        name = _key_name(key) if key is not None else None
        if name is None:
            return None
        if name == "constructor" and key.type == "property_identifier":
            body = fn.parent
            cls = body.parent if body is not None else None
            if cls is not None and cls.type in ("class", "class_declaration"):
                return _class_name(cls)
        for c in fn.children:
            if c.type in ("get", "set"):
                return f"{c.type} {name}"
            if c.type in ("(", "formal_parameters"):
                break
        return name
    return _own_context_name(fn)


def _target_names(node: Any, out: list[tuple[str, int]]) -> None:
    """The names V8's inferrer takes from an assignment target, in source order."""
    t = node.type
    if t == "identifier":
        out.append((_text(node), _VAR))
    elif t == "member_expression":
        _target_names(node.child_by_field_name("object"), out)
        prop = node.child_by_field_name("property")
        if prop is not None:
            name = _text(prop)
            if name != "prototype":
                out.append((name, _LITERAL))
    elif t == "subscript_expression":
        _target_names(node.child_by_field_name("object"), out)
        index = node.child_by_field_name("index")
        name = _key_name(index) if index is not None and index.type == "string" else None
        if name != "prototype":
            out.append((name if name is not None else "<computed>", _LITERAL))
    elif t == "parenthesized_expression" and node.named_child_count == 1:
        _target_names(node.named_children[0], out)


def _enclosing_name(fn: Any) -> str | None:
    """The own name of the function `fn` is in, when it starts with a capital letter (V8
    takes such a function for a constructor and names what it assigns after it)."""
    node = fn.parent
    while node is not None and node.type not in FUNCTION_TYPES:
        node = node.parent
    if node is None or node.type not in _DECLARATIONS + _EXPRESSIONS:
        return None
    name = node.child_by_field_name("name")
    text = _text(name) if name is not None else ""
    return text if text[:1].isupper() else None


def _inferred_name(fn: Any, dropped: Set[int] | None = None) -> str:
    """V8's FuncNameInferrer's name for `fn` (see the module's doc)."""
    child, node = fn, fn.parent
    parts: list[list[tuple[str, int]]] = []  # innermost first
    named = False
    infer_at = None  # where V8's inferrer names it: the innermost key, variable or assignment
    while node is not None:
        t = node.type
        if t in _THROUGH:
            pass
        elif t == "pair" and node.child_by_field_name("value") == child:
            key = _key_name(node.child_by_field_name("key"))
            if key is not None:
                parts.append([(key, _LITERAL)])
            named, infer_at = True, infer_at or node
        elif t == "spread_element":
            pass
        elif t == "arguments" and node.parent is not None and node.parent.type == "new_expression":
            # V8 drops the name of a function passed to a call, not to `new`
            child, node = node.parent, node.parent.parent
            continue
        elif t == "variable_declarator" and node.child_by_field_name("value") == child:
            target = node.child_by_field_name("name")
            if target.type == "identifier":
                parts.append([(_text(target), _VAR)])
            named, infer_at = True, infer_at or node
            break
        elif t in ("assignment_expression", "augmented_assignment_expression") and (
            node.child_by_field_name("right") == child
        ):
            out: list[tuple[str, int]] = []
            _target_names(node.child_by_field_name("left"), out)
            parts.append(out)
            named, infer_at = True, infer_at or node
        else:
            break
        child, node = node, node.parent
    if not named:
        return ""
    if fn.id in dropped if dropped is not None and fn.type in _WAITING \
            else _dropped(fn, infer_at):
        return ""
    stack: list[tuple[str, int]] = []
    enclosing = _enclosing_name(fn)
    if enclosing is not None:
        stack.append((enclosing, _ENCLOSING))
    for part in reversed(parts):
        stack.extend(part)
    # two variable names in a row: the last one (V8's MakeNameFromStack)
    names = [
        n
        for k, (n, kind) in enumerate(stack)
        if not (kind == _VAR and k + 1 < len(stack) and stack[k + 1][1] == _VAR)
    ]
    return ".".join(names)


# V8's inferrer keeps the functions waiting for a name in one list, which the next
# assignment, variable, literal key or class member names (FuncNameInferrer::Infer). Before
# that, an arrow function takes the last function out of the list as it goes in, and so
# does a call (RemoveLastFunction: the function was the call's argument), so of
# `[() => 1, () => 2]` (array elements, a ternary's branches) V8 names only the last, and
# of `[function () {}, f(x)]` none (measured, Node 20: tests/test_names.py).
_NAMING_POINTS = frozenset(
    {"pair", "variable_declarator", "assignment_expression", "augmented_assignment_expression",
     "method_definition", "class", "class_declaration", *_FIELD_TYPES}
)
_EVENT_TYPES = frozenset(
    {"arrow_function", "call_expression", *_EXPRESSIONS, *_NAMING_POINTS}
)


def _completions(node: Any) -> Any:
    """The nodes below and at `node` that matter to V8's list of functions waiting for a
    name, in the order the parser completes them (children first); a function or class is
    one step (its body is parsed apart, lazily). A loop, not recursion: a deep expression
    after a function (`[function () {}, 1 + 1 + ... + 1]`) is as deep as it is long."""
    todo: list[tuple[Any, bool]] = [(node, False)]
    while todo:
        n, done = todo.pop()
        if done or n.type in FUNCTION_TYPES or n.type in _CLASS_TYPES:
            if n.type in _EVENT_TYPES:
                yield n
            continue
        todo.append((n, True))
        todo.extend((c, False) for c in reversed(n.children))


def _dropped(fn: Any, infer_at: Any) -> bool:
    """Whether V8's inferrer takes `fn` out of its list before `infer_at` names it: an
    arrow or a call completed while `fn` was the last function in the list."""
    above = 0  # functions added after `fn` and still in the list
    cur = fn
    while cur is not None and cur != infer_at:
        sib = cur.next_sibling
        while sib is not None:
            for ev in _completions(sib):
                t = ev.type
                if t in _NAMING_POINTS:
                    return False
                if t == "arrow_function":
                    if above == 0:
                        return True
                elif t == "call_expression":
                    if above == 0:
                        return True
                    above -= 1
                else:
                    above += 1
            sib = sib.next_sibling
        cur = cur.parent
    return False


# The function types V8's inferrer adds to its list of functions waiting for a name.
_WAITING = frozenset({"arrow_function", *_EXPRESSIONS})


def dropped_functions(root: Any) -> frozenset[int]:
    """The ids of the functions of the tree at `root` that V8's inferrer takes out of its
    list before they are named (`_dropped`, for every function at once). One pass per
    function body in completion order with V8's list itself, so a body's cost follows its
    size: `_dropped` per function walks all that follows it, quadratic in an array of N
    function expressions (3,000: 13 s)."""
    dropped: set[int] = set()
    bodies = [root]
    while bodies:
        dropped |= dropped_in_scope(bodies.pop(), bodies)
    return frozenset(dropped)


def scope_of(fn: Any) -> Any:
    """The body whose pass of V8's list holds `fn`: its nearest enclosing function or
    class (each body is parsed apart, with a list of its own), else the tree's root."""
    node = fn.parent
    while node.parent is not None and node.type not in FUNCTION_TYPES \
            and node.type not in _CLASS_TYPES:
        node = node.parent
    return node


def dropped_in_scope(scope: Any, nested: list[Any] | None = None) -> set[int]:
    """`dropped_functions`' pass over one body: its own functions only (the bodies of the
    functions and classes inside it are other passes: appended to `nested` if given)."""
    dropped: set[int] = set()
    waiting: list[Any] = []
    todo: list[tuple[Any, bool]] = [(c, False) for c in reversed(scope.children)]
    while todo:
        n, done = todo.pop()
        t = n.type
        boundary = t in FUNCTION_TYPES or t in _CLASS_TYPES  # its body is parsed apart
        if not (done or boundary):
            todo.append((n, True))
            todo.extend((c, False) for c in reversed(n.children))
            continue
        if boundary and nested is not None:
            nested.append(n)
        if t not in _EVENT_TYPES:
            continue
        if t in _NAMING_POINTS:  # names every function waiting
            waiting.clear()
        elif t == "arrow_function" or t == "call_expression":
            if waiting:  # RemoveLastFunction
                dropped.add(waiting.pop().id)
            if t == "arrow_function":
                waiting.append(n)
        else:
            waiting.append(n)
    return dropped


def _at_class(cls: Any) -> str:
    """V8's name for the function it reports at a class's first character."""
    body = cls.child_by_field_name("body")
    members = body.named_children if body is not None else []
    # Instance fields: their initializers' function is there, and holds its self time (a
    # default constructor only calls it; measured 28 samples to 3).
    if any(
        m.type in _FIELD_TYPES and not any(c.type == "static" for c in m.children)
        for m in members
    ):
        return "<instance_members_initializer>"
    if any(m.type == "method_definition" and _key_text(m) == "constructor" for m in members):
        return ""  # V8 has no function there: the constructor is at `constructor(`
    return _class_name(cls)


def _is_static(member: Any) -> bool:
    return any(c.type == "static" for c in member.children)


def _key_text(method: Any) -> str | None:
    key = method.child_by_field_name("name")
    return None if key is None else _key_name(key)


def v8_name(fn: Any, dropped: Set[int] | None = None) -> str:
    """The name V8 gives the function at tree-sitter node `fn` ('' when none). `dropped`:
    `dropped_functions` of its tree, for naming many functions of one tree (without it,
    each call walks what follows `fn`)."""
    if fn.type in _CLASS_TYPES:
        return _at_class(fn)
    own = _own_name(fn)
    if own:
        return own
    return _inferred_name(fn, dropped)


def name_frames(
    trace: ProfilerTrace,
    text_of: Callable[[str], str | None],
    cache: dict[str, FunctionNames | None],
) -> ProfilerTrace:
    """`trace` with its frames named and placed as V8 names and places their functions,
    read from the scripts' sources (`text_of(resource URL)`, None when not at hand: those
    frames stay as they are). For an engine that leaves functions V8 names anonymous
    (QuickJS: `pp.next = function () {}`) and places a function at its first character
    (QuickJS: the `function` keyword, a method's name) where V8 gives the `(` of its
    parameters: the same function on both engines is then one function (one row of
    `fleet top`, one node of a merged profile). A frame the engine named keeps its name
    (where the two differ, a computed key, the engine's is the key's value, V8's the
    object's); the script's own code (nameless, at 1:1) stays as it is; a nameless function running
    a class's field initializers gets V8's name for it. `cache` keeps each script's
    functions between calls."""
    frames = list(trace.frames)
    changed = False
    for i, f in enumerate(frames):
        if f.resource_id is None or f.line is None:
            continue
        if not f.name and f.line == 1 and (f.column or 1) == 1:
            continue  # the script's own code (a function there has a name: `function f(`)
        url = trace.resources[f.resource_id]
        if url not in cache:
            text = text_of(url)
            ok = text is not None and len(text) <= MAX_TEXT_CHARS
            cache[url] = FunctionNames(text) if ok else None  # type: ignore[arg-type]
        index = cache[url]
        if index is None:
            continue
        fn = index.at(f.line, f.column or 1)
        if fn is not None and (fn.v8_line, fn.v8_column) != (f.line, f.column):
            f = frames[i] = f._replace(line=fn.v8_line, column=fn.v8_column)
            changed = True
        if fn is None:
            init = index.initializer_at(f.line, f.column or 1)
            if init is not None:  # placed where V8 places it, named so when nameless
                name, line, column = init
                f = frames[i] = f._replace(name=f.name or name, line=line, column=column)
                changed = True
            continue
        if not f.name and fn.name:
            frames[i] = f._replace(name=fn.name)
            changed = True
    return trace.replace(frames=frames) if changed else trace
