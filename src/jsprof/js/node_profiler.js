// The W3C JS Self-Profiling `Profiler` global for Node.js, preloaded by
// `jsprof run --engine node` (node --require this file). It runs in every thread (worker
// threads get the preload too); each isolate profiles itself. The spec's surface (options,
// attributes, stop(), samplebufferfull, element IDs) is the shared base's
// (profiler_base.js, also QuickJS's); this file is the V8 backend.
//
// How: one in-thread inspector session (node:inspector) starts ONE V8 profile at the first
// `new Profiler(...)` and never stops it: stopping and restarting V8's profiler loses the
// frames of code optimised before the restart. Each Profiler session is a nested V8 profile
// on that same sampler (console.profile/profileEnd with a unique title), which V8 ends and
// hands back synchronously (`Profiler.consoleProfileFinished` on our session). The spec's
// trace is built from that slice: ticks kept by the session's own interval, the sample
// buffer limit applied, pseudo-frames dropped.
//
// V8 cannot be asked for a live sample count, so a full buffer is found by the clock: a
// timer set for when the buffer could be full slices the profile; if it really is full,
// the session stops and `samplebufferfull` is dispatched (as a task, never from the
// sampler); if not, a new nested profile continues the slice.
'use strict';

// `jsprof run`: when the main script does not compile (nothing of it ran), say where in the
// file jsprof named and end before Node prints its own multi-line report: jsprof says it in
// one line and exits 2, as `jsprof record` does (js/node_not_compiled.js).
(() => {
  const out = process.env.JSPROF_NOT_PARSED;
  if (out === undefined) return;
  delete process.env.JSPROF_NOT_PARSED; // the program and its children do not see it
  const main = process.argv[1];
  process.on('uncaughtExceptionMonitor', (err) => {
    if (!(err instanceof SyntaxError)) return;
    const at = require('./node_not_compiled.js').notCompiled(err, main);
    if (at === null) return;
    const info = { name: String(err.name), message: String(err.message), compile: at };
    require('node:fs').writeFileSync(out, JSON.stringify(info));
    process.exit(1);
  });
})();

