// The jsprof dashboard. Everything from traces (function names, URLs, releases, routes)
// is put into the page with textContent or as attribute values through the DOM, never as
// markup. The read token is in an HttpOnly cookie this script cannot see; fetches are
// same-origin and carry it.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

function status(text) { $("status").textContent = text || ""; }

// The queries take seconds on a large store: say so. The note floats over the page (the
// style sheet), so showing and hiding it moves nothing.
function loading(text) {
  $("loading").hidden = !text;
  if (text) $("loading").textContent = text;
  document.body.setAttribute("aria-busy", text ? "true" : "false");
}

// A table's rows are replaced in one step when its answer has come, never emptied while
// the query runs: an emptied table collapses, and all below it (the merged flame graph)
// moves under the user's pointer, then back when the rows come. Until then the old rows
// stay, dimmed (aria-busy; opacity moves nothing). Each table's loads are numbered: the
// answer of one overtaken by a newer load is dropped, so no older rows are put in last.
const loads = {};

function pending(table) {
  const seq = (loads[table.id] || 0) + 1;
  loads[table.id] = seq;
  table.setAttribute("aria-busy", "true");
  return () => loads[table.id] === seq;
}

function showRows(table, rows) {
  table.tBodies[0].replaceChildren(...rows);
  table.setAttribute("aria-busy", "false");
}

async function getJSON(path, params) {
  const r = await fetch(`${path}?${params}`, {
    credentials: "same-origin", headers: { Accept: "application/json" },
  });
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  if (!r.ok) {
    const said = body && typeof body.error === "string" ? body.error : null;
    throw new Error(said || `The server answered HTTP ${r.status} to ${path}.`);
  }
  if (body === null) throw new Error(`The server's answer to ${path} was not readable.`);
  return body;
}

function fill(select, values, keepFirst) {
  const first = keepFirst ? select.options[0] : null;
  select.replaceChildren();
  if (first) select.append(first);
  for (const v of values) {
    const o = document.createElement("option");
    o.value = v; o.textContent = vis(v);
    select.append(o);
  }
}

// The filters of the last refresh (Apply, an app picked, Exclude idle): every section
// reads these, never the controls as they are when its turn comes. A refresh loads its
// sections one after another (seconds on a large store); a release picked meanwhile, not
// yet applied, gave the later sections (top, regressions, uploads) that release while the
// vitals and interactions above them kept the one applied (a field try: vitals of every
// release beside release 1.0.2's top table, nothing on the page saying so).
let applied = null;

function filterParams() {
  return new URLSearchParams(applied ?? controlParams());
}

function controlParams() {
  const p = new URLSearchParams();
  p.set("app", $("app").value);
  if ($("release").value) p.set("release", $("release").value);
  if ($("route").value.trim()) p.set("route", $("route").value.trim());
  if ($("env").value) p.set("env", $("env").value);
  if ($("since").value) p.set("since", $("since").value);
  if ($("during").value) p.set("during", $("during").value);
  // (idle) and (program) samples left out (on by default): `fleet top/flame --exclude-idle`
  if ($("exclude-idle").checked) p.set("exclude_idle", "1");
  return p;
}

const msText = (v) => (v === null || v === undefined ? "–" : `${Math.round(v)} ms`);

async function loadVitals() {
  const p = filterParams();
  p.delete("during"); // vitals read the timelines, not samples
  p.delete("exclude_idle");
  const table = $("vitals");
  const current = pending(table);
  const rows = [];
  let empty = "";
  let note = "";
  try {
    const doc = await getJSON("/v1/query/vitals", p);
    if (!current()) return;
    note = leftOutNote(doc.rows);
    for (const r of doc.rows) {
      const tr = document.createElement("tr");
      cell(tr, r.route === null ? "(none)" : r.route, "l route");
      cell(tr, r.release, "l");
      cell(tr, String(r.pageLoads)); cell(tr, String(r.interactions));
      cell(tr, msText(r.inpP75Ms)); cell(tr, msText(r.longFrameBlockingP75Ms));
      cell(tr, msText(r.lcpP75Ms));
      const el = (r.lcpElements || [])[0];
      cell(tr, el ? `${el.element} (${el.pageLoads})` : "", "l route");
      cell(tr, r.clsP75 === null || r.clsP75 === undefined ? "–" : fmt(r.clsP75, 3));
      rows.push(tr);
    }
    if (!doc.rows.length) empty = "No page loads match these filters.";
  } catch (e) {
    if (!current()) return;
    empty = e.message;
  }
  showRows(table, rows);
  $("vitals-empty").textContent = empty;
  $("vitals-note").textContent = note;
}

