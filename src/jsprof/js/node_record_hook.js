// Preloaded (node --inspect=127.0.0.1:0 --require this file) by `jsprof record --engine
// node`, in the main thread only. It
// - removes jsprof's flags from process.execArgv, so the script sees what it would see
//   without jsprof and the children it forks do not inherit an inspector;
// - holds the script until jsprof has started the profiler (instead of --inspect-brk,
//   whose pause wraps the main module in a `callAndPauseOnStart` frame and is inherited);
// - reports an uncaught exception (name, message, stack; and where, when the script does not
//   compile) through a console.profile title, the one channel jsprof listens to (Runtime.enable would make every console.log cost
//   a protocol message);
// - says when the program ended ('exit'), so that Node's wait for jsprof after it is dropped;
// - says when the script starts a child process (those run unprofiled).
// It installs no signal listener: one would change how Node dies (a listener runs only
// when the event loop gets to it, so a busy script would outlive a SIGTERM); the slices
// jsprof takes while recording are the insurance against a death by signal.
'use strict';

(() => {
  const { isMainThread } = require('node:worker_threads');
  if (!isMainThread) return;
  const inspector = require('node:inspector');

  const argv = process.execArgv;
  for (let i = argv.length - 1; i >= 0; i--) {
    if (argv[i].startsWith('--inspect=127.0.0.1:')) argv.splice(i, 1);
    else if (argv[i] === '--require' && argv[i + 1] === __filename) argv.splice(i, 2);
  }
  // and the first flag of all, jsprof's (a user's own --node-arg comes after it)
  const publish = argv.indexOf('--inspect-publish-uid=stderr');
  if (publish >= 0) argv.splice(publish, 1);

  // Bound now: the script may replace console.profile later.
  const profile = console.profile.bind(console);
  const profileEnd = console.profileEnd.bind(console);

  // Where the main script did not compile (js/node_not_compiled.js, required only then).
  const main = process.argv[1];
  const notCompiled = (err) => (err instanceof SyntaxError
    ? require('./node_not_compiled.js').notCompiled(err, main) : null);

  process.on('uncaughtExceptionMonitor', (err) => {
    let info;
    let at = null;
    try {
      info = err instanceof Error
        ? { name: String(err.name), message: String(err.message), stack: String(err.stack) }
        : { name: 'Error', message: String(err), stack: '' };
      at = notCompiled(err);
    } catch {
      info = { name: 'Error', message: 'uncaught exception', stack: '' };
    }
    if (at !== null) info.compile = at;
    const t = 'jsprof-error:' + JSON.stringify(info);
    profile(t);
    profileEnd(t);
    // jsprof says where in one line and exits 2: Node's own report of it (the arrow and
    // Node's internal stack) would be a second one, longer.
    if (at !== null) process.exit(1);
  });

  // Child processes run without the profiler (and without jsprof's flags, see above):
  // tell jsprof once, so the trace can say so.
  const dc = require('node:diagnostics_channel');
  const onChild = () => {
    dc.unsubscribe('child_process', onChild);
    profile('jsprof-child');
    profileEnd('jsprof-child');
  };
  dc.subscribe('child_process', onChild);

  // The program's end, on the clock V8's profile timestamps use (monotonic us): Node emits
  // 'exit' when the script's JS is done (its end, process.exit(), an uncaught exception),
  // then waits in reallyExit (process.exit) or idle until jsprof has taken the profile.
  // That wait is jsprof's time: jsprof drops the samples of it that follow this instant
  // (_v8slices.drop_exit_wait), and keeps those of the script's own 'exit' listeners (ours
  // is the first: registered before the script runs).
  process.on('exit', function jsprofEnd() {
    const t = 'jsprof-end:' + String(process.hrtime.bigint() / 1000n);
    profile(t);
    profileEnd(t);
  });

  // jsprof sets this flag, then sends Runtime.runIfWaitingForDebugger; the title below
  // tells it we went on (until then it repeats runIfWaitingForDebugger now and then: both
  // may have been handled between our test of the flag and the wait). It carries the
  // instant we went on, in microseconds of the monotonic clock V8's profile timestamps
  // use: the recording starts there (jsprof drops what this preload cost before it, and
  // the loader's return from it just after: neither is the script's nor Node's own).
  const go = Symbol.for('jsprof.go');
  while (globalThis[go] !== true) inspector.waitForDebugger();
  delete globalThis[go];
  const title = 'jsprof-go:' + String(process.hrtime.bigint() / 1000n);
  profile(title);
  profileEnd(title);
})();
