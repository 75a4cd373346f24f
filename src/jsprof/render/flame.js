// The flame graph's script: click-to-zoom, search with the matched share, hover details.
// Shipped as package data and inlined by render/flame.py into every HTML and SVG file,
// where a hash-pinned Content-Security-Policy lets only this exact text run. It reads the
// numbers from the page's `fg-data` JSON block and the frames from `#fg-frames`.
(function () {
  "use strict";
  var doc = document;
  var D = JSON.parse(doc.getElementById("fg-data").textContent);
  var svg = doc.getElementById("fg-svg");
  var gs = doc.getElementById("fg-frames").children;
  var N = D.d.length, html = D.mode === "html";
  var rects = [], texts = [], tips = [], titles = [], parent = [], end = [], stack = [];
  var tipEl = doc.getElementById("fg-tip");
  var details = doc.getElementById("fg-details");
  var status = doc.getElementById("fg-status");
  var reset = doc.getElementById("fg-reset");
  var input = doc.getElementById("fg-search");
  for (var i = 0; i < N; i++) {
    var g = gs[i];
    rects.push(g.getElementsByTagName("rect")[0]);
    texts.push(g.getElementsByTagName("text")[0]);
    var t = g.getElementsByTagName("title")[0];
    titles.push(t);
    tips.push(t ? t.textContent : "");
    while (stack.length && D.d[stack[stack.length - 1]] >= D.d[i]) end[stack.pop()] = i;
    parent.push(stack.length ? stack[stack.length - 1] : -1);
    stack.push(i);
  }
  while (stack.length) end[stack.pop()] = N;

  var zoomed = 0, query = "";
  function width() {
    if (!html) return D.width;
    // The wrapper's padding (6px each side) is not ours to draw in.
    var w = svg.parentNode.clientWidth - 12;
    return w > 200 ? w : D.width;
  }
  function label(name, px) {
    var fit = Math.floor((px - 6) / D.charW);
    if (fit < 3) return "";
    return name.length <= fit ? name : name.slice(0, fit - 1) + "\u2026";
  }
  function layout() {
    var W = width(), z = zoomed, x0 = D.x[z], scale = (W - 2 * D.pad) / (D.w[z] || 1);
    if (html) svg.setAttribute("width", W);
    var anc = {};
    for (var a = parent[z]; a >= 0; a = parent[a]) anc[a] = true;
    for (var i = 0; i < N; i++) {
      var g = gs[i], x, w, isAnc = false;
      if (i >= z && i < end[z]) { x = D.pad + (D.x[i] - x0) * scale; w = D.w[i] * scale; }
      else if (anc[i]) { x = D.pad; w = W - 2 * D.pad; isAnc = true; }
      else { g.style.display = "none"; continue; }
      if (w < 0.1) { g.style.display = "none"; continue; }
      g.style.display = "";
      g.setAttribute("class", (isAnc ? "fg-anc" : "") + (hit(i) ? " fg-hit" : ""));
      rects[i].setAttribute("x", x.toFixed(2));
      rects[i].setAttribute("width", Math.max(w > 2 ? w - 0.6 : w, 0).toFixed(2));
      texts[i].setAttribute("x", (x + 3).toFixed(2));
      texts[i].textContent = label(D.names[D.n[i]], w);
    }
    if (reset) reset.style.visibility = zoomed ? "visible" : "hidden";
  }
  function hit(i) {
    if (!query || i === 0) return false;
    return D.names[D.n[i]].toLowerCase().indexOf(query) >= 0 ||
      D.locs[D.l[i]].toLowerCase().indexOf(query) >= 0;
  }
  function search(q) {
    query = (q || "").toLowerCase();
    var ms = 0, count = 0, covered = 0;
    for (var i = 1; i < N; i++) {
      if (!hit(i)) continue;
      count++;
      // Nested matches (recursion) are inside an outer match: count their time once.
      if (i >= covered) { ms += D.w[i]; covered = end[i]; }
    }
    layout();
    var pct = D.total > 0 ? (100 * ms / D.total) : 0;
    if (status) {
      status.textContent = query ?
        "\u201c" + q + "\u201d: " + count + " frame" + (count === 1 ? "" : "s") +
        ", " + pct.toFixed(1) + "% of total (" + ms.toFixed(1) + " ms)" : "";
    }
  }
  function frameOf(el) {
    while (el && el !== svg) {
      if (el.getAttribute && el.getAttribute("data-i") !== null) {
        return +el.getAttribute("data-i");
      }
      el = el.parentNode;
    }
    return -1;
  }
  svg.addEventListener("click", function (e) {
    var i = frameOf(e.target);
    if (i < 0) return;
    zoomed = i;
    layout();
  });
  // The page draws its own tooltip. The hovered frame's <title> is taken out meanwhile,
  // so the browser's slower native one does not show on top; it stays in the document
  // otherwise, for search engines, screen readers and viewers without scripts.
  var hovered = -1;
  function hover(i) {
    if (!tipEl || i === hovered) return;
    if (hovered >= 0 && titles[hovered]) gs[hovered].insertBefore(titles[hovered], rects[hovered]);
    if (i >= 0 && titles[i] && titles[i].parentNode) gs[i].removeChild(titles[i]);
    hovered = i;
  }
  svg.addEventListener("mousemove", function (e) {
    var i = frameOf(e.target);
    hover(i);
    if (details) details.textContent = i >= 0 ? tips[i].split("\n").join("  \u00b7  ") : "";
    if (!tipEl) return;
    if (i < 0) { tipEl.style.display = "none"; return; }
    tipEl.textContent = tips[i];
    tipEl.style.display = "block";
    var r = tipEl.getBoundingClientRect();
    var left = e.clientX + 14, top = e.clientY + 16;
    if (left + r.width > window.innerWidth - 4) left = Math.max(4, e.clientX - r.width - 14);
    if (top + r.height > window.innerHeight - 4) top = Math.max(4, e.clientY - r.height - 12);
    tipEl.style.left = left + "px";
    tipEl.style.top = top + "px";
  });
  svg.addEventListener("mouseleave", function () {
    hover(-1);
    if (tipEl) tipEl.style.display = "none";
  });
  if (reset) reset.addEventListener("click", function () { zoomed = 0; layout(); });
  if (input) {
    input.addEventListener("input", function () { search(input.value); });
  } else {
    var s = doc.getElementById("fg-search-button");
    if (s) s.addEventListener("click", function () {
      var q = window.prompt("Search frames (name or location):", query);
      if (q !== null) search(q);
    });
  }
  doc.addEventListener("keydown", function (e) {
    if (e.key === "Escape") {
      zoomed = 0;
      if (input) input.value = "";
      search("");
    } else if (e.key === "/" && input && doc.activeElement !== input) {
      e.preventDefault();
      input.focus();
    }
  });
  if (html) window.addEventListener("resize", layout);
  // A link can carry a search and a zoom: flame.html#q=fib&z=12 (z: frame index).
  var params = {};
  location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
    var p = kv.split("=");
    if (p.length === 2) params[p[0]] = decodeURIComponent(p[1]);
  });
  var zi = parseInt(params.z, 10);
  if (zi > 0 && zi < N) zoomed = zi;
  // A flame graph taller than the window opens at its roots, where reading starts.
  if (html && !D.icicle && svg.getBoundingClientRect().bottom > window.innerHeight) {
    svg.scrollIntoView({block: "end"});
  }
  if (params.q) {
    if (input) input.value = params.q;
    search(params.q);
  } else {
    layout();
  }
  // Marks that the script ran (tests read it from the rendered DOM).
  svg.setAttribute("data-ready", "1");
})();
