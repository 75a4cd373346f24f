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
// hash of a session id kept in sessionStorage against sampleRate. Traces are posted in
// chunks (chunkMs), each profiled in pieces (a new Profiler every 1, 2, 4, then pieceMs
// seconds, joined in the page: the stacks stay a tree, never one per sample) and kept ready
// to send (gzip'd, and in localStorage) after each piece. Profiler.stop() resolves in a
// task, and a page being unloaded runs none: so when the page goes away (beforeunload,
// pagehide, hidden) the chunk as last prepared goes at once by keepalive fetch (else sendBeacon),
// then, built in the same task, what the page holds beyond it (the timeline observed
// since, the pieces stop() already gave), and the running piece follows if stop() still
// resolves. Every upload waits in the
// outbox (localStorage) until the collector acknowledges it; a failed one is retried with
// backoff, and the next page load sends what an earlier one left (same id: stored once).

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

// An interaction's name: its click, else its keydown, else the event seen (a press whose
// click never came: dragged off, or the page went away). By rank, not by arrival: a chunk
// may take its pointerdown before the click's entry is reported (seen in Chromium 156
// under load), and the click's part then came second.
const INTERACTION_RANK = {click: 2, keydown: 1};
// Events of one interaction whose frames rendered this close are one frame's (web-vitals:
// Event Timing rounds durations to 8 ms). timeline.py SAME_FRAME_MS is the same.
const SAME_FRAME_MS = 8;

/**
 * Fold event `e` of an interaction (the client's shape) into `old`, the same interaction
 * (same `id`): how the events of one user action (pointerdown, pointerup, click; keydown,
 * keyup) are one interaction, as Event Timing's interactionId groups them and web-vitals
 * counts INP: its timings are the longest event's, widened to the other's start and
 * handlers only when the two ended in one frame (render times within SAME_FRAME_MS: a key
 * held 300 ms is a keydown and a keyup frames apart, and spanning both made processing
 * longer than the interaction), it is named by rank (INTERACTION_RANK). The collector
 * folds the chunks of a page load by the same rule (timeline.py `merge_interaction`).
 */
export function mergeInteraction(old, e) {
  const longer = e.duration > old.duration ? e : old;
  const other = longer === e ? old : e;
  const sameFrame = Math.abs(longer.start + longer.duration - (other.start + other.duration)) <= SAME_FRAME_MS;
  const start = sameFrame ? Math.min(old.start, e.start) : longer.start;
  const processingStart = sameFrame ? Math.min(old.processingStart, e.processingStart) : longer.processingStart;
  const processingEnd = sameFrame ? Math.max(old.processingEnd, e.processingEnd) : longer.processingEnd;
  old.duration = longer.duration;
  old.start = start;
  old.processingStart = processingStart;
  old.processingEnd = processingEnd;
  if ((INTERACTION_RANK[e.type] || 0) > (INTERACTION_RANK[old.type] || 0)) old.type = e.type;
  if (!old.target) old.target = e.target;
  return old;
}

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
    // CLS as web-vitals counts it: layout shifts without recent input, summed in session
    // windows (under 1 s apart, at most 5 s long); the page's CLS is its largest window.
    this.cls = null; // null: the browser reports no layout shifts
    this.clsWindow = {sum: 0, first: 0, last: -Infinity};
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
    if (this.observe("layout-shift", {buffered: true}, (e) => this.shift(e))) this.cls = 0;
  }

  shift(e) {
    if (e.hadRecentInput) return;
    const w = this.clsWindow;
    if (e.startTime - w.last < 1000 && e.startTime - w.first < 5000) {
      w.sum += e.value;
    } else {
      w.sum = e.value;
      w.first = e.startTime;
    }
    w.last = e.startTime;
    this.cls = Math.max(this.cls || 0, w.sum);
  }

  observe(type, opts, each) {
    const types = (globalThis.PerformanceObserver && PerformanceObserver.supportedEntryTypes) || [];
    if (!types.includes(type)) return false;
    try {
      const o = new PerformanceObserver((list) => list.getEntries().forEach(each));
      o.observe(Object.assign({type}, opts));
      this.observers.push([o, each]);
      return true;
    } catch (e) {
      return false; // an observer the browser refuses: that part of the timeline stays empty
    }
  }

  stop() {
    for (const [o] of this.observers) o.disconnect();
  }

  event(e) {
    if (!e.interactionId) return; // not part of an interaction (e.g. mouseover)
    const one = {
      id: e.interactionId,
      type: short(e.name),
      start: e.startTime,
      duration: e.duration,
      processingStart: e.processingStart,
      processingEnd: e.processingEnd,
      target: describeTarget(e.target),
    };
    const old = this.interactions.get(e.interactionId);
    if (old) mergeInteraction(old, one);
    else this.interactions.set(e.interactionId, one);
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
        cls: this.cls,
      };
    }
    return out;
  }
}

// ---- timeline: end