(() => {
  if (typeof globalThis.Profiler === 'function') return;
  const inspector = require('node:inspector');
  const { performance } = require('node:perf_hooks');
  const { makeProfilerClass, TraceBuilder } = require('./profiler_base.js');

  // V8's sampler: requests below this are raised to it (V8 gives ~180 us real spacing
  // at 100 us). Above 1 ms the sampler still runs at 1 ms, so a later session asking for a
  // finer interval is served without restarting V8's profiler.
  const MIN_INTERVAL_MS = 0.1;
  const MAX_BASE_INTERVAL_MS = 1.0;
  // jsprof's own files never appear in traces (the spec's muted scripts, in spirit).
  const { pathToFileURL } = require('node:url');
  const OWN_URLS = new Set([__filename, require.resolve('./profiler_base.js')]
    .map((f) => pathToFileURL(f).href));
  const ALLOWED = process.env.JSPROF_NO_PROFILING !== '1';
  const PSEUDO = new Set(['(root)', '(program)', '(idle)', '(garbage collector)']);
  // V8 takes a tick in its garbage collector or its own native work without the
  // JavaScript stack: such a sample has no stackId but is not idle, so it says what it
  // is with the spec's marker (a busy loop that allocates would otherwise read as idle).
  const MARKERS = new Map([['(garbage collector)', 'gc'], ['(program)', 'other']]);

  let session = null;
  let baseIntervalMs = 0;
  let finished = null; // the last Profiler.consoleProfileFinished params
  let titleCounter = 0;
  // performance.now() = (V8 monotonic microseconds - clockOffsetUs) / 1000
  let clockOffsetUs = 0;

  function ensureSampler(requestMs) {
    if (session !== null) return;
    baseIntervalMs = Math.min(Math.max(requestMs, MIN_INTERVAL_MS), MAX_BASE_INTERVAL_MS);
    session = new inspector.Session();
    session.connect();
    session.on('Profiler.consoleProfileFinished', (m) => { finished = m.params; });
    const check = (err) => { if (err) throw err; };
    // Session.post callbacks run synchronously for an in-thread session.
    session.post('Profiler.enable', check);
    session.post('Profiler.setSamplingInterval',
      { interval: Math.max(1, Math.round(baseIntervalMs * 1000)) }, check);
    session.post('Profiler.start', check);
    clockOffsetUs = readClockOffsetUs();
  }

  // V8 stamps samples with the monotonic clock in whole microseconds; performance.now()
  // is the same clock (hrtime) less the realm's origin. The offset between them is read
  // in nanoseconds, back to back, and the tightest of a few reads is kept.
  function readClockOffsetUs() {
    let best = Infinity;
    let offset = 0;
    for (let i = 0; i < 5; i++) {
      const a = process.hrtime.bigint();
      const n = performance.now();
      const b = process.hrtime.bigint();
      if (b - a < best) {
        best = Number(b - a);
        offset = (Number(a) + best / 2) / 1000 - n * 1000;
      }
    }
    return offset;
  }

  function beginSlice() {
    const title = `jsprof-session-${++titleCounter}`;
    console.profile(title);
    return title;
  }

  function endSlice(title) {
    finished = null;
    console.profileEnd(title);
    const got = finished;
    finished = null;
    return got && got.title === title ? got.profile : null;
  }

  function notAllowed() {
    return new DOMException('profiling is not allowed here (jsprof run --no-profiling)',
      'NotAllowedError');
  }

  // The spec's surface is the shared base's; this backend keeps a session's V8 slices.
  const { Profiler, bufferFull } = makeProfilerClass({
    create(interval, maxBufferSize, profiler) {
      if (!ALLOWED) throw notAllowed();
      ensureSampler(interval);
      const st = {
        interval: Math.max(interval, baseIntervalMs),
        maxBufferSize,
        slices: [],
        title: null,
        trace: null, // built once, on stop() or when the buffer fills
        timer: null,
        startTime: performance.now(),
      };
      st.title = beginSlice();
      scheduleBufferCheck(profiler, st);
      return st;
    },
    stop(st) {
      if (!st.stopped) finish(st);
      return st.trace;
    },
  });

  function finish(st) {
    if (st.timer) { clearTimeout(st.timer); st.timer = null; }
    if (st.title !== null) {
      const prof = endSlice(st.title);
      if (prof) st.slices.push(prof);
      st.title = null;
    }
    st.trace = buildTrace(st.slices, st.interval, baseIntervalMs, st.maxBufferSize, st.startTime).trace;
    st.slices = [];
  }

  // When could the buffer be full? Not before maxBufferSize intervals have passed.
  function scheduleBufferCheck(profiler, st) {
    const kept = st.slices.length ? buildTrace(st.slices, st.interval, baseIntervalMs, st.maxBufferSize, st.startTime).count : 0;
    const left = Math.max(st.maxBufferSize - kept, 0);
    const wait = Math.max(left * st.interval, 1);
    st.timer = setTimeout(() => checkBuffer(profiler, st), Math.min(wait, 2 ** 31 - 1));
    st.timer.unref();
  }

  function checkBuffer(profiler, st) {
    st.timer = null;
    if (st.stopped) return;
    // Confirm by slicing: end the nested profile and start the next one at once.
    const prof = endSlice(st.title);
    if (prof) st.slices.push(prof);
    const built = buildTrace(st.slices, st.interval, baseIntervalMs, st.maxBufferSize, st.startTime);
    if (built.full) {
      st.title = null;
      st.trace = built.trace;
      st.slices = [];
      bufferFull(profiler, setImmediate);
      return;
    }
    st.title = beginSlice();
    scheduleBufferCheck(profiler, st);
  }

  // V8 profile slices -> the spec's ProfilerTrace (plain object).
  function buildTrace(slices, intervalMs, baseMs, maxBufferSize, notBefore) {
    const b = new TraceBuilder();
    let full = false;
    let lastKept = -Infinity;
    // The spec's rule for a shared sampler: keep a tick when at least the session's own
    // interval, less half a tick, has passed since the last kept sample.
    const threshold = intervalMs - baseMs / 2;

    outer: for (const prof of slices) {
      const byId = new Map();
      for (const n of prof.nodes) byId.set(n.id, n);
      const parentOf = new Map();
      for (const n of prof.nodes) for (const c of n.children || []) parentOf.set(c, n.id);
      const stackOfNode = new Map();
      const stackFor = (nid) => {
        if (stackOfNode.has(nid)) return stackOfNode.get(nid);
        // Walk up to the first ancestor already known, then intern back down.
        const chain = [];
        let cur = nid;
        while (cur !== undefined && !stackOfNode.has(cur)) { chain.push(cur); cur = parentOf.get(cur); }
        let parent = cur === undefined ? undefined : stackOfNode.get(cur);
        for (let i = chain.length - 1; i >= 0; i--) {
          const cf = byId.get(chain[i]).callFrame;
          // Pseudo nodes are not frames, nor is this preload's own code.
          if (!(PSEUDO.has(cf.functionName) && !cf.url) && !OWN_URLS.has(cf.url)) {
            // CDP's lines and columns are 0-based, the spec's 1-based; -1 is unknown.
            const fid = b.frameId(cf.functionName, cf.url,
              cf.lineNumber >= 0 ? cf.lineNumber + 1 : undefined,
              cf.columnNumber >= 0 ? cf.columnNumber + 1 : undefined);
            parent = b.stackId(parent, fid);
          }
          stackOfNode.set(chain[i], parent);
        }
        return stackOfNode.get(nid);
      };
      let t = prof.startTime;
      for (let i = 0; i < prof.samples.length; i++) {
        t += prof.timeDeltas[i];
        const ts = (t - clockOffsetUs) / 1000;
        // A new nested profile also gets the ticks V8 took (but had not yet processed)
        // before it started: they are not this session's.
        if (ts < notBefore) continue;
        if (ts - lastKept < threshold) continue;
        if (b.length >= maxBufferSize) { full = true; break outer; }
        lastKept = ts;
        // No JavaScript on the stack: no stackId (and a marker when not idle).
        const node = byId.get(prof.samples[i]);
        const cf = node && node.callFrame;
        b.addSample(ts, stackFor(prof.samples[i]),
          cf && !cf.url ? MARKERS.get(cf.functionName) : undefined);
      }
    }
    if (b.length >= maxBufferSize) full = true;
    return { trace: b.trace(), count: b.length, full };
  }

  Object.defineProperty(globalThis, 'Profiler', {
    value: Profiler, writable: true, configurable: true, enumerable: false,
  });
})();
