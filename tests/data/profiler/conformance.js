// Conformance checks of the spec's `Profiler` global, written against the W3C JS
// Self-Profiling spec's wording. Uses only Profiler, performance, Event, setTimeout and
// console, so any engine with the global can run it. Prints one JSON line per check:
// {"check": name, "ok": bool, "detail": string}; the last line is {"done": true}.
'use strict';

const results = [];
function check(name, ok, detail = '') {
  results.push({ check: name, ok: !!ok, detail: String(detail) });
}
function throwsName(fn) {
  try { fn(); } catch (e) { return e && (e.constructor === TypeError ? 'TypeError' : e.constructor === RangeError ? 'RangeError' : e.name); }
  return 'no error';
}
function busy(ms) { const end = performance.now() + ms; let x = 0; while (performance.now() < end) x++; return x; }
function hot(ms) { return busy(ms); }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// A loaded machine can starve the sampler thread (48 samples in 350 ms at load 17, none in
// 50 ms): a part whose checks count samples is done again, longer (scale 1 to 5), until
// `part` says it had enough; only the last try's checks are reported, pass or fail.
async function retried(part) {
  for (let scale = 1; ; scale++) {
    const mark = results.length;
    if ((await part(scale)) || scale === 5) return;
    results.length = mark;
  }
}

function wellFormed(trace) {
  const keys = Object.keys(trace).sort().join(',');
  if (keys !== 'frames,resources,samples,stacks') return `own keys ${keys}`;
  const uniq = (arr) => new Set(arr.map((x) => JSON.stringify(x))).size === arr.length;
  if (!uniq(trace.resources) || !uniq(trace.frames) || !uniq(trace.stacks)) return 'duplicate elements';
  for (let i = 0; i < trace.stacks.length; i++) {
    const s = trace.stacks[i];
    if ('parentId' in s && !(s.parentId < i)) return `stacks[${i}].parentId ${s.parentId} not earlier`;
    if (!(s.frameId < trace.frames.length)) return `stacks[${i}].frameId out of range`;
  }
  for (let i = 0; i < trace.samples.length; i++) {
    const s = trace.samples[i];
    if ('stackId' in s && (s.stackId === undefined || !(s.stackId < trace.stacks.length))) return `samples[${i}].stackId`;
    // In time order, not strictly: a browser coarsens sample times as it does
    // performance.now(), and Chromium under load gave two samples one time (93 then 93).
    if (i && !(s.timestamp >= trace.samples[i - 1].timestamp)) return `samples[${i}] out of order: ${trace.samples[i - 1].timestamp} then ${s.timestamp}`;
  }
  for (const f of trace.frames) {
    if ('resourceId' in f && !(f.resourceId < trace.resources.length)) return 'frame resourceId';
    if ('line' in f && !(f.line >= 1)) return 'frame line';
  }
  return '';
}