// What the clients counted and did not send, over the vitals rows (`leftOut`), in
// `fleet vitals`' words (fleet/vitals.py left_out_words): "" when nothing.
function leftOutNote(rows) {
  const n = {interactions: 0, longFrames: 0, unsampledPageLoads: 0, unsampledMs: 0,
             unsampledInteractions: 0, unsampledLongFrames: 0};
  for (const r of rows) for (const k of Object.keys(n)) n[k] += Number((r.leftOut || {})[k]) || 0;
  const of = (k, w) => `${n[k]} ${w}${n[k] === 1 ? "" : "s"}`;
  const out = [];
  if (n.interactions || n.longFrames) {
    out.push("Left out by the clients (past their caps, or cut to fit a page's way out), not in " +
             `these p75s: ${of("interactions", "interaction")}, ${of("longFrames", "long frame")}.`);
  }
  if (n.unsampledPageLoads) {
    out.push(`${of("unsampledPageLoads", "page load")} ended with ${(n.unsampledMs / 1000).toFixed(1)} s ` +
             "unsampled (the piece profiling as the page left: its samples never came; " +
             `${of("unsampledInteractions", "interaction")} and ${of("unsampledLongFrames", "long frame")} in it).`);
  }
  return out.join(" ");
}

// Per interaction target and type (`fleet interactions`): the functions that ran during
// them are buttons that chart that function.
async function loadInteractions() {
  const p = filterParams();
  p.delete("during"); // each row keeps its own interactions' windows
  p.delete("exclude_idle");
  p.set("top", "15");
  p.set("functions", "3");
  const table = $("interactions");
  const current = pending(table);
  let doc;
  try {
    doc = await getJSON("/v1/query/interactions", p);
  } catch (e) {
    if (!current()) return;
    showRows(table, [sentenceRow(8, `Interactions could not be listed: ${e.message}`)]);
    $("interactions-note").textContent = "";
    return;
  }
  if (!current()) return;
  const rows = [];
  for (const r of doc.rows) {
    const tr = document.createElement("tr");
    cell(tr, r.target, "l fn");
    cell(tr, r.type, "l");
    cell(tr, String(r.count)); cell(tr, String(r.inpPageLoads));
    cell(tr, msText(r.p75Ms)); cell(tr, msText(r.maxMs)); cell(tr, fmt(r.longFrameMs, 0));
    const td = cell(tr, "", "l ex");
    td.append(linkButton("flame", `merged flame graph of the interactions on ${r.target}`,
      () => flameOfTarget(r.target)), " ");
    for (const f of r.functions || []) {
      td.append(linkButton(`${vis(f.label)} (${fmt(f.selfMs, 0)})`, `chart ${f.label}`,
        () => loadChart(f.name, f.label, fnWhere(f)).catch((e) => status(e.message))), " ");
    }
    rows.push(tr);
  }
  if (!doc.rows.length) {
    rows.push(sentenceRow(8, "No interactions in these uploads' timelines (the client " +
      "observes those of 16 ms and more)."));
  }
  showRows(table, rows);
  $("interactions-note").textContent = `${plural(doc.interactions, "interaction")} on ` +
    `${plural(doc.targets, "target")} in ${plural(doc.pageLoads, "page load")}` +
    (doc.rows.length < doc.targets ? `; the first ${doc.rows.length} shown` : "") + ".";
}

// The merged flame graph of one target's interactions (every one, however short):
// `fleet flame --during interaction --slower-than 0 --target T`.
function flameOfTarget(target) {
  const p = filterParams();
  p.set("during", "interaction");
  p.set("slower_than", "0");
  p.set("target", target);
  p.set("format", "html");
  p.set("max_nodes", "1500");
  $("flame").hidden = false;
  $("flame-note").textContent = vis(`The interactions on ${target} (every one, however ` +
    "short); Apply shows these filters' merged flame graph again.");
  $("flame").dataset.target = target;
  $("flame").src = `/v1/query/flame?${p}`;
  $("flame").scrollIntoView({ block: "start" });
}

// Names, routes and URLs come from traces (a name may be 1,024 characters, a route 2,048):
// their cells are elided by the style sheet and give the whole text on hover.
const ELIDED = /\b(fn|loc|route)\b/;

// Bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE, the isolates U+2066-2069, the
// marks) reorder the text after them: a name holding one draws reversed and can pass for
// another. Shown text writes them as escapes ("\u202e"), as the flame pages do
// (jsprof/render/base.py visible); queries and links keep the exact names.
const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const vis = (s) => String(s).replace(BIDI, (c) => `\\u${c.charCodeAt(0).toString(16)}`);

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = vis(text);
  if (cls) td.className = cls;
  if (cls && ELIDED.test(cls)) td.title = vis(text);
  tr.append(td);
  return td;
}

