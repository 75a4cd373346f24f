// `node --import node_preload.mjs app.js`: installs the instrumenting runtime, transforms
// CommonJS sources as they compile and ES modules through loader hooks, and writes the
// results to the file jsprof gave when the process exits (however it exits).
import Module, { createRequire, register } from "node:module";
import { readFileSync, writeFileSync } from "node:fs";
import { Socket } from "node:net";
import vm from "node:vm";
import { makeTransform } from "./node_transform.mjs";

const cfg = JSON.parse(process.env.JSPROF_INSTRUMENT);
delete process.env.JSPROF_INSTRUMENT; // the program and its children do not see it

globalThis.__jsprof_config = cfg.config;
vm.runInThisContext(readFileSync(new URL("./runtime.js", import.meta.url), "utf8"), {
  filename: "jsprof-instrument-runtime.js",
});
const dump = globalThis.__jsprof_dump;
const save = () => writeFileSync(cfg.out, dump());
process.on("exit", save);
// The main script does not compile (nothing of it ran): say where in the file jsprof
// named and end before Node prints its multi-line report; jsprof says it in one line and
// exits 2. This file's wrapper of Module._compile is not the script's frame.
if (cfg.notParsed != null) {
  const main = process.argv[1];
  process.on("uncaughtExceptionMonitor", (err) => {
    if (!(err instanceof SyntaxError)) return;
    const require = createRequire(import.meta.url);
    const { notCompiled } = require("../js/node_not_compiled.js");
    const at = notCompiled(err, main, [import.meta.url]);
    if (at === null) return;
    const info = { name: String(err.name), message: String(err.message), compile: at };
    writeFileSync(cfg.notParsed, JSON.stringify(info));
    process.exit(1);
  });
}
// jsprof told to end: it asks on this socket for what was counted so far, then ends Node
// with the signal it got. No signal listener is added, so the program's own signals
// behave as without jsprof. Unref'd: it never keeps the program alive. Answered at an
// event-loop turn (a script that never returns to it cannot be asked).
if (cfg.ctl != null) {
  const ctl = new Socket({ fd: cfg.ctl, readable: true, writable: true });
  ctl.unref();
  ctl.on("data", () => {
    save();
    ctl.write("saved\n");
  });
  ctl.on("error", () => {});
}

const transform = makeTransform(cfg);
const compile = Module.prototype._compile;
Module.prototype._compile = function (content, filename) {
  return compile.call(this, transform(content, filename), filename);
};
register("./node_hooks.mjs", import.meta.url, { data: cfg });