(async () => {
  // --- constructor validation, in WebIDL order
  check('without new: TypeError', throwsName(() => Profiler({ sampleInterval: 1, maxBufferSize: 1 })) === 'TypeError');
  check('no options: TypeError', throwsName(() => new Profiler()) === 'TypeError');
  check('missing maxBufferSize: TypeError', throwsName(() => new Profiler({ sampleInterval: 10 })) === 'TypeError');
  check('maxBufferSize checked before sampleInterval',
    throwsName(() => new Profiler({ sampleInterval: -1 })) === 'TypeError');
  check('missing sampleInterval: TypeError', throwsName(() => new Profiler({ maxBufferSize: 10 })) === 'TypeError');
  check('NaN sampleInterval: TypeError', throwsName(() => new Profiler({ sampleInterval: NaN, maxBufferSize: 1 })) === 'TypeError');
  check('Infinity sampleInterval: TypeError', throwsName(() => new Profiler({ sampleInterval: Infinity, maxBufferSize: 1 })) === 'TypeError');
  check('negative sampleInterval: RangeError', throwsName(() => new Profiler({ sampleInterval: -1, maxBufferSize: 1 })) === 'RangeError');
  check('Profiler extends EventTarget', Profiler.prototype instanceof EventTarget);

  // --- one session: state, interval, stop(), trace shape, timestamps
  await retried(async (scale) => {
    const before = performance.now();
    const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100000 });
    const afterConstructor = performance.now();
    check('sampleInterval is a number >= the request', typeof p.sampleInterval === 'number' && p.sampleInterval >= 1, p.sampleInterval);
    check('not stopped while started', p.stopped === false);
    hot(200 * scale);
    await sleep(150 * scale); // nothing running: samples without a stackId
    const promise = p.stop();
    check('stopped becomes true synchronously in stop()', p.stopped === true);
    check('stop() returns a Promise', promise instanceof Promise);
    const trace = await promise;
    const after = performance.now();
    check('trace is well formed', wellFormed(trace) === '', wellFormed(trace));
    check('samples taken', trace.samples.length >= 50, trace.samples.length);
    check('samples lie between performance.now() before and after',
      trace.samples.every((s) => s.timestamp >= before && s.timestamp <= after),
      `${before} ${trace.samples[0] && trace.samples[0].timestamp} ${after}`);
    check('the constructor takes the first sample',
      trace.samples.length > 0 && trace.samples[0].timestamp <= afterConstructor,
      `${trace.samples[0] && trace.samples[0].timestamp} > ${afterConstructor}`);
    const hotFrame = trace.frames.findIndex((f) => f.name === 'hot');
    // The column is engine-defined: V8 gives the `(` of the parameter list (13), QuickJS
    // the `function` keyword (1), as documented in jsprof/engines/quickjs.py.
    check('a known function is a frame with resource, line and column',
      hotFrame >= 0 && trace.frames[hotFrame].line === 16 && [1, 13].includes(trace.frames[hotFrame].column) &&
      /conformance\.js$/.test(trace.resources[trace.frames[hotFrame].resourceId]),
      JSON.stringify(trace.frames[hotFrame]));
    const idle = trace.samples.filter((s) => !('stackId' in s));
    check('samples with no JavaScript have no stackId key', idle.length >= 20, idle.length);
    check('no stackId key set to undefined', trace.samples.every((s) => !('stackId' in s) || s.stackId !== undefined));
    let second = 'resolved';
    try { await p.stop(); } catch (e) { second = e.name; }
    check('a second stop() rejects with InvalidStateError', second === 'InvalidStateError', second);
    // (No retry where the interval is coarser than 1 ms, Chromium's 10 ms: counts made for
    // 1 ms cannot be reached there, and its table shows those checks failed.)
    return (trace.samples.length >= 50 && idle.length >= 20) || p.sampleInterval > 1;
  });

  // --- sampleInterval 0 means the engine's minimum
  const z = new Profiler({ sampleInterval: 0, maxBufferSize: 10 });
  check('sampleInterval 0 gives the minimum (> 0)', z.sampleInterval > 0, z.sampleInterval);
  await z.stop();

  // --- buffer full: one event, stopped, exactly maxBufferSize samples
  const b = new Profiler({ sampleInterval: 1, maxBufferSize: 5 });
  const events = [];
  b.addEventListener('samplebufferfull', (e) => events.push(e));
  let viaHandler = 0;
  b.onsamplebufferfull = () => { viaHandler++; };
  hot(50);
  for (let i = 0; i < 500 && !events.length; i++) await sleep(10); // until it fired: 5 s guards a hang
  check('samplebufferfull fired once', events.length === 1, events.length);
  check('onsamplebufferfull handler called', viaHandler === 1, viaHandler);
  check('samplebufferfull is a plain Event, not bubbling',
    events.length === 1 && events[0] instanceof Event && events[0].bubbles === false && events[0].type === 'samplebufferfull');
  check('a full buffer stops the session', b.stopped === true);
  const bt = await b.stop();
  check('exactly maxBufferSize samples kept', bt.samples.length === 5, bt.samples.length);
  let bsecond = 'resolved';
  try { await b.stop(); } catch (e) { bsecond = e.name; }
  check('stop() after a full buffer: first gives the trace, then InvalidStateError', bsecond === 'InvalidStateError');

  // --- maxBufferSize as WebIDL unsigned long
  await retried(async (scale) => {
    const wrap = new Profiler({ sampleInterval: 1, maxBufferSize: 2 ** 32 + 2 });
    hot(30 * scale);
    await sleep(20 * scale);
    const wt = await wrap.stop();
    check('maxBufferSize 2^32+2 keeps 2', wt.samples.length === 2, wt.samples.length);
    const neg = new Profiler({ sampleInterval: 1, maxBufferSize: -1 });
    hot(30 * scale);
    const nt = await neg.stop();
    // -1 wraps to 4294967295, not to a small limit: more than the 2 kept above. (A count
    // near 30 would test the machine: a loaded one takes far fewer ticks.)
    check('maxBufferSize -1 keeps everything (4294967295)', nt.samples.length > 2, nt.samples.length);
    return (wt.samples.length >= 2 && nt.samples.length > 2) || wrap.sampleInterval > 1;
  });

  // --- several sessions at once share one sampler
  await retried(async (scale) => {
    const fast = new Profiler({ sampleInterval: 1, maxBufferSize: 100000 });
    const slow = new Profiler({ sampleInterval: 5, maxBufferSize: 100000 });
    check('each session reports its own interval', slow.sampleInterval === 5 && fast.sampleInterval >= 1,
      `${fast.sampleInterval} ${slow.sampleInterval}`);
    hot(150 * scale);
    const ft = await fast.stop();
    check('stopping one session leaves the other running', slow.stopped === false);
    hot(150 * scale);
    const st = await slow.stop();
    const gaps = st.samples.slice(1).map((s, i) => s.timestamp - st.samples[i].timestamp);
    check('the slower session keeps ticks at least its interval apart (less half a tick)',
      gaps.every((g) => g >= 5 - fast.sampleInterval / 2 - 1e-6), Math.min(...gaps));
    // Counts are bounded above by the clock; below only loosely (a loaded machine loses ticks).
    const slowSpan = st.samples.length ? st.samples[st.samples.length - 1].timestamp - st.samples[0].timestamp : 0;
    // (At least 2 samples, so there is a span; the 10 that `retried` asks for are its reason
    // to try again, not this check's: Chromium at load 20 kept 9 in the last try.)
    check('the slower session keeps at most one tick per interval',
      st.samples.length >= 2 && st.samples.length <= slowSpan / (5 - fast.sampleInterval / 2) + 1,
      `${st.samples.length} in ${slowSpan} ms`);
    // Whole: the fast session kept ticks through its 150 ms (at least a few, however loaded the
    // machine) and more than the slow one's share of the same time.
    check('the other session is whole', ft.samples.length >= 5 && ft.samples.length > st.samples.length / 2, ft.samples.length);
    check('both well formed', wellFormed(ft) === '' && wellFormed(st) === '', wellFormed(ft) + wellFormed(st));
    return (ft.samples.length >= 5 && st.samples.length >= 10 && ft.samples.length > st.samples.length / 2) ||
      fast.sampleInterval > 1;
  });

  // --- names: built-ins never appear; a bound function reports its target's name
  function boundTarget(ms) { return hot(ms); }
  function sorter() { const a = Array.from({ length: 2e5 }, (_, i) => (i * 7919) % 1000); for (let i = 0; i < 5; i++) a.slice().sort((x, y) => x - y); return JSON.stringify(a).length; }
  // A loaded machine can leave 60 ms without a sample (the sampler thread waits for a core):
  // the check is of the name, so try again, longer, until the function was sampled at all.
  let nt2, frameNames;
  for (let round = 0; round < 5; round++) {
    const names = new Profiler({ sampleInterval: 1, maxBufferSize: 100000 });
    boundTarget.bind(null)(60 * (round + 1));
    sorter();
    nt2 = await names.stop();
    frameNames = nt2.frames.map((f) => f.name);
    if (frameNames.includes('boundTarget')) break;
  }
  check('a bound function reports its target\'s name',
    frameNames.includes('boundTarget') && !frameNames.some((n) => n.startsWith('bound ')), frameNames);
  check('built-ins never appear as frames',
    !frameNames.some((n) => ['sort', 'slice', 'from', 'stringify', 'bind'].includes(n)), frameNames);
  check('frames and resources de-duplicated', wellFormed(nt2) === '', wellFormed(nt2));

  // --- a loop calling built-ins is sampled with its stack. A sample taken while it runs
  // has the loop's stack, or says with the spec's marker what else the engine was doing
  // ('gc': V8 collects garbage with no JavaScript on the stack); a sample with neither
  // says the thread was idle, which it was not. (Chromium 156's native Profiler gives
  // many of these samples neither: docs/engines.md has the measurement.)
  function builtinLoop(ms) {
    const end = performance.now() + ms;
    const re = /^(\d+)-(\d+)$/;
    let n = 0;
    let s = '';
    while (performance.now() < end) {
      for (let i = 0; i < 200; i++) {
        if (String(i).includes('7')) n++;
        s += i;
        if (s.length > 200000) s = '';
        if (re.test(i + '-' + n)) n++;
      }
      n += [5, 3, 9, 1, 7, 2, 8].map(String).sort()[0].length;
    }
    return n;
  }
  await retried(async (scale) => {
    const bl = new Profiler({ sampleInterval: 10, maxBufferSize: 100000 });
    const bl0 = performance.now();
    builtinLoop(300 * scale);
    const bl1 = performance.now();
    const blt = await bl.stop();
    const loopFrames = new Set(blt.frames.map((f, i) => (f.name === 'builtinLoop' ? i : -1)));
    const onLoop = (id) => {
      for (; id !== undefined; id = blt.stacks[id].parentId) if (loopFrames.has(blt.stacks[id].frameId)) return true;
      return false;
    };
    const during = blt.samples.filter((s) => s.timestamp > bl0 && s.timestamp < bl1);
    const withStack = during.filter((s) => 'stackId' in s).length;
    const withLoop = during.filter((s) => 'stackId' in s && onLoop(s.stackId)).length;
    const marked = during.filter((s) => !('stackId' in s) && s.marker).length;
    const neither = during.length - withStack - marked;
    check('a loop calling built-ins is sampled with its stack',
      during.length >= 5 && neither <= during.length * 0.05 && withLoop > 0 && withStack >= during.length / 2,
      `${neither} of ${during.length} with neither stack nor marker; ${withLoop} through the loop, ${marked} marked`);
    return during.length >= 5 && withLoop > 0; // counts only: `neither` is the engine's
  });

  // --- maxBufferSize 0 keeps nothing and fills at once
  const zero = new Profiler({ sampleInterval: 1, maxBufferSize: 0 });
  let zeroEvents = 0;
  zero.addEventListener('samplebufferfull', () => { zeroEvents++; });
  hot(10);
  for (let i = 0; i < 500 && !zeroEvents; i++) await sleep(10); // until the first tick: 5 s guards a hang
  const zt = await zero.stop();
  check('maxBufferSize 0 keeps no sample', zt.samples.length === 0, zt.samples.length);
  check('maxBufferSize 0: samplebufferfull fired', zeroEvents === 1, zeroEvents);
  check('options must be an object: TypeError', throwsName(() => new Profiler(5)) === 'TypeError');

  for (const r of results) console.log(JSON.stringify(r));
  console.log(JSON.stringify({ done: true }));
})().catch((e) => { console.log(JSON.stringify({ check: 'uncaught', ok: false, detail: String(e && e.stack) })); });