const fmt = (v, d = 1) => (v === null || v === undefined ? "" : Number(v).toFixed(d));

function where(r) {
  if (r.why) return noStackWhere(r);
  if (r.resource === null) return "";
  let s = r.resource;
  if (r.line !== null) s += `:${r.line}`;
  if (r.column !== null) s += `:${r.column}`;
  return s;
}

// A busy row without a stack (analysis/busy.py) has no location: it says so, and
// `(stack not captured)` names the entry points its samples are charged to, with their
// shares of its self time (fleet/text.py `_where`, the same words).
function noStackWhere(r) {
  if (!r.entryPoints) return "(no stack: in long animation frames)";
  const own = r.selfMs || 0;
  const share = (ms) => (own > 0 ? ` ${Math.round((100 * ms) / own)}%` : "");
  const parts = r.entryPoints.map((e) => e.label + share(e.ms));
  if (r.otherEntryPointsMs) parts.push("others" + share(r.otherEntryPointsMs));
  return parts.length ? "(no stack) under " + parts.join(", ") : "(no stack)";
}

// The names of samples with no stack, as every jsprof output names them (jsprof/trace.py
// NO_STACK_NAMES; a test keeps the two lists equal).
const NO_STACK_NAMES = new Set([
  "(idle)", "(script)", "(garbage collector)", "(style)", "(layout)", "(paint)", "(program)",
]);

// Whether the flame graph has samples to draw; null if a newer load overtook this one.
async function loadTop() {
  const p = filterParams();
  p.set("top", "30");
  const table = $("top");
  const current = pending(table);
  let doc;
  try {
    doc = await getJSON("/v1/query/top", p);
  } catch (e) {
    if (!current()) return null;
    $("top-summary").textContent = "";
    $("top-note").textContent = "";
    showRows(table, [sentenceRow(9, `Top functions could not be computed: ${e.message}`)]);
    return false;
  }
  if (!current()) return null;
  $("top-summary").textContent =
    `${plural(doc.traces, "trace")} · ${doc.pageLoadsEstimated ? "~" : ""}` +
    `${plural(doc.pageLoads, "page load")}` +
    // past 4,096 page loads in a rollup cell the count is a HyperLogLog sketch's
    (doc.pageLoadsEstimated ? " (estimated: standard error 1.6 %)" : "") + " · " +
    `${plural(doc.samples, "sample")} · ${fmt(doc.totalMs / 1000, 1)} s` +
    (doc.excludedIdleMs !== undefined ? ` · idle excluded: ${fmt(doc.excludedIdleMs / 1000, 1)} s of ` +
      `(idle) and (program) samples (${doc.excludedIdleSamples}) left out here and in the merged flame graph` : "") +
    // the collector reads a bounded number of new uploads a query (the compactor behind)
    (doc.pendingUploads ? ` · ${plural(doc.pendingUploads, "newer upload")} not read yet ` +
      "(each refresh reads more)" : "");
  const rows = [];
  for (const r of doc.rows) {
    const tr = document.createElement("tr");
    const idle = r.resource === null && NO_STACK_NAMES.has(r.name);
    if (idle) tr.className = "idle";
    cell(tr, fmt(r.selfPct)); cell(tr, fmt(r.totalPct)); cell(tr, fmt(r.selfMs));
    cell(tr, String(r.traces)); cell(tr, fmt(r.p50SelfMs)); cell(tr, fmt(r.p95SelfMs));
    cell(tr, r.label, "l fn");
    const loc = cell(tr, where(r), "l loc");
    if (r.why) loc.title = `${where(r)}\n${r.name}: ${r.why}`; // the cell is cut to its width
    const td = cell(tr, "");
    if (!idle) {
      td.append(linkButton("uploads", `the uploads that run ${r.label}`,
        () => showUploadsOf(r.name, r.resource, r.label)));
    }
    tr.addEventListener("click", () => loadChart(r.name, r.label, fnWhere(r)));
    rows.push(tr);
  }
  if (!doc.rows.length) {
    rows.push(sentenceRow(9, "No samples match these filters."));
  }
  showRows(table, rows);
  // What the rows without a location are (the CLI's notes under its table).
  $("top-note").textContent = doc.rows.filter((r) => r.why).map((r) => `${r.name}: ${r.why}.`)
    .join(" ");
  const firstFn = doc.rows.find((r) => r.resource !== null);
  if (firstFn && !$("chart").dataset.fn) {
    loadChart(firstFn.name, firstFn.label, fnWhere(firstFn)).catch((e) => status(e.message));
  }
  return doc.samples > 0;
}

