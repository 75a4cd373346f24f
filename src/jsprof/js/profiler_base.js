// The spec's `Profiler` interface over an engine's sessions, shared by the `Profiler`
// globals of QuickJS (quickjs_profiler.js, evaluated in one scope with this file and
// profiler_options.js) and Node (node_profiler.js can `require` it). What differs per engine
// is the backend:
//   create(sampleInterval, maxBufferSize, profiler) -> state   // {interval, ...}; may throw
//   isStopped(state) -> boolean
//   stop(state) -> ProfilerTrace                               // called once per profiler
// The base does the rest the same way on both: WebIDL option conversion, the
// `sampleInterval`/`stopped`/`onsamplebufferfull` attributes, `stop()`'s Promise and its
// InvalidStateError on a second call, 'Illegal invocation' on foreign receivers, the
// `[object Profiler]` brand, and `samplebufferfull` as a plain Event.
'use strict';

function makeProfilerClass(backend, readOptions) {
  const sessions = new WeakMap();

  function sessionOf(p) {
    const st = sessions.get(p);
    if (st === undefined) throw new TypeError('Illegal invocation');
    return st;
  }

  class Profiler extends EventTarget {
    constructor(options) {
      super();
      const { sampleInterval, maxBufferSize } = readOptions(options);
      const st = backend.create(sampleInterval, maxBufferSize, this);
      st.taken = false;
      st.handler = null;
      sessions.set(this, st);
    }

    get sampleInterval() { return sessionOf(this).interval; }

    get stopped() { return backend.isStopped(sessionOf(this)); }

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
      try {
        return Promise.resolve(backend.stop(st));
      } catch (e) {
        return Promise.reject(e);
      }
    }
  }

  // WebIDL interfaces brand their instances: Object.prototype.toString gives `[object Profiler]`.
  Object.defineProperty(Profiler.prototype, Symbol.toStringTag, { value: 'Profiler', configurable: true });

  // The engine's buffer-full notice, run as a task (never from inside the sampler).
  function dispatchBufferFull(profiler) {
    profiler.dispatchEvent(new Event('samplebufferfull'));
  }

  return { Profiler, sessionOf, dispatchBufferFull };
}

if (typeof module === 'object' && module && module.exports) module.exports = makeProfilerClass;
