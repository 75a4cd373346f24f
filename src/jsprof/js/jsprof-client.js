// jsprof-client.js: field profiling with the JS Self-Profiling API, posting to `jsprof serve`.
//
//   import {startProfiling} from "https://collector.example/v1/client.js";
//   const p = startProfiling({endpoint: "https://collector.example", app: "shop",
//                             key: "public-ingest-key", release: "1.4.2", sampleRate: 0.01});
//   p.enabled / p.reason say whether this page is profiled, and why not.
//
// The page must be served with the response header `Document-Policy: js-profiling`.
// Design notes: one decision per browser session, so a user's pages are all in or all out:
// the server's when it sent the `jsprof_sample` cookie (jsprof.field's middlewares, the
// nginx snippet of docs/field.md: they send the header to sampled sessions only), else a
// hash of a session id kept in sessionStorage against sampleRate; traces are captured in chunks,
// a new Profiler per chunk, and posted as they are (never expanded per sample); on the way
// out (page hidden) the last chunk goes by keepalive fetch when it fits the browser's 64 KiB
// keepalive budget, else by sendBeacon, else it is dropped and counted.

const KEEPALIVE_LIMIT = 64 * 1024;
const SESSION_KEY = "jsprof-session";
// The cookie jsprof.field (and the nginx snippet) keep the server's decision in: 1 or 0.
const SAMPLE_COOKIE = "jsprof_sample";

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

/**
 * The server's sampling decision for this session from its cookie (`true` for "1",
 * `false` for any other value), or null when there is no such cookie (or no cookies).
 */
export function serverDecision(name = SAMPLE_COOKIE) {
  let all = "";
  try {
    all = typeof document !== "undefined" ? String(document.cookie || "") : "";
  } catch (e) {
    return null; // cookies blocked (a sandboxed frame): no decision to read
  }
  for (const part of all.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    return part.slice(eq + 1).trim().replace(/^"|"$/g, "") === "1";
  }
  return null;
}

/** Why profiling cannot run here, or null when it can. */
export function unsupportedReason() {
  if (typeof globalThis.Profiler !== "function") return "no-profiler-api";
  // Without `Document-Policy: js-profiling` the constructor throws NotAllowedError; there
  // is no reliable way to ask first, so start() tries it and reports "document-policy".
  return null;
}

// ---- timeline: begin. The Chromium engine's page helper runs this block too (its text,
// taken from here between the two markers: engines/chromium/helper.py), so local
// recordings and the fleet read one shape. Keep it self-contained, no imports.
// What one chunk's `timeline` holds at most (the collector refuses more): the rest is
// counted in timeline.dropped. Long frames and interactions are kept longest first.
export const TIMELINE_LIMITS = {longFrames: 50, scripts: 10, interactions: 100, text: 256};