const fnWhere = (r) => ({ resource: r.resource, line: r.line, column: r.column });

function loadFlame() {
  delete $("flame").dataset.target;
  const p = filterParams();
  p.set("format", "html");
  p.set("max_nodes", "1500");
  // Its Time view is read when its tab is opened (its own query, as long as the rest of
  // the page's together), not with the graph.
  p.set("time_view", "fetch");
  $("flame-note").textContent = "Drawing the merged flame graph of these filters…";
  $("flame").addEventListener("load", () => { $("flame-note").textContent = ""; }, { once: true });
  $("flame").src = `/v1/query/flame?${p}`;
}

// The chart is of the one function a row names (name, script, line, column), as the top
// table's row counts it; a no-JavaScript row ("(idle)") by its name.
const charted = { resource: null, line: null, column: null };

// Each loadChart is numbered: an answer that comes after a newer call's (the first row's
// chart, slow on a cold collector, after the user's click and "by day") is not drawn.
let chartSeq = 0;

async function loadChart(name, label, fnAt) {
  const seq = ++chartSeq;
  $("chart").dataset.fn = name;
  if (fnAt !== undefined) Object.assign(charted, fnAt);
  // (the table row's location, as its "location" cell shows it)
  $("chart").dataset.where = charted.resource === null ? "" : where(charted);
  // A reload of the same function (filters changed) keeps the label it was chosen by.
  if (label !== undefined) { $("chart-fn").textContent = vis(label); $("chart-fn").title = vis(label); }
  const p = filterParams();
  p.delete("release");
  // The top table's definition of a share (shareDefinition): with Exclude idle, of the
  // time left, so a release's bar is that release's self % in the table.
  p.set("function", name);
  if (charted.resource !== null) {
    p.set("resource", charted.resource);
    if (charted.line !== null) p.set("line", String(charted.line));
    if (charted.column !== null) p.set("column", String(charted.column));
  }
  p.set("by", $("chart-by").value);
  const say = (text) => {
    const note = document.createElement("p");
    note.className = "note";
    note.textContent = text;
    $("chart").replaceChildren(note);
  };
  let doc;
  try {
    doc = await getJSON("/v1/query/series", p);
  } catch (e) {
    if (seq === chartSeq) say(`The chart could not be drawn: ${e.message}`);
    return;
  }
  if (seq !== chartSeq) return;
  const pts = doc.points;
  if (!pts.length) {
    say("No uploads match these filters.");
    return;
  }
  const W = 60 * Math.max(pts.length, 1) + 40, H = 150, base = 120;
  const max = Math.max(1e-9, ...pts.map((x) => x.selfPct));
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", String(W));
  svg.setAttribute("height", String(H));
  pts.forEach((pt, i) => {
    const h = (pt.selfPct / max) * 90;
    const rect = document.createElementNS(SVG, "rect");
    rect.setAttribute("x", String(30 + i * 60));
    rect.setAttribute("y", String(base - h));
    rect.setAttribute("width", "36");
    rect.setAttribute("height", String(Math.max(h, 0.5)));
    const tip = document.createElementNS(SVG, "title");
    // null: the function cannot be named in that release (the note under the bars says why)
    const known = pt.selfPct !== null;
    // a day's share leaves out the uploads of a release that cannot name the function
    const left = known ? pt.leftOutTraces || 0 : 0;
    const of = left ? `${plural(pt.traces - left, "trace")} of ${pt.traces} (see below)` : plural(pt.traces, "trace");
    tip.textContent = vis(`${pt.label}: ${known ? `${fmt(pt.selfPct, 2)} %` : "unknown"} self, ${of}`);
    rect.append(tip);
    rect.dataset.label = pt.label;
    rect.dataset.selfPct = String(pt.selfPct);
    const val = document.createElementNS(SVG, "text");
    val.setAttribute("x", String(30 + i * 60));
    val.setAttribute("y", String(base - h - 4));
    val.textContent = known ? `${fmt(pt.selfPct, 1)}%` : "?";
    const lab = document.createElementNS(SVG, "text");
    lab.setAttribute("x", String(30 + i * 60));
    lab.setAttribute("y", String(base + 16));
    const shown = vis(pt.label);
    lab.textContent = shown.length > 9 ? `${shown.slice(0, 8)}…` : shown;
    svg.append(rect, val, lab);
  });
  // what the server says of the compared releases (a script mapped in some only: read
  // as recorded in all), under the bars
  const said = (doc.warnings || []).map((w) => {
    const note = document.createElement("p");
    note.className = "note";
    note.textContent = vis(w);
    return note;
  });
  $("chart").replaceChildren(svg, ...said);
}