// gzip in the page, fed to CompressionStream directly. Not through a Blob's stream():
// reading a Blob takes tasks that no longer run once the page is being unloaded (measured in
// headless Chromium 156: a Blob-fed gzip started in pagehide never finished; this one did).
async function gzip(text) {
  if (typeof CompressionStream !== "function") return null;
  const cs = new CompressionStream("gzip");
  const w = cs.writable.getWriter();
  w.write(new TextEncoder().encode(text)).catch(() => {});
  w.close().catch(() => {});
  const r = cs.readable.getReader();
  const parts = [];
  let n = 0;
  for (;;) {
    const {done, value} = await r.read();
    if (done) break;
    parts.push(value);
    n += value.byteLength;
  }
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

function toBase64(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

function fromBase64(text) {
  const s = atob(text);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/**
 * `trace` without the samples Profilers took as they started: the samples timed within
 * any of `spans`, each `[before, after]` the span of a constructor (see `newProfiler`).
 */
export function withoutStartSample(trace, ...spans) {
  const at = (t) => spans.some(([before, after]) => t >= before && t <= after);
  const samples = trace.samples.filter((x) => !at(x.timestamp));
  return samples.length === trace.samples.length ? trace : Object.assign({}, trace, {samples});
}

/**
 * One ProfilerTrace from several taken one after the other (a chunk's pieces): resources,
 * frames and stacks interned again, samples in order. A piece's samples at or before the
 * last one of the pieces before it (or `after`) are left out: consecutive pieces overlap by
 * the instant between starting the next Profiler and stopping this one.
 */
export function mergeTraces(traces, after = -Infinity) {
  const out = {resources: [], frames: [], stacks: [], samples: []};
  const rIndex = new Map();
  const fIndex = new Map();
  const sIndex = new Map();
  let last = after;
  for (const t of traces) {
    const rmap = t.resources.map((r) => {
      let i = rIndex.get(r);
      if (i === undefined) {
        i = out.resources.length;
        rIndex.set(r, i);
        out.resources.push(r);
      }
      return i;
    });
    const fmap = t.frames.map((f) => {
      const g = Object.assign({}, f);
      if (f.resourceId != null) g.resourceId = rmap[f.resourceId];
      const key = `${g.name}\u0000${g.resourceId}\u0000${g.line}\u0000${g.column}`;
      let i = fIndex.get(key);
      if (i === undefined) {
        i = out.frames.length;
        fIndex.set(key, i);
        out.frames.push(g);
      }
      return i;
    });
    const smap = new Array(t.stacks.length);
    const stackOf = (id) => {
      const path = [];
      let j = id;
      while (j != null && smap[j] === undefined && path.length <= t.stacks.length) {
        path.push(j);
        j = t.stacks[j].parentId;
      }
      let parent = j == null ? undefined : smap[j];
      for (let k = path.length - 1; k >= 0; k--) {
        const fid = fmap[t.stacks[path[k]].frameId];
        const key = parent === undefined ? `${fid}` : `${fid}:${parent}`;
        let i = sIndex.get(key);
        if (i === undefined) {
          i = out.stacks.length;
          sIndex.set(key, i);
          out.stacks.push(parent === undefined ? {frameId: fid} : {frameId: fid, parentId: parent});
        }
        smap[path[k]] = parent = i;
      }
      return smap[id];
    };
    // Within a piece every sample stays (Chromium gives two samples one timestamp at times).
    const floor = last;
    for (const s of t.samples) {
      if (!(s.timestamp > floor)) continue;
      if (s.timestamp > last) last = s.timestamp;
      const o = Object.assign({}, s);
      if (s.stackId != null) o.stackId = stackOf(s.stackId);
      out.samples.push(o);
    }
  }
  return out;
}

// The timelines taken at several moments of one chunk, as one (the same limits, longest
// kept; an interaction reported in two of them counts once).
export function mergeTimelines(parts) {
  const got = parts.filter(Boolean);
  if (got.length === 0) return null;
  if (got.length === 1) return got[0];
  const longest = (a, b) => b.duration - a.duration;
  const frames = got.flatMap((p) => p.longFrames).sort(longest);
  const byId = new Map();
  for (const p of got) {
    for (const e of p.interactions) {
      const old = byId.get(e.id);
      if (!old) {
        byId.set(e.id, Object.assign({}, e));
        continue;
      }
      mergeInteraction(old, e);
    }
  }
  const inter = [...byId.values()].sort(longest);
  const dropped = Object.assign({}, got[got.length - 1].dropped);
  dropped.longFrames += Math.max(0, frames.length - TIMELINE_LIMITS.longFrames);
  dropped.interactions += Math.max(0, inter.length - TIMELINE_LIMITS.interactions);
  let load = null;
  for (const p of got) if (p.load) load = p.load;
  return {
    longFrames: frames.slice(0, TIMELINE_LIMITS.longFrames),
    interactions: inter.slice(0, TIMELINE_LIMITS.interactions),
    load,
    dropped,
  };
}

const OUTBOX_PREFIX = "jsprof-outbox:";
const DAY_MS = 24 * 3600 * 1000;

/**
 * Uploads not yet acknowledged, kept in the page origin's localStorage (synchronous, so a
 * page that is going away can still write; IndexedDB commits too late for that), one key
 * per upload so that tabs of one site never overwrite each other's. Each holds the upload's
 * URL and its body as sent (base64 of the gzip), so a retry sends the same bytes under the
 * same id and the collector stores it once. Bounded: `limit` characters in all, entries
 * older than `maxAgeMs` dropped; storage that is blocked or full keeps nothing (counted).
 */
class Outbox {
  constructor(limit, maxAgeMs, stats) {
    this.limit = limit;
    this.maxAgeMs = maxAgeMs;
    this.stats = stats;
  }

  store() {
    try {
      return this.limit > 0 ? globalThis.localStorage || null : null;
    } catch (e) {
      return null; // storage blocked (a sandboxed frame, a privacy setting)
    }
  }

  put(up, fields) {
    const ls = this.store();
    if (!ls) return false;
    const rec = {
      u: up.url,
      b: up.gz ? toBase64(up.body) : up.body,
      g: up.gz ? 1 : 0,
      a: Date.now(),
      t: 0,
      n: 0,
      f: 1,
      o: null,
    };
    Object.assign(rec, fields || {});
    const text = JSON.stringify(rec);
    if (text.length > this.limit) return false;
    this.trim(text.length, up.id);
    try {
      ls.setItem(OUTBOX_PREFIX + up.id, text);
      return true;
    } catch (e) {
      this.stats.unstored++; // quota: this one is only sent, not kept
      return false;
    }
  }

  update(id, fields) {
    const ls = this.store();
    if (!ls) return;
    try {
      const text = ls.getItem(OUTBOX_PREFIX + id);
      if (!text) return;
      ls.setItem(OUTBOX_PREFIX + id, JSON.stringify(Object.assign(JSON.parse(text), fields)));
    } catch (e) {
      // gone, or unreadable: nothing to update
    }
  }

  remove(id) {
    const ls = this.store();
    if (!ls) return;
    try {
      ls.removeItem(OUTBOX_PREFIX + id);
    } catch (e) {
      // storage went away: the collector drops a repeat anyway
    }
  }

  entries() {
    const ls = this.store();
    if (!ls) return [];
    const out = [];
    try {
      for (let i = 0; i < ls.length; i++) {
        const key = ls.key(i);
        if (!key || !key.startsWith(OUTBOX_PREFIX)) continue;
        const text = ls.getItem(key);
        let rec = null;
        try {
          rec = JSON.parse(text);
        } catch (e) {
          rec = null;
        }
        out.push({id: key.slice(OUTBOX_PREFIX.length), rec, size: key.length + (text || "").length});
      }
    } catch (e) {
      return out;
    }
    return out;
  }

  // Room for `need` more characters: expired and unreadable entries go, then the oldest.
  trim(need, except) {
    const now = Date.now();
    let all = this.entries().filter((e) => e.id !== except);
    for (const e of all) {
      if (!e.rec || now - e.rec.a > this.maxAgeMs) {
        this.remove(e.id);
        this.stats.dropped++;
      }
    }
    all = all.filter((e) => e.rec && now - e.rec.a <= this.maxAgeMs).sort((x, y) => x.rec.a - y.rec.a);
    let used = all.reduce((n, e) => n + e.size, 0);
    while (all.length && used + need > this.limit) {
      const e = all.shift();
      used -= e.size;
      this.remove(e.id);
      this.stats.dropped++;
    }
  }
}

// Statuses after which the same upload can succeed later: sent again. Any other refusal
// (400 invalid, 401 key, 409, 413, 415) would be refused again: dropped and counted.
const RETRYABLE = new Set([0, 408, 425, 429, 500, 502, 503, 504]);

class Session {
  constructor(opts) {
    this.opts = opts;
    this.enabled = false;
    this.reason = null;
    this.stats = {
      chunks: 0, // uploads built
      sent: 0, // handed to the network (keepalive, beacon) or acknowledged (fetch)
      beacons: 0,
      failed: 0, // sends that failed (each retried, unless refused)
      refused: 0, // refused by the collector for good (4xx): dropped
      retried: 0, // uploads sent again from the outbox (this page's or an earlier one's)
      deferred: 0, // over the keepalive budget while the page went away: left in the outbox
      dropped: 0, // lost: no storage for it, expired or pushed out of the outbox
      unstored: 0, // could not be kept in the outbox (storage blocked or full)
      prepareMs: 0, // main-thread ms spent keeping chunks ready (joining, JSON, localStorage)
      profilers: 0, // Profilers started (one per piece)
      bufferFull: 0, // Profilers whose buffer filled (a task longer than a chunk): unsampled to its end
      bytes: 0,
      ids: [],
    };
    this.outbox = new Outbox(opts.outboxLimit, opts.outboxMaxAgeMs, this.stats);
    this.profiler = null;
    this.chunk = null;
    this.pieceTimer = null;
    this.pieceNo = 0;
    this.starts = new WeakMap(); // Profiler -> [before, after] its constructor ran
    this.pieceIds = new WeakMap(); // Profiler -> its piece's number in this page load (from 1)
    this.chunkNo = 0;
    this.lastSample = Promise.resolve(-Infinity); // the last sample of the pieces so far
    this.stopped = false;
    this.pending = new Set();
    this.keepaliveBytes = 0; // our keepalive bodies still in flight (the budget is shared)
    this.sending = new Set(); // ids of this page's requests in flight
    this.drainTimer = null;
    this.drainAt = 0;
    this.draining = false;
    this.loadSent = null; // the page load's timings as last put in an upload (JSON)
    // One id per page load: the chunks of this page count once in the fleet.
    this.pageLoad = randomId();
    this.timeline = opts.timeline === false ? null : new Timeline();
    this.onVisibility = () => this.visibilityChanged();
    // Navigation: beforeunload comes while the page still runs tasks (until the next page's
    // response arrives), pagehide when it no longer does (its Profiler.stop() never
    // resolves: measured); closing a tab may give only pagehide.
    this.onBeforeUnload = () => this.leave("beforeunload", true);
    this.onPageHide = () => this.leave("pagehide", false);
    this.onPageShow = (e) => {
      if (e.persisted && !this.stopped && !this.profiler) this.begin(); // back from the bfcache
    };
  }

  // ---- profiling in pieces ----

  // Pieces of 0.25, 0.5, 1, 2, 4 s, then pieceMs: a short visit has most of itself ready to
  // send before it ends, a long one restarts its Profiler every pieceMs only.
  pieceLength() {
    const {pieceMs, chunkMs} = this.opts;
    const left = this.chunk ? chunkMs - (performance.now() - this.chunk.started) : chunkMs;
    return Math.max(50, Math.min(pieceMs, this.opts.firstPieceMs * 2 ** this.pieceNo, left));
  }

  newProfiler() {
    const {sampleInterval, chunkMs} = this.opts;
    // Room for a whole chunk's samples, whatever the piece's length. A piece ends in a task
    // (its timer), so it runs on for as long as the page's longest task; a Profiler whose
    // buffer fills stops sampling, and the next one can start only once that task is over.
    // Sized for the piece (1.5x its length), a task that outlasted the first short pieces
    // (a bundle evaluated at load) went unsampled from there to its end: 1.2 s of a 1.5 s
    // task in headless Chromium (tests/test_client_buffer.py; the other time a trace loses,
    // to a loaded machine: docs/field.md, "Lost time"). A chunk's worth is 6,000 samples at
    // 10 ms: V8 only bounds the samples it keeps with it (they are added one by one), so
    // the room costs nothing until it is used.
    const maxBufferSize = Math.ceil(chunkMs / sampleInterval);
    const before = performance.now();
    const p = new Profiler({sampleInterval, maxBufferSize});
    // A Profiler takes one sample as it starts, inside its constructor (its timestamp is
    // between these two: measured in Chromium), and its clock's ticks from there. That
    // sample is no tick: kept, it weighs the gap to the next tick (a whole interval, the
    // page mostly idle by then) and charges it to this function, once per piece (~60 ms
    // per page load of `newProfiler` where the constructor takes ~0.3 ms). It is left out
    // when the piece joins its chunk: the tick before it weighs that gap, as any other.
    this.starts.set(p, [before, performance.now()]);
    this.stats.profilers++;
    this.pieceIds.set(p, this.stats.profilers);
    // Only a task longer than a chunk fills it: counted, and the piece ends at once.
    p.addEventListener("samplebufferfull", () => {
      this.stats.bufferFull++;
      if (p === this.profiler) this.nextPiece("bufferfull");
    });
    return p;
  }

  newChunk() {
    return {
      id: randomId(),
      n: ++this.chunkNo,
      started: performance.now(),
      pieces: [], // its ended pieces, in order: {trace, after, n}
      ready: Promise.resolve(), // resolves once every ended piece is in `pieces`
      parts: [], // timelines taken so far
      prepared: null, // its pieces so far, ready to send as they are: {up, pieces, parts, last}
      preparing: false,
      tried: 0, // how many pieces the last prepare() took
      done: false,
    };
  }

  // A new chunk and its first Profiler; false when no Profiler could be made.
  begin() {
    const chunk = this.newChunk();
    let p;
    try {
      p = this.newProfiler();
    } catch (e) {
      this.reason = e && e.name === "NotAllowedError" ? "document-policy" : "profiler-error";
      this.error = String(e && e.message);
      return false;
    }
    this.chunk = chunk;
    this.profiler = p;
    this.armPiece();
    return true;
  }

  armPiece() {
    clearTimeout(this.pieceTimer);
    this.pieceTimer = setTimeout(() => this.nextPiece("interval"), this.pieceLength());
  }

  start() {
    if (!this.begin()) return;
    this.enabled = true;
    if (this.timeline) this.timeline.start();
    document.addEventListener("visibilitychange", this.onVisibility);
    globalThis.addEventListener("beforeunload", this.onBeforeUnload);
    globalThis.addEventListener("pagehide", this.onPageHide);
    globalThis.addEventListener("pageshow", this.onPageShow);
  }

  removeListeners() {
    document.removeEventListener("visibilitychange", this.onVisibility);
    globalThis.removeEventListener("beforeunload", this.onBeforeUnload);
    globalThis.removeEventListener("pagehide", this.onPageHide);
    globalThis.removeEventListener("pageshow", this.onPageShow);
  }

  // The piece's trace joins its chunk once Profiler.stop() gives it (in a task: not in time
  // when the page is being unloaded). Profilers overlap for an instant (the next one starts
  // before this one stops), so a sample at or before the previous piece's last one (of any
  // chunk of this page) is a repeat and is left out when the piece is sent.
  // Chromium's Profilers share V8's ticks: the next Profiler's start sample goes to this one
  // too when its stop comes late (a loaded machine), stamped after the ticks still queued
  // (measured: 0.1-19 ms back; past 10 ms the collector refused the whole chunk, a page
  // load lost). So it goes from this piece as from its own. Every caller starts the next
  // Profiler (this.profiler) before it hands the last one here.
  addPiece(chunk, profiler) {
    this.pieceNo++;
    const stopped = profiler.stop();
    const prev = this.lastSample;
    const spans = [profiler, this.profiler]
      .filter((p, k) => p && (k === 0 || p !== profiler))
      .map((p) => this.starts.get(p))
      .filter(Boolean);
    const n = this.pieceIds.get(profiler);
    const piece = Promise.all([prev, stopped]).then(([after, trace]) => ({
      trace: trace && spans.length ? withoutStartSample(trace, ...spans) : trace,
      after,
      n,
    }));
    this.lastSample = piece.then(
      ({trace, after}) =>
        trace && trace.samples.length
          ? Math.max(after, trace.samples[trace.samples.length - 1].timestamp)
          : after,
      () => prev,
    );
    chunk.ready = Promise.all([chunk.ready, piece]).then(
      ([, p]) => {
        if (p.trace) chunk.pieces.push(p);
      },
      () => {
        this.stats.failed++;
      },
    );
  }

  // End the running piece and start the next; the chunk ends here once it is chunkMs old.
  nextPiece(why) {
    const old = this.profiler;
    const chunk = this.chunk;
    if (!old || !chunk) return;
    const ending = performance.now() - chunk.started >= this.opts.chunkMs - 1;
    this.profiler = null;
    clearTimeout(this.pieceTimer);
    if (ending) {
      this.chunk = null;
      if (!this.stopped && document.visibilityState !== "hidden") this.begin();
    } else {
      try {
        this.profiler = this.newProfiler();
        this.armPiece();
      } catch (e) {
        this.reason = "profiler-error";
      }
    }
    this.addPiece(chunk, old);
    if (ending) {
      this.finish(chunk, why, false);
    } else {
      chunk.ready.then(() => this.prepare(chunk));
    }
  }

  // ---- building uploads ----

  url(id) {
    const o = this.opts;
    const q = new URLSearchParams({app: o.app, key: o.key, id});
    if (o.release != null) q.set("release", String(o.release));
    if (o.route != null) q.set("route", String(o.route));
    if (o.env != null) q.set("env", String(o.env));
    return `${this.endpoint()}/v1/traces?${q}`;
  }

  endpoint() {
    return this.opts.endpoint.replace(/\/+$/, "");
  }

  // The upload document of `pieces` (their samples after `after`) and `timelines`, made in
  // this task (no await: a page in pagehide may get no other): {json, bytes, last,
  // samples, timeline}; `last` is `after` when no sample is new. `unsampled`: the running
  // piece's count (`unsampledPiece`), put in the timeline.
  compose(chunk, pieces, after, why, timelines, unsampled = null) {
    const traces = pieces.map((p) =>
      p.after > -Infinity
        ? Object.assign({}, p.trace, {samples: p.trace.samples.filter((x) => x.timestamp > p.after)})
        : p.trace,
    );
    const trace = mergeTraces(traces, after);
    const meta = Object.assign({}, this.opts.meta, {
      timeOrigin: performance.timeOrigin,
      userAgent: navigator.userAgent,
      sampleInterval: this.opts.sampleInterval,
      chunk: chunk.n,
      chunkReason: why,
      dropped: this.stats.dropped,
      pageLoad: this.pageLoad,
    });
    // The trace as the browser gave it (pieces joined): its stacks stay a tree.
    const doc = {trace, meta};
    if (this.timeline) doc.timeline = mergeTimelines(timelines);
    if (doc.timeline && unsampled) doc.timeline = Object.assign({}, doc.timeline, {unsampled});
    const json = JSON.stringify(doc);
    const n = trace.samples.length;
    return {
      json,
      bytes: new TextEncoder().encode(json).byteLength,
      last: n ? trace.samples[n - 1].timestamp : after,
      samples: n,
      timeline: doc.timeline || null,
    };
  }

  // An upload as it is sent: {id, url, body, gz, size, last}.
  upload(id, c, gz) {
    if (c.timeline && c.timeline.load) this.loadSent = JSON.stringify(c.timeline.load);
    return {id, url: this.url(id), body: gz || c.json, gz: !!gz, size: gz ? gz.byteLength : c.bytes,
            last: c.last};
  }

  // The upload of `traces` (JSON, gzip'd when the browser can), or null when they hold no
  // sample. The body is text/plain (gzip bytes or JSON): no header that needs a CORS
  // preflight, so a keepalive request is one request.
  async build(chunk, id, pieces, after, why, timelines, plainUnder = 0, unsampled = null) {
    const c = this.compose(chunk, pieces, after, why, timelines, unsampled);
    if (c.samples === 0) return null;
    // A page that is going away sends what fits its keepalive budget as it is: gzip takes
    // more turns of the event loop than such a page may have left.
    let gz = null;
    if (c.bytes > plainUnder) {
      try {
        gz = await gzip(c.json);
      } catch (e) {
        gz = null;
      }
    }
    return this.upload(id, c, gz);
  }

  // Keep the chunk so far ready to send (and in the outbox, unfinished) after each piece:
  // when the page goes away without time for another Profiler.stop(), this is what goes.
  async prepare(chunk) {
    if (chunk.done || chunk.preparing || chunk.pieces.length <= chunk.tried) return;
    chunk.preparing = true;
    chunk.tried = chunk.pieces.length;
    try {
      if (this.timeline) chunk.parts.push(this.timeline.take());
      const pieces = chunk.pieces.length;
      const parts = chunk.parts.length;
      const t0 = performance.now();
      const built = this.build(chunk, chunk.id, chunk.pieces.slice(), -Infinity, "unload",
                               chunk.parts.slice());
      this.stats.prepareMs += performance.now() - t0; // joining and JSON, before gzip
      const up = await built;
      if (chunk.done || !up) return;
      chunk.prepared = {up, pieces, parts, last: up.last};
      const t1 = performance.now();
      this.outbox.put(up, {f: 0, o: this.pageLoad});
      this.stats.prepareMs += performance.now() - t1;
    } finally {
      chunk.preparing = false;
    }
    if (!chunk.done && chunk.pieces.length > chunk.tried) this.prepare(chunk);
  }

  // End `chunk` with the piece running now (already handed to addPiece) and send it.
  finish(chunk, why, keepalive) {
    chunk.done = true;
    const done = chunk.ready
      .then(() => {
        if (this.timeline) chunk.parts.push(this.timeline.take());
        return this.build(chunk, chunk.id, chunk.pieces, -Infinity, why, chunk.parts);
      })
      .then((up) => {
        if (!up) {
          this.outbox.remove(chunk.id);
          return null;
        }
        this.stats.chunks++;
        this.outbox.put(up);
        return this.deliver(up, keepalive);
      })
      .catch(() => {
        this.stats.failed++;
        return null;
      });
    return this.track(done);
  }

  track(promise) {
    this.pending.add(promise);
    promise.finally(() => this.pending.delete(promise));
    return promise;
  }

  // The page is going away: send at once what is ready (the chunk as last prepared), then
  // what else the page holds now (`sendNow`), then the rest (the running piece) as its own
  // upload if Profiler.stop() still gets to give it. `restart`: profile on (beforeunload
  // may be followed by no unload: a download, a cancelled navigation).
  // The running piece's samples come only if stop() resolves (at pagehide it never does in
  // Chromium), so what goes now counts it as unsampled (`timeline.unsampled`), and the
  // rest, when it comes, says it arrived (ms 0): the collector keeps the smaller per piece.
  leave(why, restart) {
    if (this.stopped) return;
    const chunk = this.chunk;
    const tail = this.profiler;
    const start = tail && this.starts.get(tail);
    const running = start
      ? {piece: this.pieceIds.get(tail), start: start[1], end: performance.now()}
      : null;
    this.chunk = null;
    this.profiler = null;
    clearTimeout(this.pieceTimer);
    if (restart && document.visibilityState !== "hidden") this.begin();
    if (!chunk) return;
    chunk.done = true;
    // Stopped first, so that what follows (the client's own sending) is not in its samples.
    if (tail) this.addPiece(chunk, tail);
    const prep = chunk.prepared;
    if (prep) {
      this.stats.chunks++;
      this.outbox.update(prep.up.id, {f: 1, a: Date.now()});
      this.track(Promise.resolve(this.deliver(prep.up, true)));
    }
    const sent = this.sendNow(chunk, why, prep, running);
    const rest = chunk.ready
      .then(() => {
        if (this.timeline) chunk.parts.push(this.timeline.take());
        const pieces = chunk.pieces.slice(sent.pieces);
        const parts = chunk.parts.slice(sent.parts);
        const id = sent.any ? randomId() : chunk.id;
        const room = this.opts.keepaliveLimit - this.keepaliveBytes;
        const got = running && pieces.some((p) => p.n === running.piece);
        const arrived = got
          ? {piece: running.piece, start: running.start, ms: 0, longFrames: 0, interactions: 0}
          : null;
        return this.build(chunk, id, pieces, sent.last, why, parts, room, arrived);
      })
      .then((up) => {
        if (!up) return null;
        this.stats.chunks++;
        this.outbox.put(up);
        return this.deliver(up, true);
      })
      .catch(() => {
        this.stats.failed++;
        return null;
      });
    this.track(rest);
  }

  // Send, in this task, what the page holds of `chunk` beyond `prep` (the chunk as last
  // prepared, or null): the pieces Profiler.stop() has given since, and the timeline
  // observed since (an interaction just before a navigation: its Event Timing entry is
  // here, and no later task may run). Plain JSON: gzip takes turns of the event loop.
  // Within the keepalive budget left; over it, the timeline goes on its own, fitted to
  // the budget by `fitTimeline` (what it leaves out counted in timeline.dropped), and the
  // samples as an upload of their own (a beacon, else the outbox: the next page load).
  // Returns where the rest of the chunk starts: {pieces, parts, last, any: sent before}.
  // `running`: the piece still running ({piece, start, end}), counted in the timeline sent.
  sendNow(chunk, why, prep, running = null) {
    if (this.timeline) chunk.parts.push(this.timeline.take());
    const unsampled = running && this.timeline ? this.unsampledPiece(chunk, running) : null;
    const after = prep ? prep.last : -Infinity;
    const pieces = chunk.pieces.slice(prep ? prep.pieces : 0);
    const parts = chunk.parts.slice(prep ? prep.parts : 0);
    // Until sent, the rest starts where `prep` ended: an error here leaves what it did not
    // send to the rest (before, the rest started past it, and an interaction was lost).
    const all = {pieces: chunk.pieces.length, parts: chunk.parts.length};
    const out = {pieces: prep ? prep.pieces : 0, parts: prep ? prep.parts : 0, last: after,
                 any: !!prep};
    const send = (c) => {
      const up = this.upload(randomId(), c, null);
      this.stats.chunks++;
      this.outbox.put(up);
      this.track(Promise.resolve(this.deliver(up, true)));
      out.any = true;
    };
    try {
      let c = this.compose(chunk, pieces, after, why, parts, unsampled);
      const room = () => this.opts.keepaliveLimit - this.keepaliveBytes;
      if (c.bytes > room() && this.timeline) {
        const t = this.fitTimeline(this.compose(chunk, [], after, why, parts, unsampled), room());
        if (this.news(t.timeline) || t.cut || unsampled) send(t);
        out.parts = all.parts; // the timeline is sent (or held nothing new)
        if (c.samples === 0) return Object.assign(out, all);
        c = this.compose(chunk, pieces, after, why, []);
      } else if (c.samples === 0 && !this.news(c.timeline) && !unsampled) {
        return Object.assign(out, all);
      }
      send(c);
      Object.assign(out, all);
      out.last = c.last;
    } catch (e) {
      this.stats.failed++; // the rest, if stop() resolves, holds what was not sent
    }
    return out;
  }

  // The running piece's count as the page leaves (`timeline.unsampled`: {piece, start, ms,
  // longFrames, interactions}): its wall clock from its Profiler's start to `end`, and how
  // many long frames and interactions of this chunk's timeline overlap it (their samples
  // are in it: a slow click just before a navigation is the case that matters).
  unsampledPiece(chunk, running) {
    const {piece, start, end} = running;
    const over = (x) => x.start < end && x.start + x.duration > start;
    let longFrames = 0;
    const ids = new Set();
    for (const part of chunk.parts) {
      if (!part) continue;
      longFrames += part.longFrames.filter(over).length;
      for (const e of part.interactions) if (over(e)) ids.add(e.id);
    }
    return {piece, start, ms: Math.max(0, end - start), longFrames, interactions: ids.size};
  }

  // Whether `timeline` holds anything not sent yet: long frames, interactions, or a page
  // load (LCP, CLS) other than the one last sent.
  news(timeline) {
    if (!timeline) return false;
    if (timeline.longFrames.length || timeline.interactions.length) return true;
    return timeline.load !== null && JSON.stringify(timeline.load) !== this.loadSent;
  }

  // `c` (a timeline-only upload) made to fit `room` bytes: its shortest long frames left
  // out first, then its shortest interactions (each list is longest first), counted in
  // its timeline.dropped and in every later upload's (the counts only grow); `cut` set.
  // When it would not fit even without any of them, it is left whole (then it goes by
  // beacon, else from the outbox with the next page load: late, not lost).
  fitTimeline(c, room) {
    const tl = c.timeline;
    if (!tl || c.bytes <= room) return c;
    const size = (x) => new TextEncoder().encode(JSON.stringify(x)).byteLength + 1;
    const frames = tl.longFrames.slice();
    const inter = tl.interactions.slice();
    let bytes = c.bytes + 32; // the dropped counts may grow by a few digits
    const all = [...frames, ...inter].reduce((n, x) => n + size(x), 0);
    if (bytes - all > room) return c;
    let lf = 0;
    let ia = 0;
    while (bytes > room && frames.length) {
      bytes -= size(frames.pop());
      lf++;
    }
    while (bytes > room && inter.length) {
      bytes -= size(inter.pop());
      ia++;
    }
    this.timeline.dropped.longFrames += lf;
    this.timeline.dropped.interactions += ia;
    const dropped = {longFrames: tl.dropped.longFrames + lf, interactions: tl.dropped.interactions + ia};
    const doc = JSON.parse(c.json);
    doc.timeline = Object.assign({}, tl, {longFrames: frames, interactions: inter, dropped});
    const json = JSON.stringify(doc);
    return Object.assign({}, c, {json, bytes: new TextEncoder().encode(json).byteLength,
                                 timeline: doc.timeline, cut: lf + ia > 0});
  }

  // Hidden: the chunk ends the way a page that goes away ends it (`leave`), what the page
  // holds sent in this task: a hidden page may be frozen or discarded next (a phone's
  // browser put in the background) without another task, or a pagehide.
  visibilityChanged() {
    if (this.stopped) return;
    if (document.visibilityState === "hidden") {
      this.leave("hidden", false);
    } else if (!this.profiler) {
      this.begin();
    }
  }

  // ---- sending ----

  post(up, keepalive) {
    return fetch(up.url, {
      method: "POST",
      body: up.body,
      headers: {"Content-Type": "text/plain"},
      keepalive,
      mode: "cors",
      credentials: "omit",
    });
  }

  // Send `up` (already in the outbox). keepalive: the page may be going away: a keepalive
  // fetch within the budget, else a beacon, else it waits in the outbox for the next page.
  // Its id once sent (acknowledged, for a plain fetch), else null.
  async deliver(up, keepalive) {
    if (keepalive) {
      if (this.keepaliveBytes + up.size <= this.opts.keepaliveLimit) {
        let req = null;
        try {
          req = this.post(up, true);
        } catch (e) {
          req = null;
        }
        if (req) {
          this.keepaliveBytes += up.size;
          this.sending.add(up.id);
          this.sent(up);
          // Seen only if the page lives on (a hidden tab): else the next page sends it again
          // from the outbox and the collector answers that repeat as the first.
          req
            .then((r) => this.answered(up, r.status), () => this.answered(up, 0))
            .finally(() => {
              this.keepaliveBytes -= up.size;
              this.sending.delete(up.id);
            });
          return up.id;
        }
      }
      // A beacon cannot set headers; the body is text/plain either way.
      if (navigator.sendBeacon && navigator.sendBeacon(up.url, new Blob([up.body], {type: "text/plain"}))) {
        this.stats.beacons++;
        this.sent(up); // its answer is never seen: it stays in the outbox, sent again later
        return up.id;
      }
      this.stats.deferred++;
      // Sent by the next page load; or by this page, should it live on (a hidden tab).
      this.scheduleDrain(this.opts.retryMs);
      return null;
    }
    let status = 0;
    this.sending.add(up.id);
    try {
      status = (await this.post(up, false)).status;
    } catch (e) {
      status = 0;
    } finally {
      this.sending.delete(up.id);
    }
    if (!this.answered(up, status)) return null;
    this.sent(up);
    return up.id;
  }

  // What the collector said to `up`: true when it has it (202: stored, or stored before).
  answered(up, status) {
    if (status === 202) {
      this.outbox.remove(up.id);
      return true;
    }
    this.stats.failed++;
    if (RETRYABLE.has(status)) {
      this.retryLater(up.id);
    } else {
      this.stats.refused++;
      this.outbox.remove(up.id);
    }
    return false;
  }

  sent(up) {
    this.stats.sent++;
    this.stats.bytes += up.size;
    this.stats.ids.push(up.id);
    if (this.stats.ids.length > 100) this.stats.ids.shift();
  }

  // ---- the outbox: uploads that failed, or whose answer was never seen ----

  retryLater(id) {
    const rec = this.outbox.entries().find((e) => e.id === id);
    if (!rec || !rec.rec) return;
    const tries = (rec.rec.t || 0) + 1;
    if (tries > this.opts.maxRetries) {
      this.outbox.remove(id);
      this.stats.dropped++;
      return;
    }
    // Exponential backoff with jitter, so a collector that comes back is not hit by every
    // client at once.
    const wait = Math.min(this.opts.retryMaxMs, this.opts.retryMs * 2 ** (tries - 1));
    const next = Date.now() + wait * (0.5 + Math.random() / 2);
    this.outbox.update(id, {t: tries, n: next});
    this.scheduleDrain(next - Date.now());
  }

  // Drain in `ms` (or at the time already set, when that is sooner).
  scheduleDrain(ms) {
    const at = Date.now() + Math.max(0, ms);
    if (this.drainTimer !== null) {
      if (this.drainAt <= at) return;
      clearTimeout(this.drainTimer);
    }
    this.drainAt = at;
    this.drainTimer = setTimeout(() => {
      this.drainTimer = null;
      this.drain();
    }, Math.max(0, ms));
  }

  // Send what the outbox holds for this collector: earlier pages' uploads (their keepalive
  // answers unseen, their sends failed, their tab closed while a chunk was being built) and
  // this page's failed ones when due. One at a time, plain fetch.
  async drain() {
    if (this.draining) return;
    this.draining = true;
    try {
      const prefix = `${this.endpoint()}/v1/traces?`;
      const now = Date.now();
      // A chunk another page is still building is not sent, unless that page stopped
      // updating it long ago (its tab was killed).
      const stale = 3 * this.opts.pieceMs + 30000;
      let wait = Infinity;
      for (const e of this.outbox.entries()) {
        const r = e.rec;
        if (!r || typeof r.u !== "string" || !r.u.startsWith(prefix)) continue;
        if (!r.f && (r.o === this.pageLoad || now - r.a < stale)) continue;
        if (this.inFlight(e.id)) continue;
        if (r.n > now) {
          wait = Math.min(wait, r.n - now);
          continue;
        }
        const up = {id: e.id, url: r.u, body: r.g ? fromBase64(r.b) : r.b, gz: !!r.g, size: 0};
        up.size = up.gz ? up.body.byteLength : r.b.length;
        this.stats.retried++;
        this.outbox.update(e.id, {f: 1}); // from now on an upload like any other
        await this.deliver(up, false);
      }
      if (wait < Infinity) this.scheduleDrain(wait);
    } finally {
      this.draining = false;
    }
  }

  inFlight(id) {
    return this.sending.has(id) || (this.chunk !== null && this.chunk.id === id);
  }
}

/**
 * Start field profiling. Returns a handle: `enabled`, `reason` (why not: "not-sampled",
 * "no-profiler-api", "document-policy", "profiler-error"), `sampledBy` (whose decision:
 * "cookie", the server's, or "rate", sampleRate's), `stats`, `flush()` (send the current
 * chunk now and keep going; resolves to the upload ids sent) and `stop()`. Every page that
 * calls it, profiled or not, sends what earlier pages left in the outbox (after
 * `drainDelayMs`).
 */
export function startProfiling(options) {
  const opts = Object.assign(
    {
      sampleRate: 1,
      sampleInterval: 10,
      chunkMs: 60000,
      pieceMs: 5000, // the Profiler restarts this often at most; what a page that goes away fast can lose
      firstPieceMs: 250, // the first piece; each next one twice as long, up to pieceMs
      route: null,
      release: null,
      env: null,
      keepaliveLimit: KEEPALIVE_LIMIT, // the browser's budget for keepalive request bodies
      timeline: true, // long animation frames, interactions, page load (false: none)
      // The cookie holding the server's decision (null: never read one). When the page has
      // it, it decides and sampleRate is not applied: the server sent the header by it.
      sampleCookie: SAMPLE_COOKIE,
      outboxLimit: 1000000, // characters of localStorage for unsent uploads (0: none kept)
      outboxMaxAgeMs: 7 * DAY_MS,
      retryMs: 2000, // the first retry's wait, doubled each time up to retryMaxMs
      retryMaxMs: 300000,
      maxRetries: 10,
      drainDelayMs: 1000, // after start, so the page's own load goes first
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
    // This page load's id, sent in every upload's meta (`pageLoad`).
    pageLoad: s.pageLoad,
    // Send the current chunk now and go on profiling. {keepalive: true} sends it the way a
    // page that is going away does (keepalive fetch, else beacon, else left in the outbox).
    async flush({keepalive = false} = {}) {
      if (!s.enabled || s.stopped) return [];
      const chunk = s.chunk;
      const tail = s.profiler;
      s.chunk = null;
      s.profiler = null;
      clearTimeout(s.pieceTimer);
      if (document.visibilityState !== "hidden") s.begin();
      if (chunk) {
        if (tail) s.addPiece(chunk, tail);
        await s.finish(chunk, "flush", keepalive);
      }
      return Promise.all([...s.pending]).then(() => s.stats.ids.slice());
    },
    async stop() {
      if (!s.enabled || s.stopped) return [];
      s.stopped = true;
      s.removeListeners();
      clearTimeout(s.pieceTimer);
      const chunk = s.chunk;
      const tail = s.profiler;
      s.chunk = null;
      s.profiler = null;
      if (chunk) {
        if (tail) s.addPiece(chunk, tail);
        await s.finish(chunk, "stop", false);
      }
      await Promise.all([...s.pending]);
      if (s.timeline) s.timeline.stop(); // after the last chunk took what it observed
      return s.stats.ids.slice();
    },
    // Send what the outbox holds now (normally done after drainDelayMs and on retries).
    drain: () => s.drain(),
  };
  const session = sessionId(opts.sessionId);
  handle.session = session;
  s.scheduleDrain(opts.drainDelayMs);
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
