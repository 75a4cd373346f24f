// jsprof-client.js: field profiling with the JS Self-Profiling API, posting to `jsprof serve`.
//
//   import {startProfiling} from "https://collector.example/v1/client.js";
//   const p = startProfiling({endpoint: "https://collector.example", app: "shop",
//                             key: "public-ingest-key", release: "1.4.2", sampleRate: 0.01});
//   p.enabled / p.reason say whether this page is profiled, and why not.
//
// The page must be served with the response header `Document-Policy: js-profiling`.
// Design notes: one decision per browser session (a hash of a session id kept in
// sessionStorage, so a user's pages are all in or all out); traces are captured in chunks,
// a new Profiler per chunk, and posted as they are (never expanded per sample); on the way
// out (page hidden) the last chunk goes by keepalive fetch when it fits the browser's 64 KiB
// keepalive budget, else by sendBeacon, else it is dropped and counted.

const KEEPALIVE_LIMIT = 64 * 1024;
const SESSION_KEY = "jsprof-session";

function fnv1a(text) {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

function randomId() {
  if (globalThis.crypto && typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function sessionId(given) {
  if (given) return String(given);
  try {
    let id = sessionStorage.getItem(SESSION_KEY);
    if (!id) {
      id = randomId();
      sessionStorage.setItem(SESSION_KEY, id);
    }
    return id;
  } catch (e) {
    return randomId(); // storage blocked: decide per page instead
  }
}

/** Whether this session is in the sample: the same answer for every page of the session. */
export function inSample(session, app, sampleRate) {
  if (!(sampleRate > 0)) return false;
  if (sampleRate >= 1) return true;
  return fnv1a(`${app}\u0000${session}`) / 4294967296 < sampleRate;
}

/** Why profiling cannot run here, or null when it can. */
export function unsupportedReason() {
  if (typeof globalThis.Profiler !== "function") return "no-profiler-api";
  // Without `Document-Policy: js-profiling` the constructor throws NotAllowedError; there
  // is no reliable way to ask first, so start() tries it and reports "document-policy".
  return null;
}

async function gzip(text) {
  if (typeof CompressionStream !== "function") return null;
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

class Session {
  constructor(opts) {
    this.opts = opts;
    this.enabled = false;
    this.reason = null;
    this.stats = {chunks: 0, sent: 0, beacons: 0, failed: 0, dropped: 0, bytes: 0, ids: []};
    this.profiler = null;
    this.timer = null;
    this.stopped = false;
    this.pending = new Set();
    this.chunk = 0;
    this.onVisibility = () => this.visibilityChanged();
    this.onPageHide = () => this.rotate("pagehide", {keepalive: true, restart: false});
  }

  newProfiler() {
    const {sampleInterval, chunkMs} = this.opts;
    const maxBufferSize = Math.ceil((1.5 * chunkMs) / sampleInterval);
    const p = new Profiler({sampleInterval, maxBufferSize});
    p.addEventListener("samplebufferfull", () => {
      if (p === this.profiler) this.rotate("bufferfull", {keepalive: false, restart: true});
    });
    return p;
  }

  start() {
    try {
      this.profiler = this.newProfiler();
    } catch (e) {
      this.reason = e && e.name === "NotAllowedError" ? "document-policy" : "profiler-error";
      this.error = String(e && e.message);
      return;
    }
    this.enabled = true;
    this.armTimer();
    document.addEventListener("visibilitychange", this.onVisibility);
    globalThis.addEventListener("pagehide", this.onPageHide);
  }

  armTimer() {
    clearTimeout(this.timer);
    this.timer = setTimeout(
      () => this.rotate("interval", {keepalive: false, restart: true}),
      this.opts.chunkMs,
    );
  }

  // End the current chunk, start the next one at once (restart, unless stopped or hidden)
  // and send the ended one: by keepalive fetch or beacon when the page is going away.
  rotate(why, {keepalive, restart}) {
    const old = this.profiler;
    this.profiler = null;
    clearTimeout(this.timer);
    if (restart && !this.stopped && document.visibilityState !== "hidden") {
      try {
        this.profiler = this.newProfiler();
        this.armTimer();
      } catch (e) {
        this.reason = "profiler-error";
      }
    }
    if (!old) return Promise.resolve(null);
    const done = old
      .stop()
      .then((trace) => this.send(trace, why, keepalive))
      .catch(() => {
        this.stats.failed++;
        return null;
      });
    this.pending.add(done);
    done.finally(() => this.pending.delete(done));
    return done;
  }

  visibilityChanged() {
    if (this.stopped) return;
    if (document.visibilityState === "hidden") {
      this.rotate("hidden", {keepalive: true, restart: false});
    } else if (!this.profiler) {
      try {
        this.profiler = this.newProfiler();
        this.armTimer();
      } catch (e) {
        this.reason = "profiler-error";
      }
    }
  }

  url(id) {
    const o = this.opts;
    const q = new URLSearchParams({app: o.app, key: o.key, id});
    if (o.release != null) q.set("release", String(o.release));
    if (o.route != null) q.set("route", String(o.route));
    if (o.env != null) q.set("env", String(o.env));
    return `${o.endpoint.replace(/\/+$/, "")}/v1/traces?${q}`;
  }

  async send(trace, why, keepalive) {
    if (!trace || !trace.samples || trace.samples.length === 0) return null;
    this.chunk++;
    this.stats.chunks++;
    const meta = Object.assign({}, this.opts.meta, {
      timeOrigin: performance.timeOrigin,
      userAgent: navigator.userAgent,
      sampleInterval: this.opts.sampleInterval,
      chunk: this.chunk,
      chunkReason: why,
      dropped: this.stats.dropped,
    });
    // The trace goes as the browser gave it: its stacks stay a tree, never one per sample.
    const json = JSON.stringify({trace, meta});
    const id = randomId();
    const url = this.url(id);
    let body = json;
    let gz = null;
    try {
      gz = await gzip(json);
    } catch (e) {
      gz = null;
    }
    const headers = {"Content-Type": "application/json"};
    if (gz) {
      body = gz;
      headers["Content-Encoding"] = "gzip";
    }
    const size = gz ? gz.byteLength : new Blob([json]).size;
    if (keepalive) {
      if (size <= this.opts.keepaliveLimit) {
        try {
          fetch(url, {method: "POST", body, headers, keepalive: true, mode: "cors"});
          return this.sent(id, size);
        } catch (e) {
          // over the keepalive budget already in flight: try a beacon
        }
      }
      // A beacon cannot set headers: text/plain, and the collector recognises gzip bytes.
      if (navigator.sendBeacon && navigator.sendBeacon(url, new Blob([body], {type: "text/plain"}))) {
        this.stats.beacons++;
        return this.sent(id, size);
      }
      this.stats.dropped++;
      return null;
    }
    try {
      const r = await fetch(url, {method: "POST", body, headers, mode: "cors"});
      if (r.status !== 202) {
        this.stats.failed++;
        return null;
      }
    } catch (e) {
      this.stats.failed++;
      return null;
    }
    return this.sent(id, size);
  }

  sent(id, size) {
    this.stats.sent++;
    this.stats.bytes += size;
    this.stats.ids.push(id);
    if (this.stats.ids.length > 100) this.stats.ids.shift();
    return id;
  }
}

/**
 * Start field profiling. Returns a handle: `enabled`, `reason` (why not: "not-sampled",
 * "no-profiler-api", "document-policy", "profiler-error"), `stats`, `flush()` (send the
 * current chunk now and keep going; resolves to the upload ids sent) and `stop()`.
 */
export function startProfiling(options) {
  const opts = Object.assign(
    {
      sampleRate: 1,
      sampleInterval: 10,
      chunkMs: 60000,
      route: null,
      release: null,
      env: null,
      keepaliveLimit: KEEPALIVE_LIMIT, // the browser's budget for keepalive request bodies
    },
    options || {},
  );
  if (!opts.endpoint || !opts.app || !opts.key) {
    throw new TypeError("startProfiling: endpoint, app and key are required");
  }
  if (opts.route == null && typeof location !== "undefined") opts.route = location.pathname;
  const s = new Session(opts);
  const handle = {
    get enabled() {
      return s.enabled && !s.stopped;
    },
    get reason() {
      return s.reason;
    },
    stats: s.stats,
    session: null,
    // Send the current chunk now and go on profiling. {keepalive: true} sends it the way a
    // page that is going away does (keepalive fetch, else beacon, else dropped).
    async flush({keepalive = false} = {}) {
      if (!s.enabled || s.stopped) return [];
      await s.rotate("flush", {keepalive, restart: true});
      return Promise.all([...s.pending]).then(() => s.stats.ids.slice());
    },
    async stop() {
      if (!s.enabled || s.stopped) return [];
      s.stopped = true;
      document.removeEventListener("visibilitychange", s.onVisibility);
      globalThis.removeEventListener("pagehide", s.onPageHide);
      await s.rotate("stop", {keepalive: false, restart: false});
      await Promise.all([...s.pending]);
      return s.stats.ids.slice();
    },
  };
  const session = sessionId(opts.sessionId);
  handle.session = session;
  if (!inSample(session, opts.app, opts.sampleRate)) {
    s.reason = "not-sampled";
    return handle;
  }
  const why = unsupportedReason();
  if (why) {
    s.reason = why;
    return handle;
  }
  s.start();
  return handle;
}