// The diff's minimum evidence per side (min_traces: page loads, min_samples): a whole number of 1 or
// more, else a sentence naming the field (the server checks it again: a 400). Empty: the
// server's default.
function evidenceParam(p, id, name, label) {
  const text = $(id).value.trim();
  if (text === "") return;
  if (!/^[0-9]{1,15}$/.test(text) || Number(text) < 1) {
    const shown = text.length > 20 ? `${text.slice(0, 20)}…` : text;
    throw new Error(`${label} is “${shown}”; enter a whole number, 1 or more.`);
  }
  p.set(name, text);
}

// A query's refusal in the dashboard's words: the server names the command line's flags,
// here they are the boxes beside the table (Min page loads, Min samples).
const ourWords = (message) =>
  message.replace("--min-traces/--min-samples", "Min page loads/Min samples");

async function runDiff(ev) {
  if (ev) ev.preventDefault();
  const p = filterParams();
  p.delete("release");
  p.delete("exclude_idle"); // its intervals are resampled over every sample
  p.set("base", `release=${$("base").value}`);
  p.set("new", `release=${$("new").value}`);
  p.set("top", "25");
  status("");
  const table = $("diff");
  const current = pending(table);
  try {
    evidenceParam(p, "diff-min-traces", "min_traces", "Min page loads");
    evidenceParam(p, "diff-min-samples", "min_samples", "Min samples");
    const doc = await getJSON("/v1/query/diff", p);
    if (!current()) return;
    const rows = [];
    for (const r of doc.rows) {
      const tr = document.createElement("tr");
      cell(tr, fmt(r.selfPp, 2), r.selfPp > 0 ? "up" : r.selfPp < 0 ? "down" : "");
      cell(tr, r.selfPpCi ? `[${fmt(r.selfPpCi[0], 2)}, ${fmt(r.selfPpCi[1], 2)}]` : "");
      // by how much, relatively: the self share's change in % (as `fleet diff` prints it)
      cell(tr, r.status === "new" ? "new" : !(r.baseSelfPct || r.newSelfPct) ? ""
        : pctChange(r.selfRelPct), "rel");
      cell(tr, fmt(r.totalPp, 2));
      cell(tr, `${fmt(r.baseSelfPct)} → ${fmt(r.newSelfPct)}`);
      cell(tr, r.label + (r.status === "new" || r.status === "removed"
        ? `  [${r.status}]` : ""), "l fn");
      cell(tr, r.resource === null ? "" : r.resource, "l loc");
      rows.push(tr);
    }
    showRows(table, rows);
    // source maps that could not be applied alike on both sides, the sides not matching
    $("diff-note").textContent = vis((doc.warnings || []).join(" "));
    p.set("format", "flame-html");
    $("diff-flame").src = `/v1/query/diff?${p}`;
    $("diff-flame").hidden = false;
  } catch (e) {
    if (!current()) return;
    const said = ourWords(e.message);
    showRows(table, [sentenceRow(7, `The releases could not be compared: ${said}`)]);
    $("diff-note").textContent = "";
    $("diff-flame").hidden = true;
  }
}

// A button that reads as a link; `what` says where it goes (its tooltip).
function linkButton(text, what, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "link";
  b.textContent = text;
  b.title = vis(what);
  b.addEventListener("click", (ev) => { ev.stopPropagation(); onClick(); });
  return b;
}

// A table row holding one sentence, where the rows would be.
function sentenceRow(span, text) {
  const tr = document.createElement("tr");
  tr.className = "sentence";
  const td = document.createElement("td");
  td.colSpan = span;
  td.textContent = text;
  tr.append(td);
  return tr;
}

// One upload's flame graph (GET /v1/traces/{id}/flame), in its own frame.
function openUpload(id) {
  $("upload-flame-section").hidden = false;
  $("upload-flame-id").textContent = id;
  $("upload-flame").src = `/v1/traces/${encodeURIComponent(id)}/flame`;
  $("upload-flame-section").scrollIntoView({ block: "start" });
}

function uploadLink(id) {
  const a = document.createElement("a");
  a.href = `/v1/traces/${encodeURIComponent(id)}/flame`;
  a.target = "upload-flame";
  a.className = "upload";
  a.textContent = id;
  a.title = `flame graph of upload ${id}`;
  a.addEventListener("click", (ev) => { ev.preventDefault(); ev.stopPropagation(); openUpload(id); });
  return a;
}

const plural = (n, one, many) => `${n} ${n === 1 ? one : many || `${one}s`}`;

