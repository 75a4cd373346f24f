// Preloaded through NODE_OPTIONS (--require this file) by `jsprof record --engine node --
// COMMAND`, so that every Node process the command starts loads it (npm and the scripts it
// runs, child_process spawn/exec/fork, nested), in the main thread only. It
// - opens the inspector on 127.0.0.1, port 0 (a free one), and says how to reach it in a
//   file of jsprof's private directory ($JSPROF_NODE_COMMAND, mode 0700: the URL's id is
//   never in a command line, on stderr or at /json/list: --inspect-publish-uid=, publishes
//   it nowhere), and rings its
//   doorbell there;
// - holds the process until jsprof has started its profiler (as js/node_record_hook.js);
// - reports an uncaught exception, the program's end and its exit code through
//   console.profile titles.
// A process that cannot announce itself (jsprof gone or done, its directory removed, the
// user's own inspector open) runs as it would without jsprof, unprofiled. It installs no
// signal listener (see node_record_hook.js): the slices jsprof takes are the insurance.
'use strict';

(() => {
  const { isMainThread } = require('node:worker_threads');
  if (!isMainThread) return;
  const dir = process.env.JSPROF_NODE_COMMAND;
  if (!dir) return;
  const inspector = require('node:inspector');
  if (inspector.url() !== undefined) return; // the user's own --inspect: theirs, not ours
  const fs = require('node:fs');
  const path = require('node:path');

  try {
    inspector.open(0, '127.0.0.1', false);
    const info = JSON.stringify({
      pid: process.pid,
      ppid: process.ppid,
      url: inspector.url(),
      argv: process.argv,
      cwd: process.cwd(),
    });
    // Written whole, then renamed: jsprof never reads half a file. The name is unique even
    // if a pid is reused within one recording.
    const name = `${process.pid}-${process.hrtime.bigint()}`;
    const tmp = path.join(dir, `.${name}.tmp`);
    fs.writeFileSync(tmp, info, { mode: 0o600 });
    fs.renameSync(tmp, path.join(dir, `${name}.json`));
    // Ring jsprof's doorbell (a FIFO it holds open for reading): it looks at once. Opened
    // without blocking, so when jsprof is gone (no reader: ENXIO) this process does not
    // wait for it forever but runs on, unprofiled. EAGAIN (the pipe full) still rang.
    try {
      const bell = fs.openSync(path.join(dir, 'doorbell'),
        fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
      try { fs.writeSync(bell, '\n'); } catch (e) { if (e.code !== 'EAGAIN') throw e; }
      finally { fs.closeSync(bell); }
    } catch (e) {
      try { fs.unlinkSync(path.join(dir, `${name}.json`)); } catch { /* gone with jsprof */ }
      throw e;
    }
  } catch {
    try { inspector.close(); } catch { /* not open */ }
    return;
  }

  // Bound now: the script may replace console.profile later.
  const profile = console.profile.bind(console);
  const profileEnd = console.profileEnd.bind(console);
  const say = (t) => { profile(t); profileEnd(t); };

  process.on('uncaughtExceptionMonitor', (err) => {
    let info;
    try {
      info = err instanceof Error
        ? { name: String(err.name), message: String(err.message), stack: String(err.stack) }
        : { name: 'Error', message: String(err), stack: '' };
    } catch {
      info = { name: 'Error', message: 'uncaught exception', stack: '' };
    }
    say('jsprof-error:' + JSON.stringify(info));
  });
  // The program's end (as node_record_hook.js: Node's wait for jsprof after this instant is
  // dropped from the profile) and its exit code. Ours is the first 'exit' listener.
  process.on('exit', function jsprofEnd(code) {
    say('jsprof-end:' + String(process.hrtime.bigint() / 1000n));
    say('jsprof-exit:' + String(code));
  });

  // As node_record_hook.js: wait until jsprof set the flag, then say when we went on.
  const go = Symbol.for('jsprof.go');
  while (globalThis[go] !== true) inspector.waitForDebugger();
  delete globalThis[go];
  say('jsprof-go:' + String(process.hrtime.bigint() / 1000n));
})();
