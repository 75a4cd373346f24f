"""What naming functions as V8 does costs (`jsprof.names`, issue 32): on real scripts from
tests/js/node_modules (typescript.js, 9 MB, the largest; acorn; prettier's standalone),
the tree-sitter parse alone (the baseline), building the index (parse, the query for
every function, sorting their heads), naming every function, and looking every function
up by V8's position for it.

    .venv/bin/python benchmarks/bench_names.py [--repeat 3]

Ratios are to the parse of the same script in the same run (only ratios compare on a
shared machine). The index is built once per script and source map (report, fleet) or
per runtime (QuickJS), when a trace is built.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import best_of
from jsprof.names import FunctionNames, parse

JS = Path(__file__).resolve().parent.parent / "tests" / "js" / "node_modules"
SCRIPTS = [
    JS / "acorn" / "dist" / "acorn.js",
    JS / "prettier" / "standalone.js",
    JS / "typescript" / "lib" / "typescript.js",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print("| script | MB | functions | parse s | index / parse | + all names / parse "
          "| + every lookup / parse |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for path in SCRIPTS:
        text = path.read_text()
        t_parse = best_of(lambda text=text: parse(text), args.repeat)
        t_index = best_of(lambda text=text: FunctionNames(text), args.repeat)
        index = FunctionNames(text)
        n = len(index)

        def named(text: str = text) -> list[str]:
            fresh = FunctionNames(text)
            return [fresh.name(i) for i in range(len(fresh))]

        t_named = best_of(named, args.repeat)
        where = [(f.v8_line, f.v8_column) for f in index.functions()]

        def looked(text: str = text, where: list = where) -> int:
            fresh = FunctionNames(text)
            return sum(1 for p in where if fresh.at(*p) is not None)

        t_looked = best_of(looked, args.repeat)
        assert looked() == n  # every function is found at V8's position for it
        print(f"| {path.name} | {len(text.encode()) / 1e6:.2f} | {n:,} | {t_parse:.2f} "
              f"| {t_index / t_parse:.2f} | {t_named / t_parse:.2f} "
              f"| {t_looked / t_parse:.2f} |")


if __name__ == "__main__":
    main()