const signed = (v) => `${v >= 0 ? "+" : ""}${fmt(v)}`;
const pctChange = (v) => (v === null ? "new" : `${v >= 0 ? "+" : ""}${fmt(v, 0)}%`);
// An open end of a relative change's interval: BASE's mean not told from 0.
const pctInterval = ([lo, hi]) => (lo === null ? "% unbounded"
  : `${pctChange(lo)} to ${hi === null ? "+∞" : pctChange(hi)}`);

async function loadRegressions(ev) {
  if (ev) ev.preventDefault();
  const by = $("reg-by").value;
  const p = filterParams();
  p.delete("exclude_idle"); // its intervals are resampled over every sample
  // By release compares every release in order; by day may look within one.
  if (by === "release") p.delete("release");
  p.set("by", by);
  const table = $("regressions");
  const current = pending(table);
  let doc;
  try {
    evidenceParam(p, "reg-min-traces", "min_traces", "Min page loads");
    evidenceParam(p, "reg-min-samples", "min_samples", "Min samples");
    doc = await getJSON("/v1/query/regressions", p);
  } catch (e) {
    if (!current()) return;
    showRows(table,
      [sentenceRow(8, `Regressions could not be computed: ${ourWords(e.message)}`)]);
    $("regressions-note").textContent = "";
    return;
  }
  if (!current()) return;
  const rows = [];
  const units = doc[`${by}s`];
  const baseKey = by === "release" ? "baseRelease" : "baseDay";
  for (const r of doc.regressions) {
    const tr = document.createElement("tr");
    cell(tr, r.label, "l fn");
    cell(tr, r.resource === null ? "" : r.resource + (r.line !== null ? `:${r.line}` : ""),
      "l loc");
    cell(tr, `${r[by]} (after ${r[baseKey]})`, "l route");
    // By how much: ms per page load before → after, the change in ms and %, and the
    // intervals of both (the document's level, corrected for the functions tested).
    cell(tr, `${fmt(r.beforeMsPerLoad)} → ${fmt(r.afterMsPerLoad)} ms`);
    cell(tr, `+${fmt(r.changeMsPerLoad)} ms (${pctChange(r.changePct)})`, "up");
    cell(tr, `${signed(r.changeMsCi[0])} to ${signed(r.changeMsCi[1])} ms\n` +
      pctInterval(r.changePctCi), "iv");
    cell(tr, `${fmt(r.beforeSelfPct)} → ${fmt(r.afterSelfPct)}`);
    const td = cell(tr, "", "l ex");
    for (const id of r.exampleIds) { td.append(uploadLink(id), " "); }
    td.append(linkButton("all", `every upload that runs ${r.label}`,
      () => showUploadsOf(r.name, r.resource, r.label)));
    // (a regression matches its function across builds by name and script: every
    // function of that name is charted)
    tr.addEventListener("click", () => loadChart(r.name, r.label,
      { resource: null, line: null, column: null }));
    rows.push(tr);
  }
  const span = units.length ? ` (${units[0]} to ${units[units.length - 1]})` : "";
  if (units.length < 2) {
    // one release (day) is nothing to compare, not a clean bill of health
    rows.push(sentenceRow(8, `Nothing to compare: regressions compare each ${by} with ` +
      `the one before, and these filters select ${plural(units.length, by)}` +
      (units.length ? ` (${units[0]}).` : ".")));
  } else if (!doc.regressions.length && doc.skipped.length === units.length - 1) {
    // every pair lacked evidence: nothing was compared, not a clean bill of health
    rows.push(sentenceRow(8, `Nothing compared over ${plural(units.length, by)}${span}: ` +
      `no ${by} had enough evidence beside the one before (see below).`));
  } else if (!doc.regressions.length) {
    // "none found", not "none rose": a few page loads miss large rises (issue 34)
    rows.push(sentenceRow(8, `No rise of more than ${doc.minChangePct}% found in a ` +
      `function's self time per page load over ${plural(units.length, by)}${span}.`));
  }
  const notes = doc.skipped.map(
    (k) => `${k[baseKey]} → ${k[by]} not compared: ${ourWords(k.reason)}`);
  if (doc.regressions.length) {
    notes.push(`Largest sure rise first. Intervals at ${fmt(100 * doc.ciLevel, 2)}%: ` +
      `${plural(doc.tests, "change")} of functions with ${doc.minSharePct}% or more of the ` +
      `time tested, at a ${fmt(100 * doc.fdr, 0)}% false discovery rate.`);
  }
  const unseen = unseenNote(doc.unseen || [], by, baseKey);
  if (unseen) notes.push(unseen);
  notes.push(...(doc.warnings || []).map(vis));
  showRows(table, rows);
  $("regressions-note").textContent = notes.join(" ");
}

