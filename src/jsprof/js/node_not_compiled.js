// Whether an uncaught error says that Node's main script did not compile (nothing of it
// ran), and where: shared by jsprof's Node preloads (record's hook, run's Profiler global,
// instrument's preload), which each tell jsprof in their own channel; jsprof then says it
// in one line and exits 2 (record.py's not_parsed).
'use strict';

// `file:line\n<source line>\n<carets>` (Node's "arrow" before a SyntaxError): where the
// script is, 1-based, when `file` is the main script; else null.
function arrowAt(text, main) {
  const m = /^(.*):(\d+)\n.*\n([\t ]*)\^/.exec(String(text));
  if (m === null) return null;
  const file = m[1].replace(/^file:\/\//, '');
  let real = main;
  try { real = require('node:fs').realpathSync(main); } catch {}
  if (file !== main && file !== real) return null;
  return { file: main, line: Number(m[2]), column: m[3].length + 1 };
}

// The main script did not compile: a SyntaxError with no frame of the script's own (its
// code never ran; a script that throws one, or requires a file that does not parse, has
// its frames in the stack). Frames of Node's internals and of the files in `own` (a
// preload's wrapper of Module._compile) are not the script's. Where it is: Node's arrow on
// the stack (CommonJS), or, for an ES module (whose arrow Node keeps to itself), what
// `node --check` says of the script.
function notCompiled(err, main, own = []) {
  if (!(err instanceof SyntaxError) || typeof main !== 'string') return null;
  const stack = String(err.stack);
  const frames = stack.split('\n').filter((l) => /^\s+at /.test(l));
  const ours = (l) => /\(node:|at node:/.test(l) || own.some((f) => l.includes(f));
  if (!frames.every(ours)) return null;
  let at = arrowAt(stack, main);
  if (at === null && /^SyntaxError/.test(stack)) {
    const r = require('node:child_process').spawnSync(
      process.execPath, ['--check', main], { encoding: 'utf8', timeout: 30000 });
    at = arrowAt(String(r.stderr || ''), main);
  }
  return at;
}

module.exports = { notCompiled };
