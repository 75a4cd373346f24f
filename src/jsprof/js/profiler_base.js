// The spec's `Profiler` interface over an engine's sessions, shared by the `Profiler`
// globals of QuickJS (quickjs_profiler.js, evaluated in one function scope with this file,
// so it adds no global) and Node (node_profiler.js `require`s it). What differs per engine
// is the backend:
//   create(sampleInterval, maxBufferSize, profiler) -> state   // {interval, ...}; may throw
//   isStopped(state) -> boolean            // optional: did the engine stop it on its own?
//   stop(state) -> ProfilerTrace           // called once per profiler; state.stopped says
//                                          // whether the buffer had already filled
// The base does the rest the same way on both: WebIDL conversion of ProfilerInitOptions, the
// `sampleInterval`/`stopped`/`onsamplebufferfull` attributes, the stopped state,
// `stop()`'s Promise and its InvalidStateError on a second call, 'Illegal invocation' on
// foreign receivers, the `[object Profiler]` brand, `samplebufferfull` as a plain Event
// dispatched as a task, and the spec's "get an element ID" for engines that build the trace
// in JavaScript (TraceBuilder).
'use strict';

// WebIDL `unsigned long`: ToNumber, truncate, modulo 2^32; NaN and infinities give 0.
function toUnsignedLong(v) {
  const x = Number(v);
  if (!Number.isFinite(x)) return 0;
  const t = Math.trunc(x);
  return ((t % 4294967296) + 4294967296) % 4294967296;
}

// ProfilerInitOptions -> {sampleInterval, maxBufferSize}, or what Chromium throws.
function readProfilerOptions(options) {
  // WebIDL converts the dictionary's members in lexicographic order, so a missing
  // maxBufferSize is reported before anything about sampleInterval.
  if (options !== undefined && options !== null && typeof options !== 'object' &&
      typeof options !== 'function') {
    throw new TypeError("Failed to construct 'Profiler': The provided value is not of type 'ProfilerInitOptions'.");
  }
  const opts = options == null ? {} : options;
  const rawMax = opts.maxBufferSize;
  if (rawMax === undefined) {
    throw new TypeError("Failed to construct 'Profiler': Failed to read the 'maxBufferSize' property from 'ProfilerInitOptions': Required member is undefined.");
  }
  const maxBufferSize = toUnsignedLong(rawMax);
  const rawInterval = opts.sampleInterval;
  if (rawInterval === undefined) {
    throw new TypeError("Failed to construct 'Profiler': Failed to read the 'sampleInterval' property from 'ProfilerInitOptions': Required member is undefined.");
  }
  const sampleInterval = Number(rawInterval);
  if (!Number.isFinite(sampleInterval)) {
    throw new TypeError("Failed to construct 'Profiler': Failed to read the 'sampleInterval' property from 'ProfilerInitOptions': The provided double value is non-finite.");
  }
  if (sampleInterval < 0) {
    throw new RangeError("Failed to construct 'Profiler': sampleInterval must be non-negative.");
  }
  return { sampleInterval, maxBufferSize };
}

function makeProfilerClass(backend) {
  const sessions = new WeakMap();

  function sessionOf(p) {
    const st = sessions.get(p);
    if (st === undefined) throw new TypeError('Illegal invocation');
    return st;
  }

  class Profiler extends EventTarget {
    constructor(options) {
      super();
      const { sampleInterval, maxBufferSize } = readProfilerOptions(options);
      const st = backend.create(sampleInterval, maxBufferSize, this);
      st.stopped = false;
      st.taken = false;
      st.handler = null;
      sessions.set(this, st);
    }

    get sampleInterval() { return sessionOf(this).interval; }

    get stopped() {
      const st = sessionOf(this);
      if (!st.stopped && backend.isStopped !== undefined && backend.isStopped(st)) st.stopped = true;
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
      try {
        const trace = backend.stop(st);
        st.stopped = true;
        return Promise.resolve(trace);
      } catch (e) {
        st.stopped = true;
        return Promise.reject(e);
      }
    }
  }

  // WebIDL interfaces brand their instances: Object.prototype.toString gives `[object Profiler]`.
  Object.defineProperty(Profiler.prototype, Symbol.toStringTag, { value: 'Profiler', configurable: true });

  // The engine found the profiler's buffer full: it is stopped from now on, and
  // `samplebufferfull` (a plain Event) is dispatched by `queueTask`, never from inside the
  // sampler.
  function bufferFull(profiler, queueTask) {
    sessionOf(profiler).stopped = true;
    queueTask(() => profiler.dispatchEvent(new Event('samplebufferfull')));
  }

  return { Profiler, sessionOf, bufferFull };
}

// The spec's "get an element ID" for a trace built in JavaScript: a component-wise equal
// resource, frame or stack gets the ID it already has, otherwise it is appended. Frames are
// {name, resourceId?, line?, column?} (1-based); stacks {parentId?, frameId}; a sample
// without a stack has no stackId key.
class TraceBuilder {
  constructor() {
    this.resources = [];
    this.frames = [];
    this.stacks = [];
    this.samples = [];
    this.resourceIds = new Map();
    this.frameIds = new Map();
    this.stackIds = new Map();
  }

  resourceId(url) {
    let id = this.resourceIds.get(url);
    if (id === undefined) {
      id = this.resources.length;
      this.resourceIds.set(url, id);
      this.resources.push(url);
    }
    return id;
  }

  // `url` empty or undefined: no resource; `line`/`column` undefined: unknown.
  frameId(name, url, line, column) {
    const resourceId = url ? this.resourceId(url) : undefined;
    const key = `${name}\u0000${resourceId}\u0000${line}\u0000${column}`;
    let id = this.frameIds.get(key);
    if (id === undefined) {
      const f = { name };
      if (resourceId !== undefined) f.resourceId = resourceId;
      if (line !== undefined) f.line = line;
      if (column !== undefined) f.column = column;
      id = this.frames.length;
      this.frameIds.set(key, id);
      this.frames.push(f);
    }
    return id;
  }

  // The stack of `frameId` called from stack `parentId` (undefined for a root).
  stackId(parentId, frameId) {
    const key = `${parentId === undefined ? -1 : parentId}:${frameId}`;
    let id = this.stackIds.get(key);
    if (id === undefined) {
      id = this.stacks.length;
      this.stackIds.set(key, id);
      this.stacks.push(parentId === undefined ? { frameId } : { parentId, frameId });
    }
    return id;
  }

  // `marker`: the spec's ProfilerMarker ('gc', 'other'...) for a sample that is not idle
  // though no JavaScript is on its stack; omitted when there is none.
  addSample(timestamp, stackId, marker) {
    const s = stackId === undefined ? { timestamp } : { timestamp, stackId };
    if (marker !== undefined) s.marker = marker;
    this.samples.push(s);
  }

  get length() { return this.samples.length; }

  trace() {
    return { frames: this.frames, resources: this.resources, samples: this.samples, stacks: this.stacks };
  }
}

if (typeof module === 'object' && module && module.exports) {
  module.exports = { makeProfilerClass, readProfilerOptions, TraceBuilder };
}