// What the last compared pair could not see (the document's `unseen`): the rise each of
// its three largest named functions could have taken, more often missed than found.
function unseenNote(unseen, by, baseKey) {
  if (!unseen.length) return "";
  const u = unseen[unseen.length - 1];
  // not those reported at this pair: they rose by more than it could miss
  const fns = u.functions.filter((f) => f.resource && f.name && !f.found).slice(0, 3);
  if (!fns.length) return "";
  const rises = fns.map((f) => `${f.label} ${f.minRisePct === null ? "of any size"
    : `under +${Math.round(f.minRisePct)}%`}`);
  return `At ${u[by]} (after ${u[baseKey]}; ${u.beforePageLoads} → ${u.afterPageLoads} ` +
    `page loads) rises in ${rises.join(", ")} are more often missed than found: ` +
    "more page loads see smaller ones.";
}

// The uploads list: the header's filters, a function's uploads when one was picked,
// newest first, a page at a time (the listing's cursor).
const uploads = { fn: null, pages: [null] };

function showUploadsOf(name, resource, label) {
  uploads.fn = { name, resource, label };
  uploads.pages = [null];
  loadUploads().catch((e) => status(e.message));
  $("uploads-section").scrollIntoView({ block: "start" });
}

function receivedText(ms) {
  if (typeof ms !== "number" || !Number.isFinite(ms)) return "";
  return new Date(ms).toISOString().slice(0, 16).replace("T", " ");
}

async function loadUploads() {
  const p = filterParams();
  p.delete("during"); // a listing of uploads, not of samples
  p.delete("exclude_idle");
  p.set("limit", "20");
  const cursor = uploads.pages[uploads.pages.length - 1];
  if (cursor) p.set("cursor", cursor);
  if (uploads.fn) {
    p.set("function", uploads.fn.name);
    if (uploads.fn.resource !== null) p.set("resource", uploads.fn.resource);
  }
  // What the table lists (its heading, the pager) changes with its rows, not before.
  const fn = uploads.fn, page = uploads.pages.length;
  const table = $("uploads");
  const current = pending(table);
  let doc = null, failed = null;
  try {
    doc = await getJSON("/v1/traces", p);
  } catch (e) {
    failed = e;
  }
  if (!current()) return;
  $("uploads-what").textContent = fn ? vis(`that run ${fn.label}`) : "";
  $("uploads-what").title = fn ? vis(fn.label) : "";
  $("uploads-all").hidden = !fn;
  $("uploads-first").hidden = page < 2;
  $("uploads-next").hidden = !(doc && doc.nextCursor);
  if (failed) {
    showRows(table, [sentenceRow(9, `The uploads could not be listed: ${failed.message}`)]);
    $("uploads-note").textContent = "";
    return;
  }
  const rows = [];
  for (const u of doc.uploads) {
    const tr = document.createElement("tr");
    const idCell = cell(tr, "", "l route");
    idCell.append(uploadLink(u.id));
    cell(tr, receivedText(u.receivedAt), "l");
    cell(tr, u.release, "l route");
    cell(tr, u.route === null ? "(none)" : u.route, "l route");
    cell(tr, String(u.samples)); cell(tr, fmt(u.totalMs, 0));
    cell(tr, String(u.interactions)); cell(tr, String(u.longFrames));
    const open = cell(tr, "");
    open.append(linkButton("flame graph", `flame graph of upload ${u.id}`, () => openUpload(u.id)));
    tr.addEventListener("click", () => openUpload(u.id));
    rows.push(tr);
  }
  if (!doc.uploads.length) {
    rows.push(sentenceRow(9, page > 1 ? "No more uploads."
      : fn ? `No upload matching these filters runs ${fn.label}.`
        : "No uploads match these filters."));
  }
  showRows(table, rows);
  $("uploads-note").textContent = `Page ${page}` +
    (doc.nextCursor ? "; newer first, more on the next page." : ".");
  if (doc.nextCursor) {
    $("uploads-next").onclick = () => {
      uploads.pages.push(doc.nextCursor);
      loadUploads().catch((e) => status(e.message));
    };
  }
}

// One definition of a share for the top table, the flame graph and the chart, said on the
// page: of the chosen filters' sampled time, (idle) and (program) left out while Exclude
// idle is on. The diff and the regressions count every sample (their intervals are
// resampled over all of them), and say so.
function shareDefinition() {
  const idle = $("exclude-idle").checked;
  $("share-def").textContent = "Self % is a function's own time as a share of the sampled " +
    "time of these filters" + (idle ? ", (idle) and (program) samples left out (Exclude idle)"
      : ", every sample counted (idle too)") + ": the same in the top table, the merged " +
    "flame graph and the chart (a release's bar is its self % with that release picked). " +
    "The release diff and the regressions count every sample.";
}