function stripQuery(url) {
  const s = String(url || "");
  const cut = s.search(/[?#]/);
  return (cut < 0 ? s : s.slice(0, cut)).slice(0, 2048);
}

function short(text) {
  return text == null ? null : String(text).slice(0, TIMELINE_LIMITS.text);
}

// What a user interacted with, as a CSS selector that stays the same across page loads
// (so the fleet can count per target): computed in the browser when the entry is observed
// (the element may be gone by the time a chunk is sent). Never text or values (they may be
// personal): for an interaction the nearest interactive ancestor (a click on a button's icon
// is the button's),
// then `tag#id` when it has an id that does not look generated, else `tag.class:nth-of-type(k)`
// steps up to the nearest such id (at most 5 steps, 3 classes a step, 256 characters).
const INTERACTIVE = "a[href],button,input,select,textarea,label,summary,[role=button]," +
  "[role=link],[role=menuitem],[role=tab],[role=option],[role=checkbox],[role=switch]";
const cssEscape = (x) =>
  typeof CSS !== "undefined" && CSS.escape ? CSS.escape(x) : String(x).replace(/[^\w-]/g, "\\$&");
// React's `:r1:`, `ember123`, uuids: ids a framework made up, different on the next load.
const madeUp = (name) => /\d{3,}|^:|[0-9a-f]{8}-[0-9a-f]{4}/i.test(name);

function selectorStep(el) {
  const tag = el.tagName.toLowerCase();
  if (el.id && !madeUp(el.id)) return {text: `${tag}#${cssEscape(el.id)}`, anchored: true};
  let text = tag;
  const classes = el.classList ? [...el.classList].filter((c) => !madeUp(c)).slice(0, 3) : [];
  for (const c of classes) text += "." + cssEscape(c);
  const parent = el.parentElement;
  if (parent) {
    let n = 0;
    let k = 0;
    for (const sib of parent.children) {
      if (sib.tagName === el.tagName) {
        n++;
        if (sib === el) k = n;
      }
    }
    if (n > 1) text += `:nth-of-type(${k})`;
  }
  return {text, anchored: tag === "body" || tag === "html"};
}

function describeTarget(node, interactive = true) {
  let el = node && node.nodeType === 1 ? node : node && node.parentElement;
  if (!el || !el.tagName) return null;
  if (interactive && typeof el.closest === "function") el = el.closest(INTERACTIVE) || el;
  const steps = [];
  for (let cur = el; cur && cur.tagName && steps.length < 5; cur = cur.parentElement) {
    const step = selectorStep(cur);
    steps.unshift(step.text);
    if (step.anchored) break;
  }
  let out = steps.join(" > ");
  while (out.length > TIMELINE_LIMITS.text && steps.length > 1) {
    steps.shift(); // the target's own steps say the most: drop from the top
    out = steps.join(" > ");
  }
  return short(out);
}

// An LCP image's URL as the fleet keeps it: without its query (it may hold a token), and a
// data: URL as its type only.
function lcpUrl(url) {
  if (!url) return null;
  const s = String(url);
  if (s.startsWith("data:")) return s.slice(0, Math.max(5, s.search(/[,;]/))).slice(0, 64);
  return stripQuery(s);
}

const ms = (x) => (typeof x === "number" && isFinite(x) && x >= 0 ? x : null);

/**
 * What the page made users wait for, on the trace's clock (performance.now()): long
 * animation frames with their scripts, interactions (Event Timing, grouped by
 * interactionId) and the page load (navigation timing, LCP). `take()` gives what was
 * observed since the last call, capped by TIMELINE_LIMITS.
 */
class Timeline {
  constructor() {
    this.frames = [];
    this.interactions = new Map();
    this.lcp = null;
    this.dropped = {longFrames: 0, interactions: 0};
    this.observers = [];
  }

  start() {
    this.observe("long-animation-frame", {buffered: true}, (e) => this.frames.push(e));
    this.observe("event", {buffered: true, durationThreshold: 16}, (e) => this.event(e));
    // The element is described as the entry is observed: a page that re-renders (a
    // framework hydrating, a carousel) may have removed it before the chunk is sent, and a
    // removed element's entry gives null (why every upload had lcpElement null).
    this.observe("largest-contentful-paint", {buffered: true}, (e) => {
      this.lcp = {startTime: e.startTime, element: describeTarget(e.element, false), url: lcpUrl(e.url)};
    });
  }

  observe(type, opts, each) {
    const types = (globalThis.PerformanceObserver && PerformanceObserver.supportedEntryTypes) || [];
    if (!types.includes(type)) return;
    try {
      const o = new PerformanceObserver((list) => list.getEntries().forEach(each));
      o.observe(Object.assign({type}, opts));
      this.observers.push([o, each]);
    } catch (e) {
      // an observer the browser refuses: that part of the timeline stays empty
    }
  }

  stop() {
    for (const [o] of this.observers) o.disconnect();
  }

  event(e) {
    if (!e.interactionId) return; // not part of an interaction (e.g. mouseover)
    const old = this.interactions.get(e.interactionId);
    // One interaction, several events (pointerdown, pointerup, click): its duration is the
    // longest one's, as web-vitals counts INP; its processing runs from the first event's
    // handlers to the last one's; it is named by its click or key event.
    const named = e.name === "click" || e.name === "keydown";
    if (!old) {
      this.interactions.set(e.interactionId, {
        id: e.interactionId,
        type: short(e.name),
        start: e.startTime,
        duration: e.duration,
        processingStart: e.processingStart,
        processingEnd: e.processingEnd,
        target: describeTarget(e.target),
      });
      return;
    }
    old.duration = Math.max(old.duration, e.duration);
    old.start = Math.min(old.start, e.startTime);
    old.processingStart = Math.min(old.processingStart, e.processingStart);
    old.processingEnd = Math.max(old.processingEnd, e.processingEnd);
    if (named) old.type = short(e.name);
    if (!old.target) old.target = describeTarget(e.target);
  }

  frame(f) {
    const scripts = (f.scripts || [])
      .slice()
      .sort((a, b) => b.duration - a.duration)
      .slice(0, TIMELINE_LIMITS.scripts)
      .map((s) => ({
        invoker: short(s.invoker),
        invokerType: short(s.invokerType),
        sourceURL: stripQuery(s.sourceURL),
        sourceFunctionName: short(s.sourceFunctionName),
        sourceCharPosition: typeof s.sourceCharPosition === "number" ? s.sourceCharPosition : null,
        start: s.startTime,
        duration: s.duration,
        forcedStyleAndLayoutDuration: ms(s.forcedStyleAndLayoutDuration),
      }));
    return {
      start: f.startTime,
      duration: f.duration,
      blockingDuration: ms(f.blockingDuration),
      renderStart: ms(f.renderStart),
      styleAndLayoutStart: ms(f.styleAndLayoutStart),
      scripts,
    };
  }

  take() {
    for (const [o, each] of this.observers) o.takeRecords().forEach(each);
    const longest = (a, b) => b.duration - a.duration;
    const frames = this.frames.sort(longest);
    const inter = [...this.interactions.values()].sort(longest);
    this.dropped.longFrames += Math.max(0, frames.length - TIMELINE_LIMITS.longFrames);
    this.dropped.interactions += Math.max(0, inter.length - TIMELINE_LIMITS.interactions);
    this.frames = [];
    this.interactions = new Map();
    const out = {
      longFrames: frames.slice(0, TIMELINE_LIMITS.longFrames).map((f) => this.frame(f)),
      interactions: inter.slice(0, TIMELINE_LIMITS.interactions),
      load: null,
      dropped: Object.assign({}, this.dropped),
    };
    const nav = performance.getEntriesByType && performance.getEntriesByType("navigation")[0];
    if (nav || this.lcp) {
      out.load = {
        responseStart: nav ? ms(nav.responseStart) : null,
        domContentLoaded: nav && nav.domContentLoadedEventEnd > 0 ? nav.domContentLoadedEventEnd : null,
        load: nav && nav.loadEventEnd > 0 ? nav.loadEventEnd : null,
        lcp: this.lcp ? ms(this.lcp.startTime) : null,
        lcpElement: this.lcp ? this.lcp.element : null,
        lcpUrl: this.lcp ? this.lcp.url : null,
      };
    }
    return out;
  }
}

// ---- timeline: end

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
    // One id per page load: the chunks of this page count once in the fleet.
    this.pageLoad = randomId();
    this.timeline = opts.timeline === false ? null : new Timeline();
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
    if (this.timeline) this.timeline.start();
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
      pageLoad: this.pageLoad,
    });
    // The trace goes as the browser gave it: its stacks stay a tree, never one per sample.
    const doc = {trace, meta};
    if (this.timeline) doc.timeline = this.timeline.take();
    const json = JSON.stringify(doc);
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
 * "no-profiler-api", "document-policy", "profiler-error"), `sampledBy` (whose decision:
 * "cookie", the server's, or "rate", sampleRate's), `stats`, `flush()` (send the current
 * chunk now and keep going; resolves to the upload ids sent) and `stop()`.
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
      timeline: true, // long animation frames, interactions, page load (false: none)
      // The cookie holding the server's decision (null: never read one). When the page has
      // it, it decides and sampleRate is not applied: the server sent the header by it.
      sampleCookie: SAMPLE_COOKIE,
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
      if (s.timeline) s.timeline.stop(); // after the last chunk took what it observed
      return s.stats.ids.slice();
    },
  };
  const session = sessionId(opts.sessionId);
  handle.session = session;
  // Whose decision: the server's (its cookie) when there is one, else ours by sampleRate.
  // Not in the sample: no Profiler is made, nor tried (the header was not sent for it).
  const server = opts.sampleCookie ? serverDecision(opts.sampleCookie) : null;
  handle.sampledBy = server === null ? "rate" : "cookie";
  if (server === null ? !inSample(session, opts.app, opts.sampleRate) : !server) {
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
