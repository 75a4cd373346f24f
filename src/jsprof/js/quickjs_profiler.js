// The W3C JS Self-Profiling `Profiler` global for QuickJS (evaluated by jsprof's QuickJS
// host in every runtime, as a muted script: its own functions never appear in traces).
//
// The session logic (state, shared sampler, keeping rule, buffer limit) is Python's
// (jsprof/session.py); this file is the spec's JavaScript surface over it: WebIDL
// conversions and errors, EventTarget, the Promise from stop(), and `samplebufferfull`,
// which the host dispatches as a job (never from inside the sampler).
'use strict';

(() => {
  const host = globalThis.__jsprof_host;
  const setDispatch = globalThis.__jsprof_set_dispatch;
  delete globalThis.__jsprof_host;
  delete globalThis.__jsprof_set_dispatch;

  // --- Event and EventTarget, where the engine lacks them (QuickJS has neither)
  if (typeof globalThis.Event !== 'function') {
    class Event {
      #type; #bubbles; #cancelable; #canceled = false; #stop = false; #target = null;
      #current = null; #timeStamp = performance.now();
      constructor(type, init = undefined) {
        if (arguments.length === 0) throw new TypeError("Failed to construct 'Event': 1 argument required.");
        this.#type = String(type);
        this.#bubbles = !!(init && init.bubbles);
        this.#cancelable = !!(init && init.cancelable);
      }
      get type() { return this.#type; }
      get bubbles() { return this.#bubbles; }
      get cancelable() { return this.#cancelable; }
      get defaultPrevented() { return this.#canceled; }
      get target() { return this.#target; }
      get currentTarget() { return this.#current; }
      get timeStamp() { return this.#timeStamp; }
      preventDefault() { if (this.#cancelable) this.#canceled = true; }
      stopPropagation() {}
      stopImmediatePropagation() { this.#stop = true; }
      static _set(e, target, current) { e.#target = target; e.#current = current; }
      static _stopped(e) { return e.#stop; }
    }
    Object.defineProperty(globalThis, 'Event', { value: Event, writable: true, configurable: true });
  }
  if (typeof globalThis.EventTarget !== 'function') {
    const setEvent = (e, t, c) => (typeof Event._set === 'function' ? Event._set(e, t, c) : undefined);
    const immediateStopped = (e) => (typeof Event._stopped === 'function' ? Event._stopped(e) : false);
    class EventTarget {
      #listeners = new Map(); // type -> [{callback, once}]
      addEventListener(type, callback, options = undefined) {
        if (callback === null || callback === undefined) return;
        const once = typeof options === 'object' && options !== null && !!options.once;
        const list = this.#listeners.get(String(type)) || [];
        if (list.some((l) => l.callback === callback)) return;
        list.push({ callback, once });
        this.#listeners.set(String(type), list);
      }
      removeEventListener(type, callback) {
        const list = this.#listeners.get(String(type));
        if (!list) return;
        const i = list.findIndex((l) => l.callback === callback);
        if (i >= 0) list.splice(i, 1);
      }
      dispatchEvent(event) {
        if (!(event instanceof globalThis.Event)) throw new TypeError("parameter 1 is not of type 'Event'.");
        setEvent(event, this, this);
        for (const l of [...(this.#listeners.get(event.type) || [])]) {
          if (l.once) this.removeEventListener(event.type, l.callback);
          try {
            if (typeof l.callback === 'function') l.callback.call(this, event);
            else if (l.callback && typeof l.callback.handleEvent === 'function') l.callback.handleEvent(event);
          } catch (e) {
            console.error(e); // reported, as the web does, not thrown at the dispatcher
          }
          if (immediateStopped(event)) break;
        }
        setEvent(event, this, null);
        return !event.defaultPrevented;
      }
    }
    Object.defineProperty(globalThis, 'EventTarget', { value: EventTarget, writable: true, configurable: true });
  }

  // --- the host bridge: "R<result>" or "E<name>\n<message>"
  function call(op, arg) {
    const r = host(op, String(arg));
    if (r[0] === 'R') return r.slice(1);
    const nl = r.indexOf('\n');
    const name = r.slice(1, nl);
    const message = r.slice(nl + 1);
    if (name === 'TypeError') throw new TypeError(message);
    if (name === 'RangeError') throw new RangeError(message);
    throw new DOMException(message, name);
  }

  const sessions = new WeakMap();
  const byId = new Map(); // live JS profilers by host id, for samplebufferfull

  function sessionOf(p) {
    const st = sessions.get(p);
    if (st === undefined) throw new TypeError('Illegal invocation');
    return st;
  }

  class Profiler extends EventTarget {
    constructor(options) {
      super();
      const { sampleInterval: interval, maxBufferSize } = readProfilerOptions(options);
      // Starts sampling and takes the first sample.
      const got = JSON.parse(call('create', JSON.stringify({ sampleInterval: interval, maxBufferSize })));
      sessions.set(this, { id: got.id, interval: got.sampleInterval, stopped: false, taken: false, handler: null });
      byId.set(got.id, this);
    }

    get sampleInterval() { return sessionOf(this).interval; }

    get stopped() {
      const st = sessionOf(this);
      if (!st.stopped && call('stopped', st.id) === '1') st.stopped = true;
      return st.stopped;
    }

    get onsamplebufferfull() { return sessionOf(this).handler; }

    set onsamplebufferfull(fn) {
      const st = sessionOf(this);
      if (st.handler) this.removeEventListener('samplebufferfull', st.handler);
      st.handler = typeof fn === 'function' ? fn : null;
      if (st.handler) this.addEventListener('samplebufferfull', st.handler);
    }

    stop() {
      let st;
      try {
        st = sessionOf(this);
      } catch (e) {
        return Promise.reject(e);
      }
      if (st.taken) {
        return Promise.reject(new DOMException('the profiler was already stopped', 'InvalidStateError'));
      }
      st.taken = true;
      st.stopped = true;
      byId.delete(st.id);
      try {
        return Promise.resolve(JSON.parse(call('stop', st.id)));
      } catch (e) {
        return Promise.reject(e);
      }
    }
  }

  // WebIDL interfaces brand their instances: Object.prototype.toString gives
  // `[object Profiler]` (and `[object EventTarget]`/`[object Event]` for the fallbacks).
  for (const [C, tag] of [[Profiler, 'Profiler'], [globalThis.EventTarget, 'EventTarget'], [globalThis.Event, 'Event']]) {
    if (!Object.prototype.hasOwnProperty.call(C.prototype, Symbol.toStringTag)) {
      Object.defineProperty(C.prototype, Symbol.toStringTag, { value: tag, configurable: true });
    }
  }

  // Called by the host as a job when a profiler's buffer filled: a plain Event.
  setDispatch((id) => {
    const p = byId.get(id);
    if (p === undefined) return;
    sessionOf(p).stopped = true;
    p.dispatchEvent(new Event('samplebufferfull'));
  });

  Object.defineProperty(globalThis, 'Profiler', {
    value: Profiler, writable: true, configurable: true, enumerable: false,
  });
})();
