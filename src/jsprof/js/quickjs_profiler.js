// The W3C JS Self-Profiling `Profiler` global for QuickJS (evaluated by jsprof's QuickJS
// host in every runtime, as a muted script: its own functions never appear in traces).
//
// The session logic (state, shared sampler, keeping rule, buffer limit) is Python's
// (jsprof/session.py); the spec's JavaScript surface is the shared base
// (profiler_base.js, also for Node). This file adds what QuickJS lacks (Event,
// EventTarget), the host bridge as the base's backend, and `samplebufferfull`, which the
// host dispatches as a job (never from inside the sampler).
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

  const byId = new Map(); // live JS profilers by host id, for samplebufferfull

  // The spec's surface is the shared base's (profiler_base.js); the sessions themselves are
  // Python's, reached through the host bridge.
  const { Profiler, bufferFull } = makeProfilerClass({
    create(sampleInterval, maxBufferSize, profiler) {
      // Starts sampling and takes the first sample.
      const got = JSON.parse(call('create', JSON.stringify({ sampleInterval, maxBufferSize })));
      byId.set(got.id, profiler);
      return { id: got.id, interval: got.sampleInterval };
    },
    isStopped(st) { return call('stopped', st.id) === '1'; },
    stop(st) {
      byId.delete(st.id);
      return JSON.parse(call('stop', st.id));
    },
  });

  // The fallbacks brand their instances as the web's do.
  for (const [C, tag] of [[globalThis.EventTarget, 'EventTarget'], [globalThis.Event, 'Event']]) {
    if (!Object.prototype.hasOwnProperty.call(C.prototype, Symbol.toStringTag)) {
      Object.defineProperty(C.prototype, Symbol.toStringTag, { value: tag, configurable: true });
    }
  }

  // Called by the host as a job (already a task) when a profiler's buffer filled.
  setDispatch((id) => {
    const p = byId.get(id);
    if (p !== undefined) bufferFull(p, (task) => task());
  });

  Object.defineProperty(globalThis, 'Profiler', {
    value: Profiler, writable: true, configurable: true, enumerable: false,
  });
})();