// Refreshes still running. A refresh asked while another runs overlaps it, and either may
// end first (an overtaken table's answer is dropped, and a refresh whose top table was
// overtaken stops there, leaving the rest to the other): the page is done (aria-busy
// false, the note hidden) only when the last of them has ended.
let refreshing = 0;

async function refresh(ev) {
  if (ev) ev.preventDefault();
  applied = controlParams();
  status("");
  shareDefinition();
  refreshing += 1;
  loading("Loading the results of these filters: web vitals, interactions, top functions, regressions and uploads…");
  try {
    await refreshAll();
  } finally {
    refreshing -= 1;
    if (!refreshing) loading("");
  }
}

async function refreshAll() {
  // Each section says its own error where its result would be, and a failed one
  // leaves no stale result of earlier filters behind. Each keeps its rows until its
  // answer comes (showRows): with the same data nothing above the flame frame moves.
  await loadVitals();
  await loadInteractions();
  const drawn = await loadTop();
  if (drawn === null) return; // a newer refresh asked since: it fills the rest
  // The flame graph only for filters the top table answered (its error would be JSON in
  // the frame): the same selection.
  $("flame").hidden = !drawn;
  $("flame-note").textContent = drawn ? "" : "No flame graph for these filters.";
  if (drawn) loadFlame();
  uploads.pages = [null];
  await loadRegressions();
  await loadUploads();
  try {
    if ($("chart").dataset.fn) await loadChart($("chart").dataset.fn);
  } catch (e) {
    status(e.message);
  }
}

async function pickApp() {
  const o = await getJSON("/v1/query/options", new URLSearchParams({ app: $("app").value }));
  fill($("release"), o.releases, true);
  fill($("env"), o.envs, true);
  fill($("base"), o.releases.slice().reverse(), false);
  fill($("new"), o.releases, false);
  delete $("chart").dataset.fn;
  uploads.fn = null;
  await refresh();
}

function ago(s) {
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} days`;
}

// The compactor's lag (GET /v1/status): how much of what the views show is read from raw
// uploads the tables do not hold yet, and whether the compactor is failing.
async function loadCompactor() {
  const s = await getJSON("/v1/status", new URLSearchParams());
  const c = s.compactor;
  const el = $("compactor");
  el.classList.toggle("err", c.failing);
  let text = c.pending
    ? `Compactor: ${c.pending} upload${c.pending === 1 ? "" : "s"} not yet in the tables, `
      + `the oldest received ${ago(c.lagSeconds)} ago (the views read them from the raw store).`
    : "Compactor: caught up.";
  if (!c.enabled) text += " This collector does not compact (--compact-every 0).";
  if (c.failing) {
    text += ` Failing: ${c.consecutiveFailures} runs in a row; see the collector's log.`;
  }
  el.textContent = text;
  el.dataset.pending = String(c.pending);
}

async function start() {
  const compactor = () => loadCompactor().catch((e) => { $("compactor").textContent = e.message; });
  compactor();
  setInterval(compactor, 30000);
  try {
    const o = await getJSON("/v1/query/options", new URLSearchParams());
    if (!o.apps.length) { loading(""); status("No uploads yet."); return; }
    fill($("app"), o.apps, false);
    $("app").addEventListener("change", pickApp);
    $("filters").addEventListener("submit", refresh);
    $("exclude-idle").addEventListener("change", refresh);
    $("diff-form").addEventListener("submit", runDiff);
    $("reg-by").addEventListener("change", () => loadRegressions().catch((e) => status(e.message)));
    $("reg-form").addEventListener(
      "submit", (ev) => loadRegressions(ev).catch((e) => status(e.message)));
    $("uploads-first").addEventListener("click", () => {
      uploads.pages = [null];
      loadUploads().catch((e) => status(e.message));
    });
    $("uploads-all").addEventListener("click", () => {
      uploads.fn = null;
      uploads.pages = [null];
      loadUploads().catch((e) => status(e.message));
    });
    $("chart-by").addEventListener("change", () => {
      if ($("chart").dataset.fn !== undefined) loadChart($("chart").dataset.fn).catch(
        (e) => status(e.message));
    });
    await pickApp();
    document.body.dataset.ready = "1";
  } catch (e) {
    loading("");
    status(e.message);
  }
}

document.addEventListener("DOMContentLoaded", start);
