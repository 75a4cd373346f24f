// jsprof's helper inside a Chromium page or worker, evaluated before the first script.
// It answers two questions the DevTools protocol cannot: is a timer or animation frame
// still pending, and when did the last one fall due (the `--until load` rule). It also
// keeps console.profile/profileEnd as they were, for the profile slices taken while
// recording (insurance against a crash). Callbacks are not wrapped, so the page's own
// stacks stay as they are; jsprof drops this file's frames from the profile.
// In a page it also watches the long animation frames and interactions with the browser
// client's own Timeline (inlined where the marker below is: engines/chromium/helper.py),
// which jsprof takes every second, so a recording holds what the fleet gets.
(() => {
  'use strict';
  const g = globalThis;
  if (Object.prototype.hasOwnProperty.call(g, '__jsprof')) return;
  const perf = g.performance;
  const now = () => perf.now();
  const timers = new Map(); // id -> due time (Infinity for an interval)
  let lastDue = -1e9;
  let rafAt = -1e9;
  const define = (name, fn) => {
    Object.defineProperty(g, name, { value: fn, writable: true, configurable: true, enumerable: true });
  };
  const rAF0 = typeof g.requestAnimationFrame === 'function' ? g.requestAnimationFrame : null;
  // The timers' originals, each read when it is called. In a dedicated worker waiting
  // for the debugger, where jsprof evaluates this file, Chromium (156) has not yet put
  // WorkerGlobalScope's operations on the global's prototype: setTimeout, setInterval,
  // clearTimeout and clearInterval read undefined there (so do atob and others we do not
  // wrap), and they are there, below our wrappers, once the worker's script runs. Read
  // once here, every worker's first setInterval threw a TypeError from our wrapper in the
  // worker's own code, and each probe of a worker's timers failed. An original missing
  // when called too (no scope is known to do that): the wrapper takes itself away and the
  // call goes where it would without jsprof.
  const native = (name) => {
    let f = g[name];
    return () => {
      if (typeof f !== 'function') {
        const below = Object.getPrototypeOf(g);
        f = below == null ? undefined : Reflect.get(below, name, g);
      }
      return typeof f === 'function' ? f : null;
    };
  };
  const sT = native('setTimeout'), sI = native('setInterval');
  const cT = native('clearTimeout'), cI = native('clearInterval');
  const unwrapped = (name, self, args) => {
    delete g[name];
    return Reflect.apply(g[name], self, args);
  };
  // jsprof's own waits, through the page's setTimeout (a microtask if it has none yet)
  const later = (f, ms) => {
    const o = sT();
    if (o) o.call(g, f, ms);
    else Promise.resolve().then(f);
  };
  define('setTimeout', function setTimeout(f, ms, ...args) {
    const o = sT();
    if (!o) return unwrapped('setTimeout', this, arguments);
    const id = o.call(g, f, ms, ...args);
    timers.set(id, now() + Math.max(0, Number(ms) || 0));
    return id;
  });
  define('setInterval', function setInterval(f, ms, ...args) {
    const o = sI();
    if (!o) return unwrapped('setInterval', this, arguments);
    const id = o.call(g, f, ms, ...args);
    timers.set(id, Infinity);
    return id;
  });
  define('clearTimeout', function clearTimeout(id) {
    const o = cT();
    if (!o) return unwrapped('clearTimeout', this, arguments);
    timers.delete(id);
    return o.call(g, id);
  });
  define('clearInterval', function clearInterval(id) {
    const o = cI();
    if (!o) return unwrapped('clearInterval', this, arguments);
    timers.delete(id);
    return o.call(g, id);
  });
  if (typeof g.requestAnimationFrame === 'function') {
    const rAF = g.requestAnimationFrame;
    define('requestAnimationFrame', function requestAnimationFrame(f) {
      rafAt = now();
      return rAF.call(g, f);
    });
  }
  // window.close() is refused for a tab whose history has two entries (ours: about:blank,
  // then the page), so tell jsprof through its binding; the run ends there.
  if (typeof g.close === 'function' && typeof g.document === 'object') {
    const close = g.close;
    define('close', function close_() {
      const tell = g.__jsprofClose;
      if (typeof tell === 'function') tell('');
      return close.call(g);
    });
    Object.defineProperty(g.close, 'name', { value: 'close' });
  }
  // A worker ended by the page (terminate) or by itself (close) takes its profile with
  // it: jsprof keeps what its slices hold. So close() first ends the slice being
  // recorded, and the page's terminate() waits (the page no longer hears from that
  // worker) until jsprof has cut every worker's slice, then ends it (`release`).
  let current = '';
  let closed = false;
  const held = [];
  let terminate = null;
  if (typeof g.close === 'function' && typeof g.document !== 'object'
      && typeof g.WorkerGlobalScope === 'function') {
    const close = g.close;
    define('close', function close_() {
      // (then an empty slice whose title says so: jsprof's next slice may have been
      // asked for already, and it must not take the thread's end for a lost second)
      if (current) { profileEnd(current); current = ''; }
      closed = true;
      profile('jsprof-slice-closed'); profileEnd('jsprof-slice-closed');
      return close.call(g);
    });
    Object.defineProperty(g.close, 'name', { value: 'close' });
  }
  if (typeof g.Worker === 'function' && typeof g.document === 'object') {
    const W = g.Worker;
    const proto = W.prototype;
    terminate = proto.terminate;
    // Silencing a terminated worker takes a listener that runs before the page's own, and
    // a target runs its listeners in the order they were added, capture or not (Chromium
    // 156: a capture listener added at terminate() stopped none of those the page added
    // before; the page heard every message the worker posted while held). So each Worker
    // gets this one as it is made, through the constructor: it is the first.
    const muted = new WeakSet();
    const listen = g.EventTarget.prototype.addEventListener;
    const mute = (e) => { if (muted.has(e.currentTarget)) e.stopImmediatePropagation(); };
    const Worker = new Proxy(W, {
      construct(target, args, newTarget) {
        const w = Reflect.construct(target, args, newTarget === Worker ? W : newTarget);
        for (const t of ['message', 'messageerror', 'error']) listen.call(w, t, mute, true);
        return w;
      },
    });
    Object.defineProperty(g, 'Worker', { ...Object.getOwnPropertyDescriptor(g, 'Worker'), value: Worker });
    Object.defineProperty(proto, 'constructor', {
      ...Object.getOwnPropertyDescriptor(proto, 'constructor'), value: Worker,
    });
    Object.defineProperty(proto, 'terminate', {
      value: function terminate_() {
        const tell = g.__jsprofTerminate;
        if (typeof tell !== 'function' || !(this instanceof W)) return terminate.call(this);
        if (held.includes(this)) return undefined;
        muted.add(this);
        held.push(this);
        tell('');
        return undefined;
      },
      writable: true, configurable: true, enumerable: false,
    });
    Object.defineProperty(proto.terminate, 'name', { value: 'terminate' });
  }
  /*jsprof:timeline*/
  let timeline = null;
  if (typeof g.document === 'object' && typeof g.PerformanceObserver === 'function') {
    try {
      timeline = new Timeline();
      timeline.start();
    } catch (e) {
      timeline = null; // the page's own globals broke it: no timeline, the profile stands
    }
  }
  const con = g.console;
  const profile = con.profile.bind(con), profileEnd = con.profileEnd.bind(con);
  Object.defineProperty(g, '__jsprof', {
    enumerable: false,
    value: Object.freeze({
      // Resolves in a task of its own, so a busy thread answers late:
      // [pending timers + animation frames, ms since the last one fell due].
      idle: () => new Promise((resolve) => later(() => {
        const t = now();
        let pending = 0;
        for (const [id, due] of timers) {
          if (due > t) pending++;
          else { timers.delete(id); if (due > lastDue) lastDue = due; }
        }
        if (t - rafAt < 100) pending++;
        resolve([pending, t - Math.max(lastDue, rafAt)]);
      }, 0)),
      // End one slice and start the next in one call, so no tick falls between.
      slice: (next, prev) => {
        if (closed) return;
        profile(next); if (prev) profileEnd(prev); current = next;
      },
      // The workers' slices were cut: end the first n workers the page terminated.
      release: (n) => { for (const w of held.splice(0, n)) if (terminate) terminate.call(w); },
      origin: () => [perf.timeOrigin, now()],
      // What was observed since the last call, on this document's clock. `last`: the
      // recording ends; a long frame and an interaction are reported once their frame
      // was presented, so wait two frames and a little more (at most 500 ms: a page may
      // draw none) before taking.
      timeline: (last) => {
        const take = () => [perf.timeOrigin, timeline ? timeline.take() : null];
        if (!last || !timeline) return take();
        return new Promise((resolve) => {
          let done = false;
          const end = () => { if (!done) { done = true; resolve(take()); } };
          if (rAF0) rAF0.call(g, () => rAF0.call(g, () => later(end, 50)));
          later(end, 500);
        });
      },
    }),
  });
})();
