// The standalone SVG picture's script (`jsprof flame -o x.svg`): click-to-zoom, a search
// with the matched share over the drawn frames, and hover details on the bottom line. The
// frames themselves are static <g><rect><text><title> elements written by render/flame/frames.py,
// so the file is a picture where scripts do not run (an image tag, an image viewer). The HTML
// viewer draws on a canvas instead (flame.js). Names reach the document only as
// textContent or attribute values set through the DOM, never as markup.
(function () {
  "use strict";
  var doc = document;
  var D = JSON.parse(doc.getElementById("fg-data").textContent);
  var svg = doc.getElementById("fg-svg");
  var gs = doc.getElementById("fg-frames").children;
  var N = D.d.length;
  var rects = [], texts = [], tips = [], parent = [], end = [], stack = [];
  var details = doc.getElementById("fg-details");
  var status = doc.getElementById("fg-status");
  var reset = doc.getElementById("fg-reset");
  for (var i = 0; i < N; i++) {
    var g = gs[i];
    rects.push(g.getElementsByTagName("rect")[0]);
    texts.push(g.getElementsByTagName("text")[0]);
    var t = g.getElementsByTagName("title")[0];
    tips.push(t ? t.textContent : "");
    while (stack.length && D.d[stack[stack.length - 1]] >= D.d[i]) end[stack.pop()] = i;
    parent.push(stack.length ? stack[stack.length - 1] : -1);
    stack.push(i);
  }
  while (stack.length) end[stack.pop()] = N;
  var zoomed = 0, query = "", hits = new Uint8Array(N), ancs = new Uint8Array(N);
  // Bidirectional controls shown as escapes, as flame/frames.py writes the labels (base.visible):
  // a name holding U+202E must not draw reversed and pass for another.
  var BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  function vis(s) {
    return String(s).replace(BIDI, function (c) { return "\\u" + c.charCodeAt(0).toString(16); });
  }
  function label(name, px) {
    name = vis(name);
    var fit = Math.floor((px - 6) / D.charW);
    if (fit < 3) return "";
    return name.length <= fit ? name : name.slice(0, fit - 1) + "\u2026";
  }
  function styleFrame(i) {
    gs[i].setAttribute("class", (ancs[i] ? "fg-anc" : "") + (hits[i] ? " fg-hit" : ""));
  }
  // The zoomed frame's subtree fills the width; its ancestors are drawn full width, faded.
  function layout() {
    var z = zoomed, x0 = D.x[z], span = D.w[z] || 1, eps = span * 1e-9;
    var W = D.width, scale = (W - 2 * D.pad) / span;
    var anc = {};
    for (var a = parent[z]; a >= 0; a = parent[a]) anc[a] = true;
    for (var i = 0; i < N; i++) {
      var g = gs[i], x, w, isAnc = false;
      if (i >= z && i < end[z]) {
        x = D.pad + (D.x[i] - x0) * scale; w = D.w[i] * scale;
        if (w <= eps * scale) { g.style.display = "none"; continue; }
      } else if (anc[i]) { x = D.pad; w = W - 2 * D.pad; isAnc = true; }
      else { g.style.display = "none"; continue; }
      if (w < 0.1) { g.style.display = "none"; continue; }
      g.style.display = "";
      if (ancs[i] !== (isAnc ? 1 : 0)) { ancs[i] = isAnc ? 1 : 0; styleFrame(i); }
      rects[i].setAttribute("x", x.toFixed(2));
      rects[i].setAttribute("width", Math.max(w > 2 ? w - 0.6 : w, 0).toFixed(2));
      texts[i].setAttribute("x", (x + 3).toFixed(2));
      texts[i].textContent = label(D.names[D.n[i]], w);
    }
    if (reset) reset.style.visibility = zoomed ? "visible" : "hidden";
  }
  // A search tests each distinct name and location once, then marks the frames.
  function search(q) {
    query = (q || "").toLowerCase();
    var nameHit = D.names.map(function (v) { return query && v.toLowerCase().indexOf(query) >= 0; });
    var locHit = D.locs.map(function (v) { return query && v.toLowerCase().indexOf(query) >= 0; });
    var ms = 0, count = 0, covered = 0;
    for (var i = 0; i < N; i++) {
      var h = i > 0 && query && (nameHit[D.n[i]] || locHit[D.l[i]]) ? 1 : 0;
      if (h !== hits[i]) { hits[i] = h; styleFrame(i); }
      if (!h) continue;
      count++;
      // Nested matches (recursion) are inside an outer match: their time counts once.
      if (i >= covered) { ms += D.w[i]; covered = end[i]; }
    }
    if (status) {
      status.textContent = query ? "\u201c" + vis(q) + "\u201d: " + count + " frame" + (count === 1 ? "" : "s") +
        ", " + (D.w[0] > 0 ? 100 * ms / D.w[0] : 0).toFixed(1) + "% of total (" + ms.toFixed(1) + " ms)" : "";
    }
  }
  function frameOf(el) {
    while (el && el !== svg) {
      if (el.getAttribute && el.getAttribute("data-i") !== null) return +el.getAttribute("data-i");
      el = el.parentNode;
    }
    return -1;
  }
  svg.addEventListener("click", function (e) {
    var i = frameOf(e.target);
    if (i >= 0) { zoomed = i; layout(); }
  });
  svg.addEventListener("mousemove", function (e) {
    var i = frameOf(e.target);
    if (details) details.textContent = i >= 0 ? tips[i].split("\n").join("  \u00b7  ") : "";
  });
  if (reset) reset.addEventListener("click", function () { zoomed = 0; layout(); });
  var button = doc.getElementById("fg-search-button");
  if (button) button.addEventListener("click", function () {
    var q = window.prompt("Search frames (name or location):", query);
    if (q !== null) search(q);
  });
  doc.addEventListener("keydown", function (e) {
    if (e.key === "Escape") { zoomed = 0; layout(); search(""); }
  });
  // A link can carry a search and a zoom: flame.svg#q=fib&z=12 (z: frame index).
  var P = {};
  location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
    var k = kv.indexOf("=");
    if (k > 0) {
      try { P[kv.slice(0, k)] = decodeURIComponent(kv.slice(k + 1)); } catch (err) { /* bad escape */ }
    }
  });
  var zi = parseInt(P.z, 10);
  if (zi > 0 && zi < N) zoomed = zi;
  layout();
  if (P.q) search(P.q);
  // The script ran (tests read it from the rendered DOM).
  svg.setAttribute("data-ready", "1");
})();
