// Shared by the Node preload (CommonJS, main thread) and the loader hooks (ES modules,
// loader thread): the source transform itself is jsprof's Python one (tree-sitter), run
// once per file that mentions `class`; the entry script comes pre-transformed.
import { execFileSync } from "node:child_process";

export function makeTransform(cfg) {
  const pre = cfg.pre || {};
  const names = (cfg.config && cfg.config.watch) || [];
  const all = names.includes("*");
  return function transform(source, filename) {
    if (typeof source !== "string" || !source.includes("class")) return source;
    if (Object.prototype.hasOwnProperty.call(pre, filename) && pre[filename][0] === source) {
      return pre[filename][1];
    }
    // Dependencies: only when a watched class name occurs in them ('*' means the
    // program's own classes, not its dependencies').
    if (filename.includes("/node_modules/") && (all || !names.some((n) => source.includes(n)))) {
      return source;
    }
    try {
      return execFileSync(cfg.python, ["-m", "jsprof.instrument.transform", "-"], {
        input: source,
        encoding: "utf8",
        maxBuffer: 1 << 30,
        stdio: ["pipe", "pipe", "inherit"],
      });
    } catch (e) {
      return source; // never break the program: unwatched is better than not running
    }
  };
}
