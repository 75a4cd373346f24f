// The viewer's script: the flame graph drawn on a canvas (click-to-zoom, search with the
// matched share, hover and keyboard details) and the other views switched by tabs and by the
// URL hash (#view=flame|time|sandwich|source&fn=NAME). Shipped as package data and inlined
// by render/flame/ into every HTML page, where a hash-pinned Content-Security-Policy lets
// only this exact text run. It reads the drawn frames as binary columns from the page's
// `fg-data` block, and the views' numbers from `fg-model`. Names from the trace reach the
// page only as canvas text, textContent or attribute values set through the DOM, never as
// markup. (The standalone SVG picture has its own small script, flame_svg.js.)
(function () {
  "use strict";
  var doc = document;
  var SVGNS = "http://www.w3.org/2000/svg";
  var D = JSON.parse(doc.getElementById("fg-data").textContent);
  // Little-endian binary columns in base64: one decode each, no per-number parsing.
  function col(b64, T) {
    if (b64.charCodeAt(0) === 126) return unpack(b64, T);
    var u;
    if (Uint8Array.fromBase64) u = Uint8Array.fromBase64(b64);
    else {
      var bin = atob(b64);
      u = new Uint8Array(bin.length);
      for (var k = 0; k < bin.length; k++) u[k] = bin.charCodeAt(k);
    }
    return new T(u.buffer);
  }
  // A packed column (render/packed.py): "~i<count>~" or "~m<count>~" (ms as whole ns),
  // then base64 of varints: each a zigzag'd delta times 2, plus 1 when a run length
  // follows (the delta repeated that many times). Decoded with doubles (exact to 2^53).
  function unpack(s, T) {
    var j = s.indexOf("~", 2), n = +s.slice(2, j), scale = s.charAt(1) === "m" ? 1e6 : 1;
    var u = bytes(s.slice(j + 1)), out = new T(n), k = 0, p = 0, acc = 0, len = u.length;
    while (p < len && k < n) {
      var v = 0, mul = 1, b;
      do { b = u[p++]; v += (b & 127) * mul; mul *= 128; } while (b & 128);
      var run = v % 2, z = (v - run) / 2, d = z % 2 ? -(z + 1) / 2 : z / 2, r = 1;
      if (run) { r = 0; mul = 1; do { b = u[p++]; r += (b & 127) * mul; mul *= 128; } while (b & 128); }
      if (scale === 1) for (var q = 0; q < r; q++) { acc += d; out[k++] = acc; }
      else for (q = 0; q < r; q++) { acc += d; out[k++] = acc / scale; }
    }
    return out;
  }
  var C = D.cols;
  var DEP = col(C.d, Int32Array), X0 = col(C.x, Float64Array), W0 = col(C.w, Float64Array);
  var NM = col(C.n, Int32Array), LC = col(C.l, Int32Array), FL = col(C.f, Int32Array);
  var SELF = col(C.s, Float64Array), CNT = col(C.c, Int32Array), TN = col(C.tn, Int32Array);
  var DIFF = D.diff ? {ms: D.diff.ms, ds: col(D.diff.ds, Float64Array), dt: col(D.diff.dt, Float64Array),
    inb: col(D.diff.inb, Int32Array), dsm: D.diff.ms ? col(D.diff.dsm, Float64Array) : null,
    dtm: D.diff.ms ? col(D.diff.dtm, Float64Array) : null} : null;
  var N = DEP.length, ROW = D.row;
  var canvas = doc.getElementById("fg-canvas"), wrap = doc.getElementById("fg-wrap");
  var topBar = doc.querySelector(".top"), live = doc.getElementById("fg-live");
  var tipEl = doc.getElementById("fg-tip");
  var status = doc.getElementById("fg-status");
  var reset = doc.getElementById("fg-reset");
  var input = doc.getElementById("fg-search");
  // Frames come in depth-first pre-order: parents and subtree ends from the depths alone.
  var parent = new Int32Array(N), end = new Int32Array(N), stack = [];
  for (var i = 0; i < N; i++) {
    while (stack.length && DEP[stack[stack.length - 1]] >= DEP[i]) end[stack.pop()] = i;
    parent[i] = stack.length ? stack[stack.length - 1] : -1;
    stack.push(i);
  }
  while (stack.length) end[stack.pop()] = N;

  var zoomed = 0, query = "";
  // Frame positions and widths (ms) of all tracks, or of the one chosen in the selector:
  // one track's frames keep the merged graph's order, each starting where its earlier
  // siblings end, so the picture changes in width only.
  var X = X0, Wd = W0, trackNo = -1, TW = null;
  function useTrack(k) {
    trackNo = k;
    applyWidths();
  }
  // The drawn frames' widths of the selection (a range's, else the chosen track's, else
  // all), each frame placed after its earlier siblings.
  function applyWidths() {
    var k = trackNo;
    kidW = null;
    if (SEL.range && !FT) {
      Wd = new Float64Array(N);
      for (var j = 0; j < N; j++) Wd[j] = TN[j] >= 0 ? SEL.tot[TN[j]] : SEL.total;
    } else if (k < 0 || !D.tw) { X = X0; Wd = W0; return; }
    else {
      if (!TW) TW = D.tw.map(function (b) { return col(b, Float64Array); });
      Wd = TW[k];
    }
    X = new Float64Array(N);
    var next = new Float64Array(N);
    for (var i = 1; i < N; i++) {
      var p = parent[i];
      X[i] = next[p];
      next[p] += Wd[i];
      next[i] = X[i];
    }
  }
  function width() {
    var w = wrap.clientWidth;
    return w > 200 ? w : D.width;
  }
  var charW = D.charW;
  // Bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE, the isolates U+2066-2069, the
  // marks...) reorder the text after them: a name holding one draws reversed and can pass
  // for another name. Trace content is hostile, so wherever a name or a script's text is
  // shown (labels, tooltips, tables, headings) they are shown as escapes ("\u202e"); the
  // data and the search keep the names exact.
  var BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  function vis(s) {
    return String(s).replace(BIDI, function (c) { return "\\u" + c.charCodeAt(0).toString(16); });
  }
  function label(name, px) {
    name = vis(name);
    var fit = Math.floor((px - 6) / charW);
    if (fit < 3) return "";
    return name.length <= fit ? name : name.slice(0, fit - 1) + "\u2026";
  }
  // ---- layout: each frame's box for the zoom window, rows for painting and hit tests ----
  // The zoom is a window [win0, win1] (ms) on the graph: a frame's own extent (a click), or
  // that of a frame laid out on zoom. `zoomed` is the drawn frame whose subtree holds the
  // window; `winD` the depth of the frame that made it. A frame is drawn where it overlaps
  // the window (at one depth, frames do not overlap, so above winD that is the window's
  // ancestors, below it its descendants); one that covers more than the window, or sits
  // above the window's frame, is an ancestor: full width and faded.
  var MAXTHIN = 30000;
  var win0 = 0, win1 = 0, winD = 0;
  function zoomTo(i) { zoomed = i; win0 = X[i]; win1 = X[i] + Wd[i]; winD = DEP[i]; }
  var LD = new Int32Array(N + MAXTHIN), GX = new Float64Array(N + MAXTHIN), GW = new Float64Array(N + MAXTHIN);
  var VIS = new Uint8Array(N + MAXTHIN), FADE = new Uint8Array(N + MAXTHIN), TFILL = new Int32Array(MAXTHIN);
  LD.set(DEP);
  var NV = N, thin = [], rows = [], nDrawn = 0, Hcur = D.height, laidOut = "";
  var FILLS = D.fills.slice(), fillIx = {};
  FILLS.forEach(function (f, k) { fillIx[f] = k; });
  var HIT = "hsl(300,80%,62%)", HITF = FILLS.length;
  FILLS.push(HIT);
  function layout() {
    var W = width(), z = zoomed;
    if (!(win1 > win0)) { win0 = X[z]; win1 = X[z] + Wd[z]; winD = DEP[z]; }
    var key = [W, z, win0, win1, winD, trackNo].join(" ");
    if (key === laidOut) { paint(); return; }
    laidOut = key;
    var span = win1 - win0, eps = span * 1e-9, scale = (W - 2 * D.pad) / (span || 1);
    for (var i = 0; i < N; i++) {
      VIS[i] = 0;
      var a0 = Math.max(X[i], win0), a1 = Math.min(X[i] + Wd[i], win1);
      if (a1 - a0 <= eps) continue;
      var w = (a1 - a0) * scale;
      if (w < 0.1) continue;
      VIS[i] = 1; GX[i] = D.pad + (a0 - win0) * scale; GW[i] = w;
      FADE[i] = DEP[i] < winD || X[i] < win0 - eps || X[i] + Wd[i] > win1 + eps ? 1 : 0;
    }
    layoutThin(scale);
    // Rows: the drawn frames of each depth, left to right (pre-order keeps a row in x
    // order; frames laid out on zoom are merged in by position).
    rows = [];
    var maxD = 0, mixed = {};
    nDrawn = 0;
    for (i = 0; i < NV; i++) {
      if (!VIS[i]) continue;
      nDrawn++;
      var d = LD[i];
      (rows[d] || (rows[d] = [])).push(i);
      if (d > maxD) maxD = d;
      if (i >= N) mixed[d] = true;
    }
    for (var dm in mixed) rows[dm].sort(function (a, b) { return GX[a] - GX[b]; });
    // Laid-out frames deeper than any drawn one make the graph taller (the roots stay at
    // the bottom).
    Hcur = Math.max(D.height, (maxD + 1) * ROW);
    wrap.style.height = Hcur + "px";
    canvas.setAttribute("data-frames", String(nDrawn));
    if (reset) reset.style.visibility = zoomed || win0 > X[0] + eps || win1 < X[0] + Wd[0] - eps ? "visible" : "hidden";
    countHits();
    paint();
  }
  // ---- zoom lays out again what was too thin to draw: the children each drawn frame lost
  // at generation time (below 0.1 px of the whole), from the whole call tree (fg-index),
  // placed after the drawn children (they were the narrowest) and down to 0.1 px of the
  // zoomed width, instead of leaving their time as a gap that reads as self time.
  var kidW = null, kStart = null, kList = null, kSorted = null, drawnAt = null, fillByName = null;
  function kidsOf(t, I) {
    var nn = I.parent.length;
    if (!kStart) {
      // Children lists of every node (node nn: the roots), by a counting sort on parent.
      kStart = new Int32Array(nn + 2); kList = new Int32Array(nn); kSorted = new Uint8Array(nn + 1);
      for (var c = 0; c < nn; c++) kStart[(I.parent[c] < 0 ? nn : I.parent[c]) + 1]++;
      for (c = 0; c <= nn; c++) kStart[c + 1] += kStart[c];
      var fill = kStart.slice(0, nn + 1);
      for (c = 0; c < nn; c++) kList[fill[I.parent[c] < 0 ? nn : I.parent[c]]++] = c;
      drawnAt = new Int32Array(nn).fill(-1);
      for (c = 1; c < N; c++) if (TN[c] >= 0) drawnAt[TN[c]] = c;
    }
    var k = t < 0 ? nn : t, s0 = kStart[k], s1 = kStart[k + 1];
    if (!kSorted[k]) {
      // Widest first, ties by node id: the order the drawing used.
      var part = Array.prototype.slice.call(kList.subarray(s0, s1));
      part.sort(function (x, y) { return (I.tot[y] - I.tot[x]) || (x - y); });
      kList.set(part, s0);
      kSorted[k] = 1;
    }
    return kList.subarray(s0, s1);
  }
  function thinFill(name) {
    if (!fillByName) {
      // A function drawn elsewhere keeps its colour.
      fillByName = Object.create(null);
      for (var q = N - 1; q >= 0; q--) fillByName[D.names[NM[q]]] = FL[q];
    }
    var f = fillByName[name];
    if (f !== undefined) return f;
    var h = hue(name);
    if (fillIx[h] === undefined) { fillIx[h] = FILLS.length; FILLS.push(h); }
    return fillIx[h];
  }
  function layoutThin(scale) {
    thin.length = 0;
    NV = N;
    // The whole graph: what was dropped is under 0.1 px already (no need to read the tree);
    // a range's frames were laid out for the whole recording, so its thin ones may be wide.
    if (!SEL.range && !zoomed && !(win0 > X[0] + 1e-9 * Wd[0]) && !(win1 < X[0] + Wd[0] * (1 - 1e-9))) return;
    var I = ftree();
    var TOT = I ? curTot(I) : null;
    if (!TOT) return;
    if (!kidW) {
      kidW = new Float64Array(N);
      for (var i = 1; i < N; i++) kidW[parent[i]] += Wd[i];
    }
    var minMs = 0.1 / scale, eps = (win1 - win0) * 1e-9, todo = [];
    for (i = zoomed; i < end[zoomed]; i++) {
      if (!VIS[i]) continue;
      // Children not drawn start where the drawn ones end.
      var ks = kidsOf(TN[i], I), cx = X[i] + kidW[i];
      for (var j = 0; j < ks.length; j++) {
        var c = ks[j];
        if (drawnAt[c] >= 0) continue;
        if (TOT[c] >= minMs) todo.push([c, LD[i] + 1, cx, i]);
        cx += TOT[c];
      }
    }
    while (todo.length && thin.length < MAXTHIN) {
      var it = todo.pop(), t = it[0], x0 = it[2];
      if (x0 + TOT[t] <= win0 + eps || x0 >= win1 - eps) continue;
      thin.push(it);
      var kk = kidsOf(t, I), cx2 = x0, more = [];
      for (j = 0; j < kk.length; j++) {
        if (TOT[kk[j]] >= minMs) more.push([kk[j], it[1] + 1, cx2, it[3]]);
        cx2 += TOT[kk[j]];
      }
      for (j = more.length - 1; j >= 0; j--) todo.push(more[j]);
    }
    for (j = 0; j < thin.length; j++) {
      var e = thin[j], a0 = Math.max(e[2], win0), a1 = Math.min(e[2] + TOT[e[0]], win1), k = N + j;
      LD[k] = e[1]; GX[k] = D.pad + (a0 - win0) * scale; GW[k] = (a1 - a0) * scale;
      VIS[k] = GW[k] >= 0.1 ? 1 : 0;
      FADE[k] = e[1] < winD || e[2] < win0 - eps || e[2] + TOT[e[0]] > win1 + eps ? 1 : 0;
      TFILL[j] = thinFill(I.fname[I.fn[e[0]]]);
    }
    NV = N + thin.length;
  }
  function thinTip(j) {
    var I = ftree(), t = thin[j][0], TOT = curTot(I), ks = kidsOf(t, I), sf = TOT[t];
    for (var k = 0; k < ks.length; k++) sf -= TOT[ks[k]];
    var f = I.fn[t], tot0 = Wd[0] > 0 ? Wd[0] : 1;
    return I.fname[f] + "\n" + I.floc[f] + "\ntotal " + ms(TOT[t]) + " ms (" + fixed(100 * TOT[t] / tot0, 1) +
      "%) \u00b7 self " + ms(Math.max(sf, 0)) + " ms (" + fixed(100 * Math.max(sf, 0) / tot0, 1) + "%)" +
      (curN(I) ? " \u00b7 " + curN(I)[t] + " sample" + (curN(I)[t] === 1 ? "" : "s") : "") +
      "\n(too thin to draw in the whole graph: laid out on zoom)";
  }
  function nameOfFrame(i) { var I = ftree(); return i < N ? D.names[NM[i]] : I.fname[I.fn[thin[i - N][0]]]; }
  function signed(v, d) { return (v < 0 || (v === 0 && 1 / v < 0) ? "-" : "+") + fixed(Math.abs(v), d); }
  // A drawn frame's tooltip, worded as the SVG picture's <title> (flame/frames.py) words it.
  function tipOf(i) {
    if (i >= N) return thinTip(i - N);
    var tot = D.total > 0 ? D.total : 1, w = W0[i], self = SELF[i], cnt = CNT[i];
    if (SEL.range && !FT) {
      // the range's numbers (the selector's track in it, when one is chosen; a transformed
      // tree's frames carry the range's own)
      tot = SEL.total > 0 ? SEL.total : 1; w = Wd[i];
      self = TN[i] >= 0 ? SEL.self[TN[i]] : 0; cnt = TN[i] >= 0 ? SEL.nTot[TN[i]] : SEL.count;
    }
    var s = D.names[NM[i]] + "\n" + D.locs[LC[i]] + "\ntotal " + ms(w) + " ms (" + fixed(100 * w / tot, 1) + "%)";
    if (i > 0) {
      s += " \u00b7 self " + ms(self) + " ms (" + fixed(100 * self / tot, 1) + "%) \u00b7 " +
        cnt + " sample" + (cnt === 1 ? "" : "s");
      if (DIFF) {
        var sd = signed(DIFF.ds[i], 2) + " pp", td = signed(DIFF.dt[i], 2) + " pp";
        if (DIFF.ms) {
          sd = signed(DIFF.dsm[i], 1) + " ms (" + sd + ")";
          td = signed(DIFF.dtm[i], 1) + " ms (" + td + ")";
        }
        s += DIFF.inb[i] ? "\nvs base: self " + sd + " \u00b7 total " + td :
          "\nnew: this call path is not in the base profile (" + td + ")";
      }
    }
    if (SEL.range) s += "\nin the range " + rangeWords(SEL.range);
    else if (trackNo >= 0) {
      s += "\n" + D.tracks[trackNo] + ": total " + ms(Wd[i]) + " ms (" +
        (Wd[0] > 0 ? fixed(100 * Wd[i] / Wd[0], 1) : "0.0") + "% of the track)";
    }
    return s;
  }
  // ---- painting: only the rows in the window, one path per colour ----
  // The canvas is as tall as the window (a graph thousands of rows deep would pass the
  // largest canvas there is) and moves down the graph's box as the page scrolls.
  var FONT_C = ROW - 5 + "px ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace";
  var measured = false, off = 0, viewH = 0, hovered = -1, focused = -1;
  function yOf(d) { return D.icicle ? d * ROW : Hcur - (d + 1) * ROW; }
  function hitOf(i) {
    if (i < N) return hits[i];
    return fnHits ? fnHits[ftree().fn[thin[i - N][0]]] : 0;
  }
  // Fill colours as bytes (the fills are hsl() strings from flame/colours.py, or the page's own).
  // Per fill id, 0xRRGGBB (-1: not worked out yet): a typed array, read for every frame
  // painted (a sparse [] of arrays cost a 3M-sample page's paint a third of its time).
  var RGB = null;
  function rgbOf(f) {
    if (!RGB || f >= RGB.length) {
      var grown = new Int32Array(Math.max(FILLS.length, f + 1) + 64).fill(-1);
      if (RGB) grown.set(RGB);
      RGB = grown;
    }
    if (RGB[f] >= 0) return RGB[f];
    var m = /hsl\((-?[\d.]+),\s*([\d.]+)%,\s*([\d.]+)%\)/.exec(FILLS[f]) || [0, 0, 0, 50];
    var h = ((+m[1] % 360) + 360) % 360 / 360, s = m[2] / 100, l = m[3] / 100;
    var q = l < 0.5 ? l * (1 + s) : l + s - l * s, p = 2 * l - q;
    function ch(t) {
      t = t < 0 ? t + 1 : t > 1 ? t - 1 : t;
      var v = t < 1 / 6 ? p + (q - p) * 6 * t : t < 1 / 2 ? q : t < 2 / 3 ? p + (q - p) * (2 / 3 - t) * 6 : p;
      return Math.round(v * 255);
    }
    return (RGB[f] = ch(h + 1 / 3) << 16 | ch(h) << 8 | ch(h - 1 / 3));
  }
  // Painting costs the window's pixels, not the frames: each visible row is one scanline of
  // device pixels, every frame adding its colour weighted by how much of each pixel it
  // covers (a frame far under a pixel wide is a faint sliver, as in the SVG), copied down
  // the row's height and put on the canvas at once. Thousands of rects or paths would cost
  // the browser a raster of each on every keystroke; one bitmap costs the same at any size.
  // Labels (the few frames wide enough for one) and outlines are canvas text and strokes.
  var img = null, accR, accG, accB, accA, line32;
  // A search's dimming, and the matches outlined at most: past that many on screen the
  // matches are most of the graph, and the dimming of the rest says it (20,000 outlines
  // cost the first keystroke 200 ms at 10M samples).
  var DIM = 0.22, MAXOUT = 2 * 1500;
  function paint() {
    if (view !== "flame") return;
    var W = width(), ratio = window.devicePixelRatio || 1;
    var head = topBar ? Math.max(topBar.getBoundingClientRect().bottom, 0) : 0;
    var wr = wrap.getBoundingClientRect();
    var h = Math.max(Math.min(Hcur, window.innerHeight - head), Math.min(Hcur, ROW * 4));
    off = Math.round(Math.min(Math.max(head - wr.top, 0), Math.max(Hcur - h, 0)));
    viewH = h;
    if (canvas.style.top !== off + "px") canvas.style.top = off + "px";
    var PW = Math.round(W * ratio), PH = Math.round(h * ratio);
    if (canvas.width !== PW || canvas.height !== PH) {
      canvas.width = PW; canvas.height = PH;
      canvas.style.width = W + "px"; canvas.style.height = h + "px";
    }
    var g = canvas.getContext("2d");
    if (!img || img.width !== PW || img.height !== PH) {
      img = g.createImageData(PW, PH);
      accR = new Float32Array(PW); accG = new Float32Array(PW); accB = new Float32Array(PW);
      accA = new Float32Array(PW); line32 = new Uint32Array(PW);
    }
    var px = new Uint32Array(img.data.buffer), labels = [], outlined = [];
    px.fill(0);
    // (ImageData bytes are R, G, B, A in memory: a little-endian word is A<<24|B<<16|G<<8|R)
    for (var d = 0; d < rows.length; d++) {
      var row = rows[d], y = yOf(d);
      if (!row || y + ROW <= off || y >= off + h) continue;
      var lo = PW, hi = 0;
      for (var k = 0; k < row.length; k++) {
        var i = row[k], w = GW[i];
        var x0 = GX[i] * ratio, x1 = (GX[i] + (w > 2 ? w - 0.6 : w)) * ratio;
        if (x1 <= 0 || x0 >= PW) continue;
        if (x0 < 0) x0 = 0;
        if (x1 > PW) x1 = PW;
        var hit = hitOf(i), c = rgbOf(hit ? HITF : (i < N ? FL[i] : TFILL[i - N])), a = FADE[i] ? 0.45 : 1;
        var cr = c >> 16, cg = c >> 8 & 255, cb = c & 255;
        // A search dims what does not match (its matches keep full colour and an outline).
        if (query && !hit) a *= DIM;
        else if (hit && outlined.length <= MAXOUT) outlined.push(i, y);
        var c0 = Math.floor(x0), c1 = Math.ceil(x1);
        if (c0 < lo) lo = c0;
        if (c1 > hi) hi = c1;
        for (var p = c0; p < c1; p++) {
          var cov = a * (Math.min(p + 1, x1) - Math.max(p, x0));
          accR[p] += cr * cov; accG[p] += cg * cov; accB[p] += cb * cov; accA[p] += cov;
        }
        if (w >= 3 * charW + 6) labels.push(i, y);
      }
      if (hi <= lo) continue;
      line32.fill(0);
      for (p = lo; p < hi; p++) {
        var al = accA[p];
        if (al > 0) {
          line32[p] = (Math.round(Math.min(al, 1) * 255) << 24 | Math.round(accB[p] / al) << 16 |
            Math.round(accG[p] / al) << 8 | Math.round(accR[p] / al)) >>> 0;
        }
        accR[p] = accG[p] = accB[p] = accA[p] = 0;
      }
      var y0 = Math.max(Math.round((y - off) * ratio), 0), y1 = Math.min(Math.round((y - off + ROW - 1) * ratio), PH);
      for (var yy = y0; yy < y1; yy++) px.set(line32, yy * PW);
    }
    g.putImageData(img, 0, 0);
    g.setTransform(ratio, 0, 0, ratio, 0, -off * ratio);
    g.font = FONT_C;
    if (!measured) {
      // Labels are cut to what fits their box in the font really used.
      charW = Math.max(D.charW, g.measureText("MMMMMMMMMM").width / 10);
      measured = true;
    }
    g.fillStyle = "#1d1d1f";
    g.textBaseline = "alphabetic";
    for (k = 0; k < labels.length; k += 2) {
      var t = label(nameOfFrame(labels[k]), GW[labels[k]]);
      if (t) g.fillText(t, GX[labels[k]] + 3, labels[k + 1] + ROW - 4.5);
    }
    if (outlined.length && outlined.length <= MAXOUT) {
      // Every match on screen outlined, one path: at least 3 px wide, so a match far under
      // a pixel (a function spread over thin paths) is still seen.
      g.beginPath();
      for (k = 0; k < outlined.length; k += 2) {
        var oi = outlined[k], ow = Math.max(GW[oi] > 2 ? GW[oi] - 0.6 : GW[oi], 3);
        g.rect(GX[oi] + 0.5, outlined[k + 1] + 0.5, ow - 1, ROW - 2);
      }
      g.strokeStyle = "#5a0f5f";
      g.lineWidth = 1;
      g.stroke();
    }
    [hovered, focused].forEach(function (j, n) {
      if (j < 0 || j >= NV || !VIS[j]) return;
      g.strokeStyle = n ? "#0b61c4" : "#1d1d1f";
      g.lineWidth = n ? 2 : 0.8;
      g.strokeRect(GX[j], yOf(LD[j]), Math.max(GW[j] > 2 ? GW[j] - 0.6 : GW[j], 1), ROW - 1);
    });
  }
  // The frame under a point of the canvas (client coordinates): its row, then a binary
  // search on the row's left edges.
  function frameAt(cx, cy) {
    var r = canvas.getBoundingClientRect(), x = cx - r.left, y = cy - r.top + off;
    if (y < 0 || y >= Hcur) return -1;
    var d = D.icicle ? Math.floor(y / ROW) : Math.ceil((Hcur - y) / ROW) - 1;
    return inRow(d, x);
  }
  function inRow(d, x) {
    var row = rows[d];
    if (!row || !row.length) return -1;
    var lo = 0, hi = row.length - 1;
    while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (GX[row[mid]] <= x) lo = mid; else hi = mid - 1; }
    var i = row[lo];
    return GX[i] <= x && x <= GX[i] + Math.max(GW[i], 0.5) ? i : -1;
  }
  // ---- search: each distinct name and location is tested once (lower-cased once), not
  // each frame; a query that extends the last one tests only the last one's matches. The
  // matched frames are painted in the search colour.
  var lowNames = D.names.map(function (v) { return v.toLowerCase(); });
  var lowLocs = D.locs.map(function (v) { return v.toLowerCase(); });
  var hits = new Uint8Array(N), fnHits = null;
  function countHits() {
    var n = 0;
    for (var i = 1; i < NV; i++) if (VIS[i] && hitOf(i)) n++;
    canvas.setAttribute("data-hits", String(query ? n : 0));
  }
  // The whole call tree (fg-index), parsed on first use: a search's share is taken over
  // it, so it is report's whatever was too thin to draw.
  var IX;
  function index() {
    if (IX !== undefined) return IX;
    var blk = doc.getElementById("fg-index");
    if (!blk) {
      // Not read yet (it follows this script in the file), or not in this file.
      if (doc.readyState !== "loading") IX = null;
      return null;
    }
    var J = JSON.parse(blk.textContent);
    var fres = col(J.fres, Int32Array), fline = col(J.fline, Int32Array), fcol = col(J.fcol, Int32Array);
    var floc = new Array(J.fname.length), nolo = {};
    J.nolo.forEach(function (k) { nolo[k] = true; });
    for (var k = 0; k < floc.length; k++) {
      // As FunctionKey.location spells it: url:line:column.
      floc[k] = nolo[k] ? "" : (fres[k] >= 0 ? J.res[fres[k]] : "(unknown)") +
        (fline[k] >= 0 ? ":" + fline[k] + (fcol[k] >= 0 ? ":" + fcol[k] : "") : "");
    }
    IX = {parent: col(J.parent, Int32Array), fn: col(J.fn, Int32Array), tot: col(J.tot, Float64Array),
      n: col(J.n, Int32Array), fname: J.fname, floc: floc,
      low: J.fname.map(function (v) { return v.toLowerCase(); }),
      lowLoc: floc.map(function (v) { return v.toLowerCase(); }),
      tt: J.tt ? J.tt.map(function (b) { return col(b, Float64Array); }) : null,
      // what the tables and transforms need of each function (viewer_tree.js)
      fres: fres, res: J.res, rsp: J.rsp, anon: J.anon, nostack: J.nostack, nolo: J.nolo,
      colorBy: J.colorBy, rhue: J.rhue,
      rep: J.rep ? col(J.rep, Uint8Array) : null};
    return IX;
  }
  // Each tree node's total ms in the selection: the range's, the chosen track's, or all.
  // (SEL is numbered as the index; a transformed tree, FT, was made from the range's own
  // times already.)
  function curTot(I) {
    if (SEL.range && I === IX) return SEL.tot;
    return trackNo < 0 ? I.tot : (I.tt ? I.tt[trackNo] : null);
  }
  // Each tree node's samples in the selection (null: the chosen track's are not kept).
  function curN(I) {
    if (SEL.range && I === IX) return SEL.nTot;
    return trackNo < 0 ? I.n : null;
  }

  // ---- the selection: which samples every view counts -----------------------------------
  // A time range [a, b) in ms from the recording's start (a sample counts when its time is
  // in it), chosen in the Time view or given by a link (#range=1200-2400), with the track
  // chosen in the selector. For a range, SEL holds its ms (`self`, `tot`: subtree sums) and
  // samples (`n`, `nTot`) per call-tree node (fg-index's numbering), `total` and `count`;
  // with none they are null and every view counts the whole recording. Views read SEL and
  // redraw when it changes (`onSelect`): a table added to the page registers the same way.
  var SEL = {range: null, key: "", track: -1, self: null, tot: null, n: null, nTot: null, total: 0, count: 0};
  var selWatch = [];
  function onSelect(fn) { selWatch.push(fn); }
  var SMP;  // the samples (fg-samples), inflated when a range is first asked for
  function bytes(b64) {
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(b64);
    var bin = atob(b64), u = new Uint8Array(bin.length);
    for (var k = 0; k < bin.length; k++) u[k] = bin.charCodeAt(k);
    return u;
  }
  function inflate(b64) {
    var st = new Blob([bytes(b64)]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Response(st).arrayBuffer().then(function (b) { return new Int32Array(b); });
  }
  var smpOn = null;  // (one reading at a time: a range asked for while it runs waits for it)
  function loadSamples() {
    if (SMP !== undefined) return Promise.resolve(SMP);
    if (smpOn) return smpOn;
    var blk = doc.getElementById("fg-samples");
    if (!blk || typeof DecompressionStream === "undefined" || !index()) {
      if (doc.readyState !== "loading") SMP = null;
      return Promise.resolve(null);
    }
    var J = JSON.parse(blk.textContent);
    return (smpOn = Promise.all(J.lanes.map(function (L) {
      return Promise.all([inflate(L.t), inflate(L.wd), inflate(L.node), L.c ? inflate(L.c) : null]).then(function (a) {
        // times and weights in whole microseconds (exact sums)
        var n = L.n, t = new Float64Array(n), w = new Float64Array(n), acc = L.t0 || 0, k;
        for (k = 0; k < n; k++) { acc += a[0][k]; t[k] = acc; }
        for (k = 0; k < n; k++) w[k] = (k + 1 < n ? t[k + 1] - t[k] : 0) + a[1][k];
        return {t: t, w: w, node: a[2], c: a[3]};
      });
    })).then(function (lanes) { SMP = {start: J.start, lanes: lanes}; smpOn = null; return SMP; }));
  }
  function firstAtOrAfter(t, v) {
    var lo = 0, hi = t.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (t[mid] < v) lo = mid + 1; else hi = mid; }
    return lo;
  }
  function computeSel(r) {
    var I = index(), nn = I.parent.length, self = new Float64Array(nn), n = new Float64Array(nn);
    var a = Math.round(r[0] * 1000), b = Math.round(r[1] * 1000);
    SMP.lanes.forEach(function (L, k) {
      if (trackNo >= 0 && k !== trackNo) return;
      for (var j = firstAtOrAfter(L.t, a), e = firstAtOrAfter(L.t, b); j < e; j++) {
        var nd = L.node[j];
        if (nd < 0) continue;
        self[nd] += L.w[j];
        n[nd] += L.c ? L.c[j] : 1;
      }
    });
    var tot = new Float64Array(nn), nTot = new Float64Array(nn), total = 0, count = 0, i;
    for (i = 0; i < nn; i++) { self[i] /= 1000; tot[i] = self[i]; nTot[i] = n[i]; }
    // Nodes come level by level, parents first: children add into parents from the end.
    for (i = nn - 1; i >= 0; i--) {
      var p = I.parent[i];
      if (p >= 0) { tot[p] += tot[i]; nTot[p] += nTot[i]; } else { total += tot[i]; count += nTot[i]; }
    }
    SEL.range = r; SEL.track = trackNo; SEL.self = self; SEL.tot = tot; SEL.n = n; SEL.nTot = nTot;
    SEL.total = total; SEL.count = count;
  }
  // "1200-2400" (ms from the recording's start) -> [1200, 2400]; null for anything else.
  function parseRange(v) {
    var m = /^\s*(\d+(?:\.\d+)?)\s*[-\u2013]\s*(\d+(?:\.\d+)?)\s*$/.exec(v || "");
    if (!m || !(+m[2] > +m[1])) return null;
    return [+m[1], +m[2]];
  }
  function rangeKey(r) { return r ? +r[0].toFixed(3) + "-" + +r[1].toFixed(3) : ""; }
  function rangeWords(r) { return dur(r[0]).replace(/ ms$/, "") + "\u2013" + dur(r[1]); }
  // Apply the range a link names (undefined: none): a Promise, settled once every view
  // counts it (the samples are inflated on the first range).
  function applyRange(v) {
    var r = parseRange(v), key = rangeKey(r);
    if (key === SEL.key && (!r || SEL.track === trackNo)) return Promise.resolve();
    if (!r) {
      SEL.range = null; SEL.key = ""; SEL.self = SEL.tot = SEL.n = SEL.nTot = null;
      selChanged();
      return Promise.resolve();
    }
    SEL.key = key;
    return loadSamples().then(function (S) {
      if (rangeKey(parseRange(params().range)) !== key) return;  // another came since
      if (!S) { SEL.key = ""; rangeBar("no samples in this page to select from"); return; }
      computeSel(r);
      selChanged();
    });
  }
  // Write the range into the link (the link is the state: Back returns to the last one).
  function setRange(r) {
    var p = params();
    if (r) p.range = rangeKey(r); else delete p.range;
    var out = [];
    for (var k in p) out.push(k + "=" + encodeURIComponent(p[k]).replace(/%2C/g, ","));
    location.hash = out.join("&");
  }
  // A link of this page: `s` and the range, when there is one.
  function withRange(s) { return SEL.key ? s + "&range=" + SEL.key : s; }
  var rangeEl = null;
  function rangeBar(note) {
    if (!rangeEl) {
      rangeEl = doc.createElement("div");
      rangeEl.id = "fg-range";
      var txt = doc.createElement("span"), btn = doc.createElement("button");
      btn.type = "button";
      btn.textContent = "Clear range";
      btn.addEventListener("click", function () { setRange(null); });
      rangeEl.appendChild(txt);
      rangeEl.appendChild(btn);
      // In the header's controls: the page below does not move when a range comes or goes.
      var ctl = doc.querySelector("header .controls");
      if (ctl) ctl.insertBefore(rangeEl, ctl.firstChild);
    }
    var on = !!SEL.range || !!note;
    rangeEl.hidden = !on;
    rangeEl.firstChild.textContent = note ? note : SEL.range ? "Range " + rangeWords(SEL.range) +
      " (" + SEL.count + " sample" + (SEL.count === 1 ? "" : "s") + ")" : "";
    rangeEl.title = SEL.range ? "Every view counts only the samples from " + rangeWords(SEL.range) +
      " after the recording's start: " + ms(SEL.total) + " ms, " + SEL.count + " samples" +
      (SEL.track >= 0 && D.tracks ? " of " + vis(D.tracks[SEL.track]) : "") : "";
    rangeEl.lastChild.hidden = !SEL.range;
    doc.body.setAttribute("data-range", SEL.key);
    // the tabs keep the range
    var tabs = doc.querySelectorAll("nav.tabs a[data-tab]");
    for (var k = 0; k < tabs.length; k++) tabs[k].setAttribute("href", "#" + withRange("view=" + tabs[k].getAttribute("data-tab")));
  }
  function selChanged() {
    // Transforms start again from the range's tree (or the whole one).
    CUR = null;
    TFMEMO = Object.create(null);
    if (TF.length && FT) { var T = currentTree(); if (T) useFrames(T); }
    applyWidths();
    if (!(Wd[zoomed] > 0)) zoomTo(0); else zoomTo(zoomed);
    laidOut = "";
    rangeBar();
    if (view === "flame") { search(input ? input.value : "", true); layout(); }
    selWatch.forEach(function (fn) { fn(); });
  }
  // Indices of `low` (and `lowLoc`) containing q; `prev` (the last query's matches, when q
  // extends it) is all that can still match.
  function matching(low, lowLoc, q, prev) {
    var out = [];
    if (prev) {
      for (var j = 0; j < prev.length; j++) {
        var k = prev[j];
        if (low[k].indexOf(q) >= 0 || (lowLoc && lowLoc[k].indexOf(q) >= 0)) out.push(k);
      }
    } else {
      for (k = 0; k < low.length; k++) {
        if (low[k].indexOf(q) >= 0 || (lowLoc && lowLoc[k].indexOf(q) >= 0)) out.push(k);
      }
    }
    return out;
  }
  var last = {q: "", names: null, locs: null, fns: null};
  // Per function of tree I: 1 where a node of it has time in T (I's totals, or a range's
  // or a track's); worked out once per tree and totals, not on every keystroke.
  var hasTime = {I: null, T: null, has: null};
  function fnsWithTime(I, T) {
    if (hasTime.I !== I || hasTime.T !== T) {
      var has = new Uint8Array(I.fname.length), F = I.fn;
      for (var i = 0; i < F.length; i++) if (T[i] > 0) has[F[i]] = 1;
      hasTime = {I: I, T: T, has: has};
    }
    return hasTime.has;
  }
  // `later`: the caller lays out and paints next (one paint, not two).
  function search(q, later) {
    var t0 = performance.now();
    query = (q || "").toLowerCase();
    var ext = last.q && query.indexOf(last.q) === 0;
    var nameHit = new Uint8Array(lowNames.length), locHit = new Uint8Array(lowLocs.length), k;
    var X_ = ftree(), fnHit = X_ ? new Uint8Array(X_.fname.length) : null;
    if (query) {
      last.names = matching(lowNames, null, query, ext ? last.names : null);
      last.locs = matching(lowLocs, null, query, ext ? last.locs : null);
      for (k = 0; k < last.names.length; k++) nameHit[last.names[k]] = 1;
      for (k = 0; k < last.locs.length; k++) locHit[last.locs[k]] = 1;
      if (X_) {
        last.fns = matching(X_.low, X_.lowLoc, query, ext ? last.fns : null);
        for (k = 0; k < last.fns.length; k++) fnHit[last.fns[k]] = 1;
      }
    }
    last.q = query;
    var sum = 0, count = 0, covered = 0, names = Object.create(null), nfn = 0;
    matches = [];
    matchAt = -1;
    for (var i = 0; i < N; i++) {
      var h = i > 0 && query && (nameHit[NM[i]] || locHit[LC[i]]) ? 1 : 0;
      hits[i] = h;
      if (!h || !(Wd[i] > 0)) continue;  // a frame the chosen track never ran
      count++;
      if (!names[NM[i]]) { names[NM[i]] = 1; nfn++; }
      // Nested matches (recursion) are inside an outer match: count their time once.
      if (i >= covered) { sum += Wd[i]; covered = end[i]; matches.push(i); }
    }
    // The matches to step through (n / Enter, N / shift+Enter): the outermost, widest first.
    matches.sort(function (x, y) { return (Wd[y] - Wd[x]) || (x - y); });
    var T = X_ ? curTot(X_) : null;
    if (query && T) {
      // Every node of the tree, parents first: a node under a match is inside it already.
      var P = X_.parent, F = X_.fn, nn = P.length, under = new Uint8Array(nn), has = fnsWithTime(X_, T);
      sum = 0;
      for (i = 0; i < nn; i++) {
        var p = P[i];
        if (p >= 0 && under[p]) { under[i] = 1; continue; }
        if (fnHit[F[i]]) { under[i] = 1; sum += T[i]; }
      }
      nfn = 0;
      for (var f = 0; f < fnHit.length; f++) if (fnHit[f] && has[f]) nfn++;
    }
    lastSearch = {q: q, nfn: nfn, share: Wd[0] > 0 ? (100 * sum / Wd[0]) : 0, sum: sum, count: count};
    fnHits = fnHit;
    countHits();
    if (!later) paint();
    searchStatus();
    // The benchmark reads the search's own work (matching, shares and the repaint).
    if (performance.measure) performance.measure("jsprof-search", {start: t0});
  }
  // The status line of a search: how many functions match (with samples in what is
  // counted: the range, the track), their share of the samples (each sample once), the
  // frames drawn, and which match the keys last zoomed to.
  var matches = [], matchAt = -1, lastSearch = null;
  function searchStatus() {
    if (!status || view !== "flame") return;
    var L = lastSearch;
    if (!L || !query) { status.textContent = ""; return; }
    status.textContent = "\u201c" + vis(L.q) + "\u201d: " + L.nfn + " function" + (L.nfn === 1 ? "" : "s") +
      ", " + L.share.toFixed(1) + " % of samples (" + L.sum.toFixed(1) + " ms; " + L.count + " frame" +
      (L.count === 1 ? "" : "s") + ")" + (matches.length ? matchAt >= 0 ? " \u00b7 match " + (matchAt + 1) + " of " +
      matches.length + " (n, N: next, previous)" : " \u00b7 n / Enter: zoom to each match" : "");
  }
  // Zoom to the next (step 1) or previous (-1) match, round the list.
  function stepMatch(step) {
    if (!query || !matches.length) return;
    matchAt = matchAt < 0 ? (step > 0 ? 0 : matches.length - 1) : (matchAt + step + matches.length) % matches.length;
    zoomInto(matches[matchAt]);
    // (a graph taller than the window: the match is scrolled to)
    var y = wrap.getBoundingClientRect().top + yOf(LD[matches[matchAt]]);
    if (y < 100 || y > window.innerHeight - ROW) window.scrollBy(0, y - window.innerHeight / 2);
    searchStatus();
    canvas.setAttribute("data-match", String(matches[matchAt]));
  }
  // ---- pointer and keyboard ----
  function zoomInto(i) {
    if (i < N) zoomTo(i);
    else {
      // Into a frame laid out on zoom: its extent, under the drawn frame it came from.
      var t = thin[i - N], I = ftree(), TOT = curTot(I);
      zoomed = t[3]; win0 = t[2]; win1 = t[2] + TOT[t[0]]; winD = t[1];
    }
    hovered = focused = -1;
    layout();
  }
  canvas.addEventListener("click", function (e) {
    var i = frameAt(e.clientX, e.clientY);
    if (i >= 0) zoomInto(i);
  });
  function say(i) {
    // The hovered or focused frame's words, for screen readers (DOM text).
    if (live) live.textContent = i >= 0 ? vis(shortLines(tipOf(i))).split("\n").join(". ") : "";
  }
  canvas.addEventListener("mousemove", function (e) {
    var i = frameAt(e.clientX, e.clientY);
    canvas.style.cursor = i >= 0 ? "pointer" : "";
    if (i !== hovered) { hovered = i; paint(); say(i); }
    if (i < 0) { if (tipEl) tipEl.style.display = "none"; return; }
    showTip(e, tipOf(i));
  });
  canvas.addEventListener("mouseleave", hideTip);
  // Arrow keys walk the drawn frames (left/right in a row; towards the leaves or the root),
  // Enter zooms into the focused one; its words go to the live region.
  function neighbour(i, key) {
    var d = LD[i], mid = GX[i] + GW[i] / 2, row = rows[d], k = row ? row.indexOf(i) : -1;
    if (key === "ArrowLeft") return k > 0 ? row[k - 1] : i;
    if (key === "ArrowRight") return k >= 0 && k + 1 < row.length ? row[k + 1] : i;
    var deeper = (key === "ArrowUp") !== !!D.icicle;
    if (!deeper) return d > 0 ? inRow(d - 1, mid) : i;
    var kids = rows[d + 1] || [];
    for (var j = 0; j < kids.length; j++) {
      var c = kids[j];
      if (GX[c] + GW[c] > GX[i] && GX[c] < GX[i] + GW[i]) return c;
    }
    return i;
  }
  function focusStart() {
    focused = VIS[zoomed] ? zoomed : 0;
    paint();
    say(focused);
  }
  canvas.addEventListener("focus", function () {
    // Focus from the keyboard shows where it is; a click's focus waits for a key.
    if (focused < 0 && !(canvas.matches && !canvas.matches(":focus-visible"))) focusStart();
  });
  canvas.addEventListener("blur", function () { focused = -1; paint(); });
  canvas.addEventListener("keydown", function (e) {
    var keys = ["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Enter", " "];
    if (focused < 0 && keys.indexOf(e.key) >= 0) {
      // The first key after a click (or a zoom) starts at the zoomed frame.
      e.preventDefault();
      focusStart();
      return;
    }
    if (focused < 0) return;
    if (e.key === "Enter" || e.key === " ") { e.preventDefault(); var f = focused; zoomInto(f); focused = VIS[f] ? f : 0; paint(); say(focused); return; }
    if (["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown"].indexOf(e.key) < 0) return;
    e.preventDefault();
    var n = neighbour(focused, e.key);
    if (n < 0) return;
    focused = n;
    // Keep the focused frame on screen.
    var y = yOf(LD[n]);
    if (y < off) window.scrollBy(0, y - off - ROW);
    else if (y + ROW > off + viewH) window.scrollBy(0, y + ROW - off - viewH + ROW);
    paint();
    say(n);
  });
  window.addEventListener("scroll", function () { if (view === "flame") paint(); }, {passive: true});
  if (reset) reset.addEventListener("click", function () { zoomTo(0); layout(); });
  function hideTip() {
    if (hovered >= 0) { hovered = -1; paint(); }
    if (tipEl) tipEl.style.display = "none";
  }
  var pending = 0;
  if (input) {
    input.addEventListener("input", function () {
      hideTip();
      // One search per pause in typing, not one per keystroke.
      if (pending) clearTimeout(pending);
      pending = setTimeout(function () {
        pending = 0;
        if (view === "flame") search(input.value); else if (views[view]) views[view].search(input.value);
      }, 30);
    });
  }
  doc.addEventListener("keydown", function (e) {
    if (e.key === "Escape") {
      hideTip();
      zoomTo(0);
      if (input) input.value = "";
      search("");
      if (view === "flame") layout();
      if (views[view]) views[view].search("");
    } else if (e.key === "/" && input && doc.activeElement !== input) {
      e.preventDefault();
      input.focus();
    } else if (view === "flame" && query && (e.key === "Enter" && doc.activeElement === input ||
               (e.key === "n" || e.key === "N") && doc.activeElement !== input)) {
      if (pending) { clearTimeout(pending); pending = 0; search(input.value); }
      e.preventDefault();
      stepMatch(e.shiftKey || e.key === "N" ? -1 : 1);
    }
  });
  window.addEventListener("resize", function () { if (view === "flame") layout(); });
  // For tests and tools: the frames drawn now, with their boxes (graph px; cx/cy: the
  // middle of the box in the window's coordinates, where a pointer would go: a whole pixel
  // inside the box where there is one, as mouse events carry whole pixels).
  function mid(x, w) {
    var c = Math.round(x + w / 2);
    return c >= x && c <= x + w ? c : x + w / 2;
  }
  window.jsprofFrames = function () {
    var r = canvas.getBoundingClientRect(), out = [];
    for (var i = 0; i < NV; i++) {
      if (!VIS[i]) continue;
      var y = yOf(LD[i]);
      out.push({i: i, name: nameOfFrame(i), x: GX[i], w: GW[i], depth: LD[i], y: y, h: ROW - 1,
        faded: !!FADE[i], hit: !!hitOf(i), thin: i >= N, fill: FILLS[i < N ? FL[i] : TFILL[i - N]],
        label: GW[i] >= 3 * charW + 6 ? label(nameOfFrame(i), GW[i]) : "",
        cx: mid(r.left + GX[i], GW[i]), cy: r.top + y - off + ROW / 2});
    }
    return out;
  };
  window.jsprofTip = function (i) { return vis(tipOf(i)); };  // as the tooltip shows it
  // The rows a table view (Bottom-up, Call tree) draws now.
  window.jsprofTableRows = function () {
    var v = views[view];
    return v && v.rows ? v.rows() : null;
  };
  // A link can carry a view, a search and a zoom: flame.html#view=flame&q=fib&z=12
  // (z: frame index), flame.html#view=sandwich&fn=parse.
  // Maps keyed by what a link says have no prototype: #view=constructor or __proto__
  // found Object's own members and broke the page.
  function params() {
    var p = Object.create(null);
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) {
        try { p[kv.slice(0, i)] = decodeURIComponent(kv.slice(i + 1)); } catch (err) { /* bad escape: ignore */ }
      }
    });
    return p;
  }
  var P = params();
  var trackSel = doc.getElementById("fg-track");
  if (trackSel && D.tracks && D.tracks.length > 1) {
    var opt = doc.createElement("option");
    opt.value = "-1";
    opt.textContent = "All " + D.tracks.length + " tracks";
    trackSel.appendChild(opt);
    D.tracks.forEach(function (name, k) {
      var o = doc.createElement("option");
      o.value = String(k);
      o.textContent = vis(name);
      trackSel.appendChild(o);
    });
    trackSel.hidden = false;
    trackSel.addEventListener("change", function () {
      hideTip();
      useTrack(+trackSel.value);
      if (SEL.range && SMP) { computeSel(SEL.range); applyWidths(); rangeBar(); selWatch.forEach(function (fn) { fn(); }); }
      zoomTo(zoomed);
      search(input ? input.value : "", true);
      layout();
    });
    var tk = P.track !== undefined ? D.tracks.indexOf(P.track) : -1;
    if (tk >= 0) { trackSel.value = String(tk); useTrack(tk); }
  }
  var views = Object.create(null), view = "flame";
  var M = null, viewMakers = Object.create(null);
  if (doc.getElementById("v-sandwich")) viewMakers.sandwich = sandwichView;
  if (doc.getElementById("v-time")) viewMakers.time = function (M) {
    return !M.fleetTime ? timeView(M) : M.fleetTime.url ? fetchedFleetTimeView(M) : fleetTimeView(M);
  };
  if (doc.getElementById("v-source")) viewMakers.source = sourceView;
  // The Bottom-up and Call tree tables (viewer_tables.js) read the current tree.
  var JV = window.JsprofViewer || {};
  ["bottomup", "calltree"].forEach(function (name) {
    if (!doc.getElementById("v-" + name) || !JV.callTreeView) return;
    viewMakers[name] = function () {
      if (!currentTree()) return null;
      var make = name === "bottomup" ? JV.bottomUpView : JV.callTreeView;
      var v = make({doc: doc, el: el, ms: ms, pct: pct, vis: vis, status: status, input: input,
        section: doc.getElementById("v-" + name), tree: currentTree, selected: null,
        menu: function (e, t) { openMenu(e.clientX, e.clientY, t); }});
      // A new selection (a range chosen, cleared, or come from the link after the table
      // was drawn) is a new tree: the table draws again. (The model's views register when
      // the model is read, which the tables never need.)
      onSelect(function () { if (views[name] === v && view === name) v.redraw(); });
      return v;
    };
  });
  // ---- transforms (viewer_transforms.js): a stack of them, kept in the link ----------------
  // The tree every view but Sandwich, Time and Source shows: the whole call tree
  // (fg-index) with the transforms applied in order. They are chosen from a frame's or a
  // row's context menu or by key, listed in a bar under the legend (a step clicked goes
  // back to it, Undo or Ctrl+Z takes the last off), and written into the URL hash as
  // `tf=` (the specs, one a line), so a link reproduces the view and Back undoes.
  // Under a range the transforms start from the range's tree: the index's nodes with the
  // range's own times (SEL), so every view of the tree counts the range.
  var FNS = null, BASE = null, TF = [], TFMEMO = Object.create(null), CUR = null, RANGED = null;
  function baseTree() {
    if (!BASE) {
      var I = index();
      if (!I || !JV.treeFromIndex) return null;
      FNS = new JV.Functions(I);
      BASE = JV.treeFromIndex(I, FNS);
    }
    if (!SEL.range) return BASE;
    var key = SEL.key + "/" + SEL.track;
    if (!RANGED || RANGED.selKey !== key) {
      RANGED = JV.finishTree({parent: BASE.parent, fn: BASE.fn, self: SEL.self, selfN: SEL.n, ts: null,
        fns: FNS, base: true});
      RANGED.selKey = key;
    }
    return RANGED;
  }
  function currentTree() {
    var B = baseTree();
    if (!B || !TF.length) return B;
    if (!CUR) {
      var t0 = performance.now();
      CUR = JV.applyTransforms(B, TF, TFMEMO);
      if (performance.measure) performance.measure("jsprof-transform", {start: t0});
    }
    return CUR.tree;
  }
  function canTransform() { return !DIFF && !!JV.applyTransforms && !!baseTree(); }
  // The Flame view's tree for search and zoom (IX's shape): the transformed one, or the index.
  var FT = null;
  function ftree() { return FT || index(); }
  // The drawn frames of the page as written, put back when the last transform goes.
  var ORIG = null;
  function saveFrames() {
    if (!ORIG) {
      ORIG = {DEP: DEP, X0: X0, W0: W0, NM: NM, LC: LC, FL: FL, SELF: SELF, CNT: CNT, TN: TN,
        names: D.names, locs: D.locs, total: D.total, height: D.height, FILLS: FILLS, fillIx: fillIx,
        HITF: HITF, TW: TW};
    }
  }
  function restoreFrames() {
    if (!ORIG || !FT) return;
    DEP = ORIG.DEP; X0 = ORIG.X0; W0 = ORIG.W0; NM = ORIG.NM; LC = ORIG.LC; FL = ORIG.FL;
    SELF = ORIG.SELF; CNT = ORIG.CNT; TN = ORIG.TN;
    D.names = ORIG.names; D.locs = ORIG.locs; D.total = ORIG.total; D.height = ORIG.height;
    FILLS = ORIG.FILLS; fillIx = ORIG.fillIx; HITF = ORIG.HITF; TW = ORIG.TW;
    FT = null;
    framesChanged();
  }
  // The frames of a transformed tree, laid out as flame/layout.py lays out the page's own.
  function useFrames(T) {
    saveFrames();
    var fns = T.fns, nf = fns.count();
    var L = JV.flameLayout(T, T.total * 0.1 / Math.max(D.width - 2 * D.pad, 1));
    var m = L.node.length, names = fns.name.slice(), locs = fns.loc.slice(), f, j;
    for (f = 0; f < nf; f++) if (fns.nostack[f]) locs[f] = "samples with no JavaScript on the stack";
    names.push("all");
    locs.push("every sample in the profile");
    var fills = [], fx = Object.create(null);
    function fillId(v) {
      if (fx[v] === undefined) { fx[v] = fills.length; fills.push(v); }
      return fx[v];
    }
    var grey = fillId("hsl(220,8%,78%)"), maxD = 0;
    NM = new Int32Array(m); LC = new Int32Array(m); FL = new Int32Array(m);
    SELF = new Float64Array(m); CNT = new Int32Array(m);
    // (each function's fill id worked out once, not once a frame)
    var fidOf = new Int32Array(nf).fill(-1), TF_ = T.fn, TS_ = T.self, TN_ = T.n, LN = L.node, LD_ = L.d;
    for (j = 0; j < m; j++) {
      var x = LN[j];
      if (LD_[j] > maxD) maxD = LD_[j];
      if (x < 0) { NM[j] = LC[j] = nf; FL[j] = grey; continue; }
      f = TF_[x];
      NM[j] = LC[j] = f;
      if (fidOf[f] < 0) fidOf[f] = fillId(fns.fillOf(f));
      FL[j] = fidOf[f];
      SELF[j] = TS_[x];
      CNT[j] = Math.round(TN_[x]);
    }
    DEP = L.d; X0 = L.x; W0 = L.w; TN = L.node;
    D.names = names; D.locs = locs; D.total = T.total; D.height = (maxD + 1) * ROW;
    TW = null;
    if (D.tw) {
      TW = D.tw.map(function (b, k) {
        var w = new Float64Array(m);
        if (!T.tt) return W0;  // (no per-track totals in the page: all tracks' widths)
        var all = 0, tk = T.tt[k];
        for (var r = 0; r < T.parent.length; r++) if (T.parent[r] < 0) all += tk[r];
        for (var q = 0; q < m; q++) w[q] = L.node[q] < 0 ? all : tk[L.node[q]];
        return w;
      });
    }
    fills.push(HIT);
    FILLS = fills; fillIx = fx; HITF = fills.length - 1; RGB = null;
    FT = {parent: T.parent, fn: T.fn, tot: T.tot, n: T.n, fname: fns.name, floc: fns.loc, low: fns.low,
      lowLoc: fns.lowLoc, tt: T.tt};
    framesChanged();
  }
  // After the frames changed: what is derived from them, and a fresh zoom.
  function framesChanged() {
    N = DEP.length;
    parent = new Int32Array(N); end = new Int32Array(N);
    var st = [];
    for (var i = 0; i < N; i++) {
      while (st.length && DEP[st[st.length - 1]] >= DEP[i]) end[st.pop()] = i;
      parent[i] = st.length ? st[st.length - 1] : -1;
      st.push(i);
    }
    while (st.length) end[st.pop()] = N;
    LD = new Int32Array(N + MAXTHIN); GX = new Float64Array(N + MAXTHIN); GW = new Float64Array(N + MAXTHIN);
    VIS = new Uint8Array(N + MAXTHIN); FADE = new Uint8Array(N + MAXTHIN);
    LD.set(DEP);
    NV = N; thin.length = 0; rows = [];
    lowNames = D.names.map(function (v) { return v.toLowerCase(); });
    lowLocs = D.locs.map(function (v) { return v.toLowerCase(); });
    hits = new Uint8Array(N); fnHits = null;
    last = {q: "", names: null, locs: null, fns: null};
    kidW = kStart = kList = kSorted = drawnAt = fillByName = null;
    RGB = null;
    hovered = focused = -1;
    laidOut = "";
    X = X0; Wd = W0;
    useTrack(trackNo);
    zoomTo(0);
  }
  // The transforms of a link's `tf` (one spec a line), applied when they differ from the
  // page's; every view that reads the current tree draws again.
  function applyTf(v) {
    var list = v ? String(v).split("\n").filter(function (s) { return s.trim(); }) : [];
    if (list.length && !canTransform()) return;
    // A link's steps past the limit are not applied (each one holds a whole tree): the bar
    // says how many.
    var over = list.length > JV.MAX_STEPS ? list.length - JV.MAX_STEPS : 0, said = TFOVER;
    TFOVER = over;
    if (over) list = list.slice(0, JV.MAX_STEPS);
    if (list.join("\n") === TF.join("\n")) { if (over !== said) tfBar(); return; }
    var t0 = performance.now();
    TF = list;
    CUR = null;
    if (!TF.length) TFMEMO = Object.create(null);
    var T = currentTree();
    if (!TF.length) restoreFrames(); else if (T) useFrames(T);
    tfBar();
    ["bottomup", "calltree"].forEach(function (k) { if (views[k] && views[k].redraw) views[k].redraw(); });
    if (view === "flame") { search(input ? input.value : "", true); layout(); }
    doc.body.setAttribute("data-transforms", String(TF.length));
    // The benchmark reads this: the transforms applied, the frames laid out and drawn.
    if (performance.measure) performance.measure("jsprof-transform-view", {start: t0});
  }
  // Write the transforms into the link (the view follows on hashchange).
  function setTf(list) {
    var p = params(), out = [];
    p.tf = list.join("\n");  // (empty: none; a link without tf keeps the page's)
    delete p.z;  // a frame number of another drawing
    for (var k in p) out.push(k + "=" + encodeURIComponent(p[k]));
    location.hash = out.join("&");
  }
  function pushTf(spec) { setTf(TF.concat([spec])); }
  var tfEl = null, TFOVER = 0;
  function tfBar() {
    if (!canTransform()) return;
    if (!tfEl) {
      tfEl = el("div", {id: "fg-transforms", "class": "tfbar"});
      var legend = doc.querySelector(".legend");
      if (legend && legend.parentNode) legend.parentNode.insertBefore(tfEl, legend.nextSibling);
    }
    tfEl.textContent = "";
    tfEl.appendChild(el("span", {"class": "tf-title"}, "Transforms:"));
    var crumb = el("button", {type: "button", "class": "tf-step" + (TF.length ? "" : " on"), "data-step": "0"},
      "Complete profile");
    crumb.addEventListener("click", function () { setTf([]); });
    tfEl.appendChild(crumb);
    var steps = CUR ? CUR.steps : [];
    TF.forEach(function (spec, k) {
      var s = steps[k] || {}, b = el("button", {type: "button", "data-step": String(k + 1),
        "class": "tf-step" + (k === TF.length - 1 ? " on" : "") + (s.error || !s.matched ? " bad" : ""),
        title: spec + (s.error ? "\n" + s.error : !s.matched ? "\nmatches nothing here: it changes nothing" : "")},
      (k + 1) + ". " + spec);
      b.addEventListener("click", function () { setTf(TF.slice(0, k + 1)); });
      tfEl.appendChild(el("span", {"class": "tf-sep"}, "\u203a"));
      tfEl.appendChild(b);
    });
    if (TF.length) {
      var undo = el("button", {type: "button", "class": "tf-undo", title: "Ctrl+Z"}, "Undo");
      undo.addEventListener("click", function () { setTf(TF.slice(0, -1)); });
      tfEl.appendChild(undo);
      tfEl.appendChild(el("span", {"class": "note"}, "(in Flame, Bottom-up and Call tree)"));
      if (TFOVER) {
        tfEl.appendChild(el("span", {"class": "note tf-over"}, TFOVER + " more in the link not applied (at most " +
          JV.MAX_STEPS + " transforms)"));
      }
    } else {
      tfEl.appendChild(el("span", {"class": "note"}, "right-click a frame or a table row (or press its key) to merge, focus, collapse or drop"));
    }
    // The ignore list: library code out of the way, by its scripts' URLs.
    var ign = el("input", {type: "text", id: "fg-ignore", placeholder: "Ignore scripts (regex on URL)",
      "aria-label": "Ignore list: a regular expression on script URLs", autocomplete: "off"});
    ign.addEventListener("keydown", function (e) {
      e.stopPropagation();
      if (e.key !== "Enter" || !ign.value.trim()) return;
      try { JV.parseSpec("ignore:" + ign.value); } catch (err) { ign.setCustomValidity(err.message); ign.reportValidity(); return; }
      pushTf("ignore:" + ign.value);
    });
    ign.addEventListener("input", function () { ign.setCustomValidity(""); });
    tfEl.appendChild(ign);
  }
  // The menu of a frame or a row: each transform of that function (or call node), its key.
  var MENU = [
    ["m", "Merge function", "merge", "name"],
    ["M", "Merge node only", "merge-node", "path"],
    ["f", "Focus on subtree", "focus-subtree", "path"],
    ["F", "Focus on function", "focus", "name"],
    ["c", "Collapse function", "collapse", "name"],
    ["C", "Collapse resource", "collapse-resource", "url"],
    ["s", "Focus on resource (script)", "focus-resource", "url"],
    ["r", "Collapse recursion", "collapse-recursion", "name"],
    ["R", "Collapse direct recursion only", "collapse-direct-recursion", "name"],
    ["h", "Hide repeating children", "hide-repeating", "path"],
    ["d", "Drop samples with this function", "drop", "name"],
    ["i", "Add its script to the ignore list", "ignore", "url"]
  ];
  // The spec of menu entry `e` for target {f, path: function numbers root first, or null}.
  function specFor(e, t) {
    var fns = currentTree().fns, f = t.f, r = fns.res[f];
    if (fns.nostack[f]) return null;
    if (e[3] === "name") return e[2] + ":" + JV.escapeName(fns.name[f]);
    if (e[3] === "path") return t.path ? e[2] + ":" + JV.pathSpec(t.path.map(function (g) { return fns.name[g]; })) : null;
    if (r < 0) return null;
    var url = fns.resUrl[r];
    if (e[2] === "ignore") return "ignore:^" + url.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$";
    return e[2] + ":" + JV.escapeName(url);
  }
  var menuEl = null, menuTarget = null;
  function closeMenu() { if (menuEl) { menuEl.remove(); menuEl = null; menuTarget = null; } }
  function openMenu(x, y, t) {
    closeMenu();
    if (!canTransform() || !t) return;
    var fns = currentTree().fns;
    menuTarget = t;
    menuEl = el("div", {id: "fg-menu", role: "menu"});
    // Up and down move between the entries (Enter picks one, Escape closes; a step's key
    // picks its entry).
    menuEl.addEventListener("keydown", function (e) {
      if (e.key !== "ArrowDown" && e.key !== "ArrowUp") return;
      e.preventDefault();
      var bs = Array.prototype.slice.call(menuEl.querySelectorAll("button:not([disabled])"));
      var k = bs.indexOf(doc.activeElement) + (e.key === "ArrowDown" ? 1 : -1);
      if (bs.length) bs[(k + bs.length) % bs.length].focus();
    });
    menuEl.appendChild(el("div", {"class": "menu-head"}, fns.name[t.f]));
    MENU.forEach(function (e) {
      var spec = specFor(e, t), b = el("button", {type: "button", role: "menuitem", "data-kind": e[2]});
      b.appendChild(el("span", {}, e[1]));
      b.appendChild(el("kbd", {}, e[0]));
      if (!spec) b.disabled = true;
      else {
        b.title = spec;
        b.addEventListener("click", function () { closeMenu(); pushTf(spec); });
      }
      menuEl.appendChild(b);
    });
    doc.body.appendChild(menuEl);
    var r = menuEl.getBoundingClientRect();
    menuEl.style.left = Math.max(4, Math.min(x, window.innerWidth - r.width - 4)) + "px";
    menuEl.style.top = Math.max(4, Math.min(y, window.innerHeight - r.height - 4)) + "px";
    var first = menuEl.querySelector("button:not([disabled])");
    if (first) first.focus();
  }
  // A key's transform of the target (null: not a transform key).
  function keyTf(key, t) {
    for (var k = 0; k < MENU.length; k++) {
      if (MENU[k][0] === key) return specFor(MENU[k], t);
    }
    return null;
  }
  // The Flame view's frame as a menu target: its function and call path.
  function frameTarget(i) {
    if (i <= 0 || i >= NV) return null;
    var I = ftree(), node = i < N ? TN[i] : thin[i - N][0];
    if (node < 0 || !I) return null;
    var path = [];
    for (var a = node; a >= 0; a = I.parent[a]) path.push(I.fn[a]);
    return {f: I.fn[node], path: path.reverse(), node: node};
  }
  canvas.addEventListener("contextmenu", function (e) {
    if (!canTransform()) return;
    var i = frameAt(e.clientX, e.clientY), t = frameTarget(i);
    if (!t) return;
    e.preventDefault();
    hideTip();
    openMenu(e.clientX, e.clientY, t);
  });
  doc.addEventListener("mousedown", function (e) { if (menuEl && !menuEl.contains(e.target)) closeMenu(); });
  doc.addEventListener("keydown", function (e) {
    if (menuEl && e.key === "Escape") { closeMenu(); e.stopImmediatePropagation(); return; }
    if (!canTransform() || e.altKey || e.metaKey && e.key !== "z") return;
    var tag = doc.activeElement && doc.activeElement.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
    if ((e.ctrlKey || e.metaKey) && e.key === "z") {
      if (TF.length) { e.preventDefault(); setTf(TF.slice(0, -1)); }
      return;
    }
    if (e.ctrlKey) return;
    // The menu's target; the frame with keyboard focus or under the pointer; a table's
    // selected row.
    var t = menuTarget;
    if (!t && view === "flame") t = frameTarget(focused >= 0 ? focused : hovered);
    else if (!t && views[view] && views[view].target) t = views[view].target();
    if (!t) return;
    var spec = keyTf(e.key, t);
    if (spec) { e.preventDefault(); closeMenu(); pushTf(spec); }
  }, true);
  // For tests and tools: the transforms' steps now, and every function's self and total
  // (ms and samples) in the current tree, as `report` counts them.
  window.jsprofTransforms = function () {
    return TF.map(function (spec, k) {
      var s = CUR && CUR.steps[k] || {};
      return {spec: spec, matched: !!s.matched, error: s.error || ""};
    });
  };
  // ... and its call paths: ms of the samples at each (names from the root, joined by
  // " > "), as tests/test_transforms.py's _paths lists a recording's.
  window.jsprofPaths = function () {
    var T = currentTree(), out = {}, memo = [];
    if (!T) return null;
    for (var i = 0; i < T.parent.length; i++) {
      var p = T.parent[i], name = T.fns.name[T.fn[i]];
      memo[i] = p < 0 ? name : memo[p] + " > " + name;
      if (T.self[i] > 0) out[memo[i]] = (out[memo[i]] || 0) + T.self[i];
    }
    return out;
  };
  window.jsprofFunctionTotals = function () {
    var T = currentTree();
    if (!T) return null;
    var ft = JV.functionTable(T), out = [];
    for (var f = 0; f < T.fns.count(); f++) {
      if (!(ft.totalN[f] > 0) && !(ft.total[f] > 0)) continue;
      out.push({name: T.fns.name[f], loc: T.fns.loc[f], self: ft.self[f], total: ft.total[f],
        selfN: ft.selfN[f], totalN: ft.totalN[f]});
    }
    return {total: T.total, rows: out};
  };
  // The model is parsed when a view first needs it: the flame graph opens without it.
  function getView(name) {
    if (views[name]) return views[name];
    if (!viewMakers[name]) return null;
    if (!M && name !== "bottomup" && name !== "calltree") {  // (the tables read the index)
      // The views' data follows the script in the file (the flame graph draws first).
      var modelEl = doc.getElementById("fg-model");
      if (!modelEl) return null;
      M = JSON.parse(modelEl.textContent);
      // (its node columns come packed)
      [["parent", Int32Array], ["fn", Int32Array], ["self", Float64Array], ["tot", Float64Array],
       ["tn", Int32Array]].forEach(function (c) {
        if (typeof M[c[0]] === "string") M[c[0]] = col(M[c[0]], c[1]);
      });
      rangeModel(M);
      onSelect(function () {
        rangeModel(M);
        if (view !== "flame" && views[view]) views[view].show(lastP);
      });
    }
    if (name === "time" && !M.time && !M.fleetTime) return null;
    var v = viewMakers[name](M);
    if (v) views[name] = v;
    return v;
  }
  var lastP = Object.create(null);
  function show(name, p) {
    lastP = p || Object.create(null);
    if (name !== "flame" && !getView(name)) name = "flame";
    hideTip();
    view = name;
    var secs = doc.querySelectorAll("main > section");
    for (var k = 0; k < secs.length; k++) secs[k].hidden = secs[k].getAttribute("data-v") !== name;
    var tabs = doc.querySelectorAll("nav.tabs a");
    for (k = 0; k < tabs.length; k++) {
      var on = tabs[k].getAttribute("data-tab") === name;
      tabs[k].className = on ? "on" : "";
      // (the view shown, said to a screen reader as the highlight says it to the eye)
      if (on) tabs[k].setAttribute("aria-current", "true"); else tabs[k].removeAttribute("aria-current");
    }
    if (status) status.textContent = "";
    if (trackSel && D.tracks && D.tracks.length > 1) trackSel.hidden = name !== "flame";
    if (name === "flame") {
      if (input) input.placeholder = "Search frames ( / )";
      search(input ? input.value : "", true);
      layout();
    } else {
      if (reset) reset.style.visibility = "hidden";
      views[name].show(p);
    }
    doc.body.setAttribute("data-view", name);
  }
  window.addEventListener("hashchange", function () {
    var p = params();
    // A link without `tf` (a tab, a table's link) keeps the transforms: they go back in.
    if (p.tf !== undefined) applyTf(p.tf);
    else if (TF.length) history.replaceState(null, "", "#" + location.hash.slice(1) + "&tf=" + encodeURIComponent(TF.join("\n")));
    show(p.view || "flame", p);
    applyRange(p.range);
  });
  // The model's numbers of the selection: a range's per function and per model node (the
  // whole recording's kept in M.whole), so every view that reads the model counts it.
  var fOfTree = null;
  function rangeModel(M) {
    var W = M.whole || (M.whole = {fself: M.fself, ftotal: M.ftotal, fselfN: M.fselfN,
      ftotalN: M.ftotalN, self: M.self, tot: M.tot, total: M.total});
    var I = index();
    if (!SEL.range || !M.tn || !I) {
      for (var k in W) M[k] = W[k];
      return;
    }
    var NF = M.fname.length, fs = new Float64Array(NF), ft = new Float64Array(NF);
    var fsn = new Float64Array(NF), ftn = new Float64Array(NF), nn = I.parent.length, i;
    if (!fOfTree) {
      fOfTree = new Int32Array(I.fname.length).fill(-1);
      for (i = 0; i < M.tf.length; i++) fOfTree[M.tf[i]] = i;
    }
    for (i = 0; i < nn; i++) {
      var f = fOfTree[I.fn[i]];
      if (f < 0 || !(SEL.nTot[i] > 0)) continue;
      fs[f] += SEL.self[i]; fsn[f] += SEL.n[i];
      if (!I.rep || !I.rep[i]) { ft[f] += SEL.tot[i]; ftn[f] += SEL.nTot[i]; }
    }
    M.fself = fs; M.ftotal = ft; M.fselfN = fsn; M.ftotalN = ftn;
    M.self = Float64Array.from(M.tn, function (t) { return SEL.self[t]; });
    M.tot = Float64Array.from(M.tn, function (t) { return SEL.tot[t]; });
    M.total = SEL.total;
  }
  zoomTo(0);
  var zi = parseInt(P.z, 10);
  if (zi > 0 && zi < N) zoomTo(zi);
  if (P.q && input) input.value = P.q;
  var marked = false;
  function drawn() {
    // The benchmark reads this mark: the first view is on screen.
    if (!marked && window.performance && performance.mark) performance.mark("jsprof-drawn");
    marked = true;
  }
  var first = P.view || "flame";
  doc.body.setAttribute("data-transforms", "0");
  if (P.tf) {
    // (the tree follows the script in the file: applied once the page is read)
    var at = function () { applyTf(P.tf); if (view !== "flame" && views[view]) views[view].show(P); };
    if (doc.readyState === "loading") doc.addEventListener("DOMContentLoaded", at); else at();
  } else {
    var bar = function () { tfBar(); };
    if (doc.readyState === "loading") doc.addEventListener("DOMContentLoaded", bar); else bar();
  }
  if (P.range) {
    // (the samples follow the script in the file: read once the page is)
    var ar = function () { applyRange(P.range); };
    if (doc.readyState === "loading") doc.addEventListener("DOMContentLoaded", ar); else ar();
  }
  if (first !== "flame" && doc.readyState === "loading") {
    // Another view needs its data, which the file holds after this script.
    doc.addEventListener("DOMContentLoaded", function () { show(first, P); drawn(); });
  } else {
    // A flame graph taller than the window opens at its roots, where reading starts (the
    // sticky header stays on screen).
    if (!D.icicle && wrap.getBoundingClientRect().top + D.height > window.innerHeight) {
      window.scrollTo(0, wrap.getBoundingClientRect().top + window.scrollY + D.height + 12 - window.innerHeight);
    }
    show(first, P);
    drawn();
  }
  // The whole tree is read once the page is, so the first keystroke of a search does not
  // wait for it; a search typed before then is counted again over it.
  var loaded = function () {
    setTimeout(function () {
      index();
      if (view === "flame" && query) search(input ? input.value : query);
    }, 0);
  };
  if (doc.readyState === "loading") doc.addEventListener("DOMContentLoaded", loaded);
  else loaded();
  // The script ran (tests read it from the rendered DOM).
  canvas.setAttribute("data-ready", "1");
  doc.body.setAttribute("data-ready", "1");

  // ---- shared drawing helpers ---------------------------------------------------------------

  // Text and titles shown are made visible (vis); data-* attributes and links keep the
  // exact names they carry.
  function el(tag, attrs, text) {
    var e = doc.createElement(tag);
    for (var a in attrs) {
      if (Object.prototype.hasOwnProperty.call(attrs, a)) e.setAttribute(a, a === "title" ? vis(attrs[a]) : attrs[a]);
    }
    if (text !== undefined) e.textContent = vis(text);
    return e;
  }
  function sel(tag, attrs) {
    var e = doc.createElementNS(SVGNS, tag);
    for (var a in attrs) if (Object.prototype.hasOwnProperty.call(attrs, a)) e.setAttribute(a, attrs[a]);
    return e;
  }
  // Fixed decimals as Python (and so `jsprof report`) prints them: an exact tie rounds to
  // even (334.25 -> 334.2), where toFixed would round it up. v is exactly halfway between
  // two d-decimal numbers iff v * 2^(d+1) is an odd integer (that product is exact).
  function fixed(v, d) {
    var t = v * Math.pow(2, d + 1);
    if (t === Math.floor(t) && Math.abs(t % 2) === 1) {
      var m = Math.pow(10, d), f = Math.floor(v * m);
      return ((f % 2 ? f + 1 : f) / m).toFixed(d);
    }
    return v.toFixed(d);
  }
  function ms(v) { return v >= 0.1 || v === 0 ? fixed(v, 1) : fixed(v, 3); }
  // A time axis's tick label: in ms, s or min by the ticks' step (a 17-minute recording's
  // ticks said "1000000.0 ms"), with the decimals the step needs and no more.
  function tick(t, step) {
    var u = step >= 60000 ? 60000 : step >= 1000 ? 1000 : 1, s = step / u;
    var dec = Math.max(0, Math.min(3, Math.ceil(-Math.log(s) / Math.LN10 - 1e-9)));
    return fixed(t / u, dec) + (u === 60000 ? " min" : u === 1000 ? " s" : " ms");
  }
  // A duration or a time since the start in words: ms under 10 s, else s, else min.
  function dur(v) {
    var a = Math.abs(v);
    if (a < 10000) return ms(v) + " ms";
    if (a < 600000) return fixed(v / 1000, 2) + " s";
    return fixed(v / 60000, 2) + " min";
  }
  // A tick step of about n ticks over span: 1, 2 or 5 times a power of ten in ms, or
  // whole seconds and minutes (1, 2, 5, 10, 15, 30) once the span is long.
  function tickStep(span, n) {
    var raw = span / n, step = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10));
    if (raw / step > 5) step *= 5; else if (raw / step > 2) step *= 2;
    var nice = [1, 2, 5, 10, 15, 30];
    [60000, 1000].forEach(function (u) {
      if (raw < u || step % u === 0 && nice.indexOf(step / u) >= 0) return;
      for (var k = 0; k < nice.length; k++) if (nice[k] * u >= raw) { step = nice[k] * u; return; }
    });
    return step;
  }
  function pct(v, tot) { return tot > 0 ? fixed(100 * v / tot, 1) : "0.0"; }
  function hue(name) {
    var h = 0;
    for (var k = 0; k < name.length; k++) h = (h * 31 + name.charCodeAt(k)) | 0;
    h = h >>> 0;
    return "hsl(" + (8 + h % 44) + "," + (70 + (h >> 8) % 20) + "%," + (58 + (h >> 16) % 12) + "%)";
  }
  // A trace's names can be any length (a 100,000-character name made a tooltip 21,000 px
  // tall, its numbers off-screen): a line past TIP_LINE characters is cut in its middle.
  var TIP_LINE = 400;
  function shortLines(text) {
    return text.split("\n").map(function (s) {
      return s.length <= TIP_LINE ? s : s.slice(0, 280) + " \u2026 " + s.slice(-80) +
        " (" + s.length + " characters)";
    }).join("\n");
  }
  function showTip(e, text) {
    if (!tipEl) return;
    tipEl.textContent = vis(shortLines(text));
    tipEl.style.display = "block";
    var r = tipEl.getBoundingClientRect();
    var left = e.clientX + 14, top = e.clientY + 16;
    if (left + r.width > window.innerWidth - 4) left = Math.max(4, e.clientX - r.width - 14);
    if (top + r.height > window.innerHeight - 4) top = Math.max(4, e.clientY - r.height - 12);
    tipEl.style.left = left + "px";
    tipEl.style.top = top + "px";
  }
  // The model's function named `name` (and at `loc`, when given): the widest of that name.
  function findFn(M, name, loc) {
    var best = -1;
    for (var f = 0; f < M.fname.length; f++) {
      if (M.fname[f] !== name || (loc && M.floc[f] !== loc)) continue;
      if (best < 0 || M.ftotal[f] > M.ftotal[best]) best = f;
    }
    return best;
  }
  // The search rule of every function list, as the Flame view's search matches frames: the
  // query (lower-cased) anywhere in the function's name or location.
  function fnMatches(M, f, q) {
    return !q || M.fname[f].toLowerCase().indexOf(q) >= 0 || M.floc[f].toLowerCase().indexOf(q) >= 0;
  }
  // The status line of a searched function list (Sandwich, Source): how many match.
  function listStatus(q, n, limit) {
    return q ? "\u201c" + vis(q) + "\u201d: " + n + " function" + (n === 1 ? "" : "s") +
      (n > limit ? " (first " + limit + " shown)" : "") : "";
  }
  // A model function's fill: the Flame view's rule (by script, or by name with
  // --color-by function; flame/colours.py's fill_rule), so a function has one colour in every view.
  function fnFill(M, f) {
    return M.ffill ? M.fills[M.ffill[f]] : hue(M.fname[f]);
  }
  function fnLink(view, M, f, text) {
    return el("a", {href: "#" + withRange("view=" + view + "&fn=" + encodeURIComponent(M.fname[f]) +
      "&loc=" + encodeURIComponent(M.floc[f]))}, text);
  }
  // A Time view's lane (either Time view's): its canvas sized to `w` CSS px by the lane's
  // height at the screen's pixel ratio, cleared; its context drawing in CSS px.
  function sizeLane(ln, w) {
    var c = ln.canvas, h = ln.height, ratio = window.devicePixelRatio || 1;
    c.width = w * ratio; c.height = h * ratio;
    c.style.width = w + "px"; c.style.height = h + "px";
    var g = c.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, w, h);
    return g;
  }
  // A merged tree (trie keyed by function) drawn as a flame: `up` puts the root at the
  // bottom (callers above), else at the top (callees below). Nodes: {f, v, kids: {f: node}}.
  var TRIE_LEVELS = 400;  // an SVG element per frame: a 10,000-level recursion stays usable
  function drawTrie(root, W, up, onPick, total) {
    var rows = [], maxD = 0, cut = false;
    (function walk(nd, d, x) {
      rows.push([nd, d, x]);
      if (d > maxD) maxD = d;
      var ks = [];
      for (var k in nd.kids) ks.push(nd.kids[k]);
      ks.sort(function (a, b) { return b.v - a.v; });
      var cx = x;
      for (var j = 0; j < ks.length; j++) {
        if (ks[j].v * W / (root.v || 1) >= 0.5) {
          if (d < TRIE_LEVELS) walk(ks[j], d + 1, cx);
          else cut = true;
        }
        cx += ks[j].v;
      }
    })(root, 0, 0);
    var H = (maxD + 1) * D.row, scale = (W - 2 * D.pad) / (root.v || 1);
    var s = sel("svg", {width: W, height: H});
    rows.forEach(function (r) {
      var nd = r[0], d = r[1], x = D.pad + r[2] * scale, w = nd.v * scale;
      var y = up ? H - (d + 1) * D.row : d * D.row;
      var name = nd.f < 0 ? "(thinner paths)" : M.fname[nd.f];
      var g = sel("g", {});
      var rect = sel("rect", {x: x.toFixed(2), y: y, width: Math.max(w > 2 ? w - 0.6 : w, 0).toFixed(2),
        height: D.row - 1, rx: 2, fill: nd.f < 0 ? "hsl(220,8%,86%)" : fnFill(M, nd.f)});
      var t = sel("text", {x: (x + 3).toFixed(2), y: (y + D.row - 4.5).toFixed(1)});
      t.textContent = label(name, w);
      g.appendChild(rect);
      g.appendChild(t);
      var tip = name + (nd.f >= 0 && M.floc[nd.f] ? "\n" + M.floc[nd.f] : "") + "\n" +
        ms(nd.v) + " ms (" + pct(nd.v, total) + "% of total)";
      g.addEventListener("mousemove", function (e) { showTip(e, tip); });
      g.addEventListener("mouseleave", function () { if (tipEl) tipEl.style.display = "none"; });
      if (nd.f >= 0) g.addEventListener("click", function () { onPick(nd.f); });
      s.appendChild(g);
    });
    if (!cut) return s;
    // Said where the levels would be: above the callers, below the callees.
    var out = doc.createDocumentFragment(), note = el("p", {"class": "note", "data-note": "cut"},
      (up ? "Callers" : "Callees") + " more than " + TRIE_LEVELS + " levels " + (up ? "above" : "below") +
      " are not drawn (the Flame view has the whole stacks).");
    if (up) out.appendChild(note);
    out.appendChild(s);
    if (!up) out.appendChild(note);
    return out;
  }

  // The chosen function's name, location, self and total (as `report` counts them).
  function fnHead(M, f) {
    var head = el("div", {"class": "panel", "data-panel": "function"});
    head.appendChild(el("h2", {}, M.fname[f]));
    head.appendChild(el("div", {"class": "note"}, (M.floc[f] ? M.floc[f] + " \u00b7 " : "") +
      "self " + ms(M.fself[f]) + " ms (" + pct(M.fself[f], M.total) + "%) \u00b7 total " +
      ms(M.ftotal[f]) + " ms (" + pct(M.ftotal[f], M.total) + "%)"));
    return head;
  }

  // ---- sandwich: functions table, callers above, callees below ------------------------------

  function sandwichView(M) {
    var sec = doc.getElementById("v-sandwich");
    var NF = M.fname.length, NN = M.parent.length;
    var kids = [], byFn = [];
    for (var f = 0; f < NF; f++) byFn.push([]);
    for (var n = 0; n < NN; n++) {
      kids.push([]);
      if (M.parent[n] >= 0) kids[M.parent[n]].push(n);
      byFn[M.fn[n]].push(n);
    }
    var sortBy = "self", filter = "", chosen = -1, built = false;
    var grid, tableBox, tbody, side, ths = {};
    function build() {
      built = true;
      grid = el("div", {"class": "sw-grid"});
      tableBox = el("div", {"class": "sw-table"});
      var table = el("table", {"class": "fn", "data-table": "functions"});
      var head = el("tr", {});
      [["self", "Self ms"], ["selfp", "Self %"], ["total", "Total ms"], ["totalp", "Total %"],
       ["name", "Function"], ["loc", "Location"]].forEach(function (c) {
        var th = el("th", {"data-sort": c[0], "class": c[0] === "name" || c[0] === "loc" ? "name" : ""}, c[1]);
        ths[c[0]] = th;
        th.addEventListener("click", function () {
          if (c[0] === "self" || c[0] === "selfp") sortBy = "self";
          else if (c[0] === "total" || c[0] === "totalp") sortBy = "total";
          else return;
          fill();
        });
        head.appendChild(th);
      });
      var thead = el("thead", {});
      thead.appendChild(head);
      table.appendChild(thead);
      tbody = el("tbody", {});
      table.appendChild(tbody);
      tableBox.appendChild(table);
      side = el("div", {"class": "sw-side"});
      grid.appendChild(tableBox);
      grid.appendChild(side);
      sec.appendChild(grid);
      tbody.addEventListener("click", function (e) {
        var tr = e.target;
        while (tr && tr.tagName !== "TR") tr = tr.parentNode;
        if (tr && tr.getAttribute("data-f") !== null) pick(+tr.getAttribute("data-f"));
      });
    }
    function order() {
      var a = M.fself, b = M.ftotal;
      if (sortBy === "total") { a = M.ftotal; b = M.fself; }
      var idx = [];
      for (var f = 0; f < NF; f++) {
        // (a range's table lists the functions that ran in it)
        if (fnMatches(M, f, filter) && (!SEL.range || M.ftotal[f] > 0 || M.fself[f] > 0)) idx.push(f);
      }
      idx.sort(function (x, y) { return (a[y] - a[x]) || (b[y] - b[x]) || (x - y); });
      return idx;
    }
    var LIMIT = 400;  // rows in the DOM at once; search narrows the rest
    function fill() {
      ths.self.textContent = "Self ms" + (sortBy === "self" ? " \u25BE" : "");
      ths.total.textContent = "Total ms" + (sortBy === "total" ? " \u25BE" : "");
      var idx = order(), frag = doc.createDocumentFragment();
      for (var k = 0; k < idx.length && k < LIMIT; k++) {
        var f = idx[k];
        var tr = el("tr", {"data-f": f, "class": f === chosen ? "sel" : ""});
        tr.appendChild(el("td", {"data-col": "self"}, ms(M.fself[f])));
        tr.appendChild(el("td", {}, pct(M.fself[f], M.total)));
        tr.appendChild(el("td", {"data-col": "total"}, ms(M.ftotal[f])));
        tr.appendChild(el("td", {}, pct(M.ftotal[f], M.total)));
        tr.appendChild(el("td", {"class": "name", "data-col": "name", title: M.fname[f]}, M.fname[f]));
        tr.appendChild(el("td", {"class": "loc", title: M.floc[f]}, M.floc[f]));
        frag.appendChild(tr);
      }
      tbody.textContent = "";
      tbody.appendChild(frag);
      if (status) {
        // (The functions the file leaves out are said with or without a search: the flame
        // view's search counts them, this table cannot list them.)
        var left = M.nfunctions > NF ? (M.nfunctions - NF) + " functions under 0.01% of the time are not in this file" : "";
        status.textContent = [filter ? listStatus(filter, idx.length, LIMIT) :
          (idx.length > LIMIT ? NF + " functions; the first " + LIMIT + " shown, search for the rest" : ""),
          left].filter(Boolean).join("; ");
      }
    }
    // The outermost calls of f: a recursive call's time is inside its outer call already.
    function outer(f) {
      return byFn[f].filter(function (n) {
        for (var a = M.parent[n]; a >= 0; a = M.parent[a]) if (M.fn[a] === f) return false;
        return true;
      });
    }
    function add(nd, f, v) {
      var c = nd.kids[f];
      if (!c) c = nd.kids[f] = {f: f, v: 0, kids: {}};
      c.v += v;
      return c;
    }
    function callers(f, tops) {
      var root = {f: f, v: M.ftotal[f], kids: {}}, got = 0;
      tops.forEach(function (n) {
        var nd = root;
        for (var a = M.parent[n]; a >= 0; a = M.parent[a]) nd = add(nd, M.fn[a], M.tot[n]);
        got += M.tot[n];
      });
      if (root.v - got > root.v * 1e-9) add(root, -1, root.v - got);
      return root;
    }
    function callees(f, tops) {
      var root = {f: f, v: M.ftotal[f], kids: {}}, got = 0;
      tops.forEach(function (n) {
        got += M.tot[n];
        var st = [[n, root]];
        while (st.length) {
          var it = st.pop(), ks = kids[it[0]], sum = 0;
          for (var j = 0; j < ks.length; j++) {
            sum += M.tot[ks[j]];
            st.push([ks[j], add(it[1], M.fn[ks[j]], M.tot[ks[j]])]);
          }
          // Children too thin to keep in the file: their time is not this frame's own.
          var thin = M.tot[it[0]] - M.self[it[0]] - sum;
          if (thin > M.tot[it[0]] * 1e-9 && thin > 1e-9) add(it[1], -1, thin);
        }
      });
      if (root.v - got > root.v * 1e-9) add(root, -1, root.v - got);
      return root;
    }
    function draw() {
      side.textContent = "";
      if (chosen < 0) {
        side.appendChild(el("p", {"class": "empty"}, "Choose a function in the table: its callers show above it and its callees below."));
        return;
      }
      var f = chosen, tops = outer(f), W = Math.max(side.clientWidth - 4, 300);
      var head = fnHead(M, f);
      if (viewMakers.source) head.appendChild(el("div", {"class": "links"})).appendChild(fnLink("source", M, f, "Source, line by line"));
      var up = el("div", {"class": "panel", "data-panel": "callers"});
      up.appendChild(el("h2", {}, "Callers (merged; " + M.fname[f] + " at the bottom)"));
      up.appendChild(drawTrie(callers(f, tops), W, true, pick, M.total));
      var down = el("div", {"class": "panel", "data-panel": "callees"});
      down.appendChild(el("h2", {}, "Callees (merged; " + M.fname[f] + " at the top)"));
      down.appendChild(drawTrie(callees(f, tops), W, false, pick, M.total));
      side.appendChild(head);
      side.appendChild(up);
      side.appendChild(down);
    }
    function pick(f) {
      // Through the hash, so the choice is a link and Back returns to the last one.
      location.hash = withRange("view=sandwich&fn=" + encodeURIComponent(M.fname[f]));
    }
    return {
      show: function (p) {
        if (!built) build();
        if (input) input.placeholder = "Search functions ( / )";
        filter = (input ? input.value : "").toLowerCase();
        chosen = p && p.fn !== undefined ? findFn(M, p.fn, p.loc) : chosen;
        fill();
        draw();
      },
      search: function (q) {
        filter = (q || "").toLowerCase();
        if (built) fill();
      }
    };
  }
  // ---- source: a function's lines with the self time of each, as `report --by line` --------

  function sourceView(M) {
    var sec = doc.getElementById("v-source"), S = null, chosen = -1, filter = "", LIMIT = 400;
    var byF = {}, text = [];
    function load() {
      var blk = doc.getElementById("fg-source");
      S = blk ? JSON.parse(blk.textContent) : {lineData: false, total: M.total, files: [], chunks: [], fns: []};
      S.files.forEach(function () { text.push({}); });
      S.chunks.forEach(function (c) {
        for (var k = 0; k < c[2].length; k++) text[c[0]][c[1] + k] = c[2][k];
      });
      S.fns.forEach(function (e) { byF[e[0]] = e; });
    }
    function pick(f) { location.hash = withRange("view=source&fn=" + encodeURIComponent(M.fname[f]) + "&loc=" + encodeURIComponent(M.floc[f])); }
    function list() {
      var box = el("div", {"class": "panel", "data-panel": "list"});
      box.appendChild(el("p", {"class": "note", "data-note": S.lineData ? "lines" : "nolines"}, S.lineData ?
        "Choose a function to see its source with the self time of each line." :
        (S.noLines ? S.noLines + " Choose a function to see its source where a source map carries it." :
        "This recording has no per-line data (the engine did not record which line ran): choose a function to see its source.")));
      var table = el("table", {"class": "fn"}), head = el("tr", {});
      ["Self ms", "Total ms", "Function", "Location"].forEach(function (h, k) {
        head.appendChild(el("th", {"class": k >= 2 ? "name" : ""}, h));
      });
      table.appendChild(head);
      var fs = S.fns.map(function (e) { return e[0]; }).filter(function (f) { return fnMatches(M, f, filter); });
      fs.sort(function (x, y) { return (M.fself[y] - M.fself[x]) || (M.ftotal[y] - M.ftotal[x]) || (x - y); });
      box.setAttribute("data-shown", String(fs.length));
      if (status) status.textContent = listStatus(filter, fs.length, LIMIT);
      if (filter && !fs.length) box.appendChild(el("p", {"class": "note", "data-note": "nomatch"}, "No function matches the search."));
      fs.slice(0, LIMIT).forEach(function (f) {
        var tr = el("tr", {"data-f": f});
        tr.appendChild(el("td", {}, ms(M.fself[f])));
        tr.appendChild(el("td", {}, ms(M.ftotal[f])));
        tr.appendChild(el("td", {"class": "name", title: M.fname[f]}, M.fname[f]));
        tr.appendChild(el("td", {"class": "loc", title: M.floc[f]}, M.floc[f]));
        tr.addEventListener("click", function () { pick(f); });
        table.appendChild(tr);
      });
      box.appendChild(table);
      return box;
    }
    // Why a function shows no source: one sentence.
    function why(f, e) {
      var name = M.fname[f], loc = M.floc[f], file = loc.replace(/:\d+(:\d+)?$/, "");
      if (!loc || (e && e[9] === "noscript")) {
        return name + " has no source to show: it is not a function of a script (the engine's own time or a native).";
      }
      if (e && e[9] === "outside") {
        return "No source for " + name + ": " + file + " is outside the trace's folder and the folder jsprof flame ran in, so it was not put in this page" +
          " (write it with `jsprof flame --embed-source DIR`, DIR holding the script).";
      }
      if (e && e[9] === "nomap") {
        return "No source for " + name + ": the collector keeps no scripts, and no source map of this release carries the text of " + file +
          " (upload maps with sourcesContent: `jsprof fleet sourcemaps upload`).";
      }
      if (e && e[9] === "cap") {
        return "The source of " + name + " is not in this file: the page holds at most 2 MB of source, spent on functions with more time.";
      }
      return "No source for " + name + ": " + file + " was not a local file when this page was written" +
        " (write it with `jsprof flame --embed-source DIR`, DIR holding the script" +
        (/^(https?|file):/.test(file) ? "" : ", or --sourcemap for a bundle") + ").";
    }
    function row(tb, ln, self, n, code, max) {
      var tr = el("tr", {"data-line": ln});
      var td = el("td", {"class": "ln"}, ln > 0 ? String(ln) : "?");
      tr.appendChild(td);
      var a = el("td", {"data-col": "self"}, self > 0 ? ms(self) : "");
      var b = el("td", {}, self > 0 ? pct(self, S.total) : "");
      var c = el("td", {"data-col": "samples"}, n > 0 ? String(n) : "");
      if (self > 0) {
        // Hotter lines redder: the share of the function's hottest line.
        var heat = "hsl(8,85%," + (96 - 30 * Math.min(self / (max || 1), 1)).toFixed(0) + "%)";
        a.style.background = b.style.background = c.style.background = heat;
        tr.className = "hot";
      }
      tr.appendChild(a); tr.appendChild(b); tr.appendChild(c);
      tr.appendChild(typeof code === "string" ? el("td", {"class": "code"}, code) : code);
      tb.appendChild(tr);
    }
    // A long line's window for this function (a minified script's line holds dozens):
    // c = [line, first column, text, line length, the frame's column or 0]. A "\u2026"
    // stands for each cut, the frame's column is marked; the text stays text.
    function cutCell(c) {
      var td = el("td", {"class": "code", "data-from": c[1]});
      var cs = Array.from(c[2]), m = c[4] - c[1];
      if (c[1] > 1) td.appendChild(el("span", {"class": "cut", title: (c[1] - 1) + " characters before"}, "\u2026"));
      if (c[4] > 0 && m >= 0 && m < cs.length) {
        td.appendChild(doc.createTextNode(vis(cs.slice(0, m).join(""))));
        td.appendChild(el("mark", {"class": "col", title: "column " + c[4]}, cs[m]));
        td.appendChild(doc.createTextNode(vis(cs.slice(m + 1).join(""))));
      } else {
        td.appendChild(doc.createTextNode(vis(c[2])));
      }
      var rest = c[3] - (c[1] - 1) - cs.length;
      if (rest > 0) td.appendChild(el("span", {"class": "cut", title: rest + " characters after"}, "\u2026"));
      return td;
    }
    function draw() {
      sec.textContent = "";
      if (chosen < 0) { sec.appendChild(list()); return; }
      var f = chosen, e = byF[f];
      var head = fnHead(M, f);
      var links = el("div", {"class": "links"});
      links.appendChild(fnLink("sandwich", M, f, "Callers and callees"));
      head.appendChild(links);
      sec.appendChild(head);
      var box = el("div", {"class": "panel", "data-panel": "source"});
      sec.appendChild(box);
      if (!S.lineData) {
        box.appendChild(el("p", {"class": "note", "data-note": "nolines"}, S.noLines ||
          "This recording has no per-line data (the engine did not record which line ran), so no line has a time."));
      }
      if (!e || e[1] < 0) box.appendChild(el("p", {"class": "note", "data-note": "nosource"}, why(f, e)));
      if (!e) return;
      // (the page keeps no line per sample: a range's numbers are the function's, above)
      if (SEL.range && S.lineData) {
        box.appendChild(el("p", {"class": "note", "data-note": "range"}, "The lines' times are the whole " +
          "recording's; the function's self and total above are the range's (" + rangeWords(SEL.range) + ")."));
      }
      var lines = e[4], mss = e[5], ns = e[6], at = {}, max = 0, sum = e[7], cnt = e[8];
      for (var k = 0; k < lines.length; k++) {
        at[lines[k]] = k;
        if (mss[k] > max) max = mss[k];
        sum += mss[k]; cnt += ns[k];
      }
      if (S.lineData) {
        box.appendChild(el("p", {"class": "note", "data-note": "sum"},
          "Self time by the line that was executing: " + ms(sum) + " ms in " + cnt + " sample" + (cnt === 1 ? "" : "s") +
          (e[1] >= 0 ? " \u00b7 " + S.files[e[1]] + ", lines " + e[2] + "\u2013" + e[3] : "") +
          ". A call's line is not recorded, so a line's time is its own, not its callees'."));
      }
      // Neither text nor timed lines (a fleet function without a map): the notes say why.
      if (e[1] < 0 && !lines.length && !(e[7] > 0 || e[8] > 0)) return;
      var table = el("table", {"class": "fn src", "data-table": "source"}), head2 = el("tr", {});
      ["Line", "Self ms", "Self %", "Samples", "Source"].forEach(function (h, k) {
        head2.appendChild(el("th", {"class": k === 4 ? "name" : ""}, h));
      });
      var thead = el("thead", {});
      thead.appendChild(head2);
      table.appendChild(thead);
      var tb = el("tbody", {});
      if (e[7] > 0 || e[8] > 0) row(tb, 0, e[7], e[8], "(line unknown: the engine or the source map could not place these samples)", max);
      if (e[1] >= 0) {
        var T = text[e[1]], gap = 0, cuts = {};
        (e[10] || []).forEach(function (c) { cuts[c[0]] = c; });
        for (var ln = e[2]; ln <= e[3]; ln++) {
          var t = cuts[ln] ? cutCell(cuts[ln]) : T[ln];
          if (t === undefined) { gap++; continue; }
          if (gap) { tb.appendChild(el("tr", {"class": "gap"})).appendChild(el("td", {colspan: 5}, "\u22ef " + gap + " line" + (gap === 1 ? "" : "s"))); gap = 0; }
          var j = at[ln];
          row(tb, ln, j === undefined ? 0 : mss[j], j === undefined ? 0 : ns[j], t, max);
        }
      } else {
        for (k = 0; k < lines.length; k++) row(tb, lines[k], mss[k], ns[k], "", max);
      }
      table.appendChild(tb);
      box.appendChild(table);
    }
    return {
      show: function (p) {
        if (!S) load();
        if (input) input.placeholder = "Search functions ( / )";
        filter = (input ? input.value : "").toLowerCase();
        chosen = p && p.fn !== undefined ? findFn(M, p.fn, p.loc) : -1;
        draw();
      },
      search: function (q) {
        filter = (q || "").toLowerCase();
        if (!S) return;
        // A search while one function's lines are shown goes back to the list it narrows
        // (through the hash, so Back returns to the function); the list is this view's
        // search result, as the Sandwich's table is its.
        if (chosen >= 0 && filter) location.hash = withRange("view=source");
        else if (chosen < 0) draw();
      }
    };
  }

  // ---- time: a chronological flame chart per track, markers and spans, zoom and range ----

  function timeView(M) {
    var sec = doc.getElementById("v-time"), T = M.time, built = false;
    var lanes = [], lo = Infinity, hi = -Infinity, v0 = 0, v1 = 1, selA = null, selB = null;
    var rangeBox, rangeLabel, filter = "";
    var MK = {gc: "hsl(275,55%,62%)", style: "hsl(185,55%,52%)", layout: "hsl(300,45%,66%)",
      paint: "hsl(120,45%,55%)"};
    // Past about 32,767 device pixels a canvas draws nothing at all (a 2,500-level recursion
    // was a blank lane), so a lane is a stack of canvases of TL_ROWS levels each (8,000 px,
    // within that limit up to a device pixel ratio of 4), every level drawn; a part is
    // drawn when it comes near the window (a 30,000-level lane is 60 of them: a draw costs
    // the two or three on screen).
    var TL_ROWS = 500;
    var ndepth = new Int32Array(M.parent.length);  // parents come first
    for (var q = 0; q < M.parent.length; q++) ndepth[q] = M.parent[q] >= 0 ? ndepth[M.parent[q]] + 1 : 1;
    // The boxes of the visible window: consecutive runs merged into one box per depth while
    // the path down to it is the same; at most one run starts per pixel (the others extend
    // what is drawn), so a draw costs the window's pixels times the depth, not the samples.
    function boxes(L) {
      var out = [], open = [], path = [];
      function close(from) {
        for (var d = open.length - 1; d >= from; d--) out.push([open[d][0], open[d][1], d, open[d][2]]);
        open.length = Math.min(open.length, from);
      }
      var t0s = L.t0, lo_ = 0, hi_ = t0s.length - 1;
      while (lo_ < hi_) { var mid = (lo_ + hi_ + 1) >> 1; if (t0s[mid] <= v0) lo_ = mid; else hi_ = mid - 1; }
      var px = (v1 - v0) / W(), lastPx = -Infinity;
      for (var r = lo_; r < t0s.length && t0s[r] <= v1; r++) {
        var t0 = t0s[r], t1 = L.t1[r], d = 0;
        var contiguous = r > lo_ && t0 - L.t1[r - 1] < 1e-6;
        var p = Math.floor((t0 - v0) / px);
        if (p === lastPx) {
          // Within a pixel already drawn: at most one run starts per pixel, however many
          // short runs (and gaps) the samples make there.
          if (contiguous) for (d = 0; d < open.length; d++) open[d][1] = t1;
          continue;
        }
        if (!contiguous) close(0);
        lastPx = p;
        path.length = 0;
        for (var a = L.n[r]; a >= 0; a = M.parent[a]) path.push(a);
        path.reverse();
        while (d < open.length && d < path.length && open[d][2] === path[d]) { open[d][1] = t1; d++; }
        close(d);
        for (; d < path.length; d++) open.push([t0, t1, path[d]]);
      }
      close(0);
      return out;
    }
    function index(ln) {
      ln.byDepth = [];
      ln.box.forEach(function (b) { (ln.byDepth[b[2]] = ln.byDepth[b[2]] || []).push(b); });
      ln.byDepth.forEach(function (a) { if (a) a.sort(function (x, y) { return x[0] - y[0]; }); });
    }
    function build() {
      built = true;
      var bar = el("div", {"class": "tl-bar"});
      var zoomSel = el("button", {type: "button"}, "Zoom to selection");
      var whole = el("button", {type: "button"}, "Whole recording");
      rangeLabel = el("span", {"class": "note"}, "");
      bar.appendChild(zoomSel);
      bar.appendChild(whole);
      bar.appendChild(rangeLabel);
      bar.appendChild(el("span", {"class": "note"},
        "wheel: zoom \u00b7 shift+wheel: pan \u00b7 drag: select a range \u00b7 double-click: all shown"));
      sec.appendChild(bar);
      var axis = el("canvas", {"class": "tl-axis", height: 20});
      sec.appendChild(axis);
      lanes.push({kind: "axis", canvas: axis, height: 20});
      T.lanes.forEach(function (L) {
        if (L.n.length) {
          var md = 1;
          for (var k = 0; k < L.n.length; k++) if (ndepth[L.n[k]] > md) md = ndepth[L.n[k]];
          lanes.push({kind: "samples", name: L.name, L: L, box: [], rows: md});
          lo = Math.min(lo, L.t0[0]);
          hi = Math.max(hi, L.t1[L.t1.length - 1]);
        }
        if (L.mk && L.mk.t0.length) {
          lanes.push({kind: "markers", name: L.name + " markers", L: L,
            box: L.mk.t0.map(function (t, k) { return [t, L.mk.t1[k], 0, L.mk.c[k]]; }), height: D.row});
        }
        // Instrumented calls (`sp`), then the page's windows (`sw`: long animation
        // frames with their script entries, interactions), a lane each.
        [L.sp].concat(L.sw || []).forEach(function (S) {
          if (!S || !S.t0.length) return;
          var md = 0, bs = S.t0.map(function (t, k) {
            if (S.d[k] > md) md = S.d[k];
            return [t, S.t1[k], S.d[k], S.f[k], S.tip ? S.tip[k] : null];
          });
          lanes.push({kind: "spans", name: L.name + " " + (S.title || "spans"), L: L, box: bs,
            rows: md + 1,
            // the lane's own windows (or calls), not their children (a frame's scripts)
            count: S.d.filter(function (d) { return d === 0; }).length});
          lo = Math.min(lo, Math.min.apply(null, S.t0.slice(0, 1000)));
          hi = Math.max(hi, Math.max.apply(null, S.t1.slice(-1000)));
        });
      });
      // 0 on the axis is the recording's start (a range's link counts from it), idle or not
      if (M.start !== undefined && M.start < lo) lo = M.start;
      if (M.end !== undefined && M.end > hi) hi = M.end;
      if (!(hi > lo)) { lo = 0; hi = 1; }
      v0 = lo; v1 = hi;
      lanes.forEach(function (ln) {
        if (ln.kind === "axis") return;
        var box = el("div", {"class": "lane", "data-lane": ln.name, "data-kind": ln.kind});
        if (ln.count !== undefined) box.setAttribute("data-count", String(ln.count));
        box.appendChild(el("div", {"class": "lane-name"}, ln.name + (ln.rows > TL_ROWS ? " (" + ln.rows +
          " levels)" : "")));
        ln.parts = [];
        for (var d0 = 0; d0 < (ln.rows || 1); d0 += TL_ROWS) {
          var part = {kind: ln.kind, name: ln.name, lane: ln, canvas: el("canvas", {}), d0: d0,
            height: Math.min(TL_ROWS, (ln.rows || 1) - d0) * D.row, drawn: false};
          box.appendChild(part.canvas);
          ln.parts.push(part);
          attach(part);
        }
        ln.canvas = ln.parts[0].canvas;
        sec.appendChild(box);
        index(ln);  // boxes by depth, sorted by start, for hit tests
      });
      if (lanes.length === 1) {
        // Only the axis: every sample was idle (no stack) and there are no markers or spans,
        // so the view says why it is blank (the Flame view draws such samples as "(idle)").
        sec.appendChild(el("p", {"class": "note", "data-note": "nolanes"}, "Nothing to draw over " +
          "time: no sample of this recording ran JavaScript (each was idle, with no stack), and " +
          "it holds no markers or spans."));
      }
      rangeBox = el("div", {"class": "panel", "data-panel": "range"});
      sec.appendChild(rangeBox);
      zoomSel.addEventListener("click", function () {
        if (selA !== null && selB > selA) { v0 = selA; v1 = selB; draw(); }
      });
      whole.addEventListener("click", function () { v0 = lo; v1 = hi; draw(); });
      window.addEventListener("resize", function () { if (view === "time") draw(); });
    }
    function W() { return Math.max(sec.clientWidth - 24, 300); }
    function tx(t) { return (t - v0) / (v1 - v0) * W(); }
    function xt(x) { return v0 + x / W() * (v1 - v0); }
    function nameOf(ln, b) {
      if (ln.kind === "samples") return M.fname[M.fn[b[3]]];
      if (ln.kind === "markers") return "(" + b[3] + ")";
      return T.spanNames[b[3]];
    }
    function fillOf(ln, b, name) {
      if (ln.kind === "markers") return MK[b[3]] || "#999";
      if (ln.kind === "samples") return fnFill(M, M.fn[b[3]]);
      return hue(name);
    }
    // For tests: the sample boxes drawn now, with their fill and where they are on screen.
    var drawnBoxes = [];
    window.jsprofTimeBoxes = function () {
      return drawnBoxes.map(function (b) {
        var r = b.canvas.getBoundingClientRect();
        return {lane: b.lane, name: b.name, fill: b.fill, w: b.x1 - b.x0, depth: b.depth,
          cx: r.left + (b.x0 + b.x1) / 2, cy: r.top + b.y + D.row / 2};
      });
    };
    function draw() {
      var w = W();
      drawnBoxes = [];
      lanes.forEach(function (ln) {
        if (ln.kind === "axis") { axis(sizeLane(ln, w), w); return; }
        if (ln.kind === "samples") { ln.box = boxes(ln.L); index(ln); }
        ln.parts.forEach(function (part) { drawPart(part, w); });
      });
      rangeLabel.textContent = "showing " + dur(v0 - lo).replace(/ ms$/, "") + " to " + dur(v1 - lo);
    }
    // One canvas of a lane: its levels d0 .. d0 + TL_ROWS, where it is near the window (the
    // first always); the others are sized (the page keeps its height) and drawn on scroll.
    function near(c) {
      var r = c.getBoundingClientRect(), h = window.innerHeight;
      return r.bottom > -h && r.top < 2 * h;
    }
    function drawPart(part, w) {
      var ln = part.lane, g = sizeLane(part, w);
      part.drawn = part.d0 === 0 || near(part.canvas);
      if (!part.drawn) return;
      g.font = FONT_CSS;
      g.textBaseline = "middle";
      for (var d = part.d0; d < part.d0 + TL_ROWS; d++) {
        var arr = ln.byDepth[d];
        if (!arr) continue;
        for (var k = 0; k < arr.length; k++) {
          var b = arr[k];
          if (b[1] < v0 || b[0] > v1) continue;
          var x0 = tx(b[0]), x1 = tx(b[1]);
          if (x1 - x0 < 0.3) continue;
          x0 = Math.max(x0, -1); x1 = Math.min(x1, w + 1);
          var name = nameOf(ln, b), y = (b[2] - part.d0) * D.row, fill = fillOf(ln, b, name);
          g.fillStyle = fill;
          if (ln.kind === "samples") drawnBoxes.push({lane: ln.name, name: name, x0: x0, x1: x1, y: y, fill: fill, canvas: part.canvas, depth: b[2]});
          g.fillRect(x0, y, Math.max(x1 - x0 - (x1 - x0 > 2 ? 0.6 : 0), 0.3), D.row - 1);
          var lab = label(name, x1 - x0);
          if (lab) { g.fillStyle = "#1d1d1f"; g.fillText(lab, x0 + 3, y + D.row / 2); }
        }
      }
      if (selA !== null && selB > selA) {
        g.fillStyle = "rgba(11,97,196,0.15)";
        g.fillRect(tx(selA), 0, tx(selB) - tx(selA), part.height);
      }
    }
    var scrolled = 0;
    window.addEventListener("scroll", function () {
      if (view !== "time" || !built || scrolled) return;
      scrolled = requestAnimationFrame(function () {
        scrolled = 0;
        var w = W();
        lanes.forEach(function (ln) {
          (ln.parts || []).forEach(function (part) { if (!part.drawn && near(part.canvas)) drawPart(part, w); });
        });
      });
    }, {passive: true});
    var FONT_CSS = D.row - 5 + "px ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace";
    function axis(g, w) {
      var span = v1 - v0, step = tickStep(span, Math.max(2, Math.min(12, w / 110))), ticks = [];
      g.font = "11px system-ui, sans-serif";
      g.fillStyle = "#6e6e73";
      g.strokeStyle = "#c8c8cc";
      for (var t = Math.ceil((v0 - lo) / step) * step; t + lo <= v1; t += step) {
        var x = tx(t + lo), text = tick(t, step);
        g.beginPath(); g.moveTo(x + 0.5, 12); g.lineTo(x + 0.5, 20); g.stroke();
        g.fillText(text, x + 3, 10);
        ticks.push(text);
      }
      // (what the ticks say, for tests: canvas text is not in the DOM)
      g.canvas.setAttribute("data-ticks", ticks.join("|"));
    }
    function hitBox(part, e) {
      var r = part.canvas.getBoundingClientRect(), d = part.d0 + Math.floor((e.clientY - r.top) / D.row);
      var arr = part.lane.byDepth[d], t = xt(e.clientX - r.left), loI = 0, hiI = arr ? arr.length - 1 : -1;
      if (!arr) return null;
      // The last box starting at or before t.
      while (loI < hiI) { var mid = (loI + hiI + 1) >> 1; if (arr[mid][0] <= t) loI = mid; else hiI = mid - 1; }
      var b = arr[loI];
      return b && b[0] <= t && t <= b[1] ? b : null;
    }
    var dragFrom = null;
    function attach(ln) {
      var c = ln.canvas;
      c.addEventListener("mousemove", function (e) {
        var r = c.getBoundingClientRect();
        if (dragFrom !== null) {
          var t = xt(e.clientX - r.left);
          selA = Math.min(dragFrom, t); selB = Math.max(dragFrom, t);
          draw();
          return;
        }
        var b = hitBox(ln, e);
        if (!b) { if (tipEl) tipEl.style.display = "none"; return; }
        var name = nameOf(ln, b), loc = ln.kind === "samples" ? M.floc[M.fn[b[3]]] : "";
        var when = ms(b[1] - b[0]) + " ms, from " + dur(b[0] - lo) + " to " + dur(b[1] - lo);
        // A window the page reported has its own words (DOM text, never markup).
        if (ln.kind === "spans" && b[4]) showTip(e, b[4] + "\n" + when);
        else showTip(e, name + (loc ? "\n" + loc : "") + "\n" + when);
      });
      c.addEventListener("mouseleave", function () { if (tipEl) tipEl.style.display = "none"; });
      // A double click selects all that is shown: the window's table, to its exact edges.
      c.addEventListener("dblclick", function () { dragFrom = null; select(v0, v1); });
      c.addEventListener("mousedown", function (e) {
        dragFrom = xt(e.clientX - c.getBoundingClientRect().left);
        selA = selB = null;
        e.preventDefault();
      });
      c.addEventListener("wheel", function (e) {
        e.preventDefault();
        var r = c.getBoundingClientRect(), span = v1 - v0;
        if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
          var dt = (e.shiftKey ? e.deltaY : e.deltaX) / W() * span;
          dt = Math.max(lo - v0, Math.min(hi - v1, dt));
          v0 += dt; v1 += dt;
        } else {
          var at = xt(e.clientX - r.left), f = Math.exp(e.deltaY * 0.002);
          var n0 = at - (at - v0) * f, n1 = at + (v1 - at) * f;
          if (n1 - n0 < 1e-3) return;
          v0 = Math.max(lo, n0); v1 = Math.min(hi, n1);
        }
        draw();
      }, {passive: false});
    }
    doc.addEventListener("mouseup", function () {
      if (dragFrom === null) return;
      dragFrom = null;
      if (selA !== null && selB - selA > (v1 - v0) / 2000) select(selA, selB);
      else if (SEL.range) { syncSel(); draw(); }
      else { selA = selB = null; draw(); rangeBox.textContent = ""; }
    });
    // The page's range (every view counts it): shaded here, its table below the lanes.
    var ranged = !!doc.getElementById("fg-samples");
    function syncSel() {
      if (SEL.range) { selA = lo + SEL.range[0]; selB = lo + SEL.range[1]; }
      else if (ranged) selA = selB = null;
    }
    // A range's table under the lanes: the functions `fs` that ran in it, most self time
    // first (then total), the first 50 of them, each with its share of `all` ms; `thin`:
    // the ms of functions too small for the model, said in the heading.
    function rangeFnTable(heading, fs, self, tot, all, thin) {
      fs.sort(function (x, y) { return (self[y] - self[x]) || (tot[y] - tot[x]) || (x - y); });
      rangeBox.textContent = "";
      rangeBox.appendChild(el("h2", {}, heading + (thin > 1e-6 ? " (" + ms(thin) +
        " ms of it in functions under 0.01% of the time, not listed)" : "")));
      var table = el("table", {"class": "fn"}), head = el("tr", {});
      ["Self ms", "Self %", "Total ms", "Total %", "Function", "Location"].forEach(function (h, k) {
        head.appendChild(el("th", {"class": k >= 4 ? "name" : ""}, h));
      });
      table.appendChild(head);
      fs.slice(0, 50).forEach(function (f) {
        var tr = el("tr", {"data-f": f});
        tr.appendChild(el("td", {}, ms(self[f])));
        tr.appendChild(el("td", {}, pct(self[f], all)));
        tr.appendChild(el("td", {}, ms(tot[f])));
        tr.appendChild(el("td", {}, pct(tot[f], all)));
        tr.appendChild(el("td", {"class": "name"}, M.fname[f]));
        tr.appendChild(el("td", {"class": "loc"}, M.floc[f]));
        table.appendChild(tr);
      });
      rangeBox.appendChild(table);
    }
    // The page's range: the model's per-function sums over the range's samples.
    function rangeTable() {
      rangeBox.textContent = "";
      if (!SEL.range) return;
      var fs = [], listed = 0;
      for (var f = 0; f < M.fname.length; f++) {
        if (M.ftotal[f] > 0 || M.fself[f] > 0) { fs.push(f); listed += M.fself[f]; }
      }
      rangeFnTable("From " + rangeWords(SEL.range) + ": " + ms(SEL.total) + " ms of samples (" + SEL.count + ")",
        fs, M.fself, M.ftotal, SEL.total, SEL.total - listed);
    }
    // The table of a time range: self and total per function over the samples in it (a
    // page without its samples: the lanes' runs, cut at the edges).
    function select(a, b) {
      if (ranged) { setRange([Math.max(a - lo, 0), b - lo]); return; }
      selA = a; selB = b;
      var self = {}, tot = {}, all = 0, thin = 0;
      lanes.forEach(function (ln) {
        if (ln.kind !== "samples") return;
        var L = ln.L;
        for (var r = 0; r < L.n.length; r++) {
          var d = Math.min(L.t1[r], b) - Math.max(L.t0[r], a);
          if (d <= 0) continue;
          all += d;
          // The function that ran: the run's own leaf where the drawn node (a kept
          // ancestor of a path too thin for the model) is not it; -1: none in the model.
          var n = L.n[r], seen = {}, lf = L.lf && L.lf[r] !== -2 ? L.lf[r] : M.fn[n];
          if (lf >= 0) self[lf] = (self[lf] || 0) + d;
          else thin += d;
          for (var x = n; x >= 0; x = M.parent[x]) {
            if (seen[M.fn[x]]) continue;
            seen[M.fn[x]] = true;
            tot[M.fn[x]] = (tot[M.fn[x]] || 0) + d;
          }
          if (lf >= 0 && !seen[lf]) tot[lf] = (tot[lf] || 0) + d;
        }
      });
      var fs = Object.keys(tot).map(Number);
      fs.forEach(function (f) { self[f] = self[f] || 0; });
      rangeFnTable("From " + ms(a - lo) + " to " + ms(b - lo) + " ms: " + ms(all) + " ms of samples",
        fs, self, tot, all, thin);
      draw();
    }
    return {
      show: function (p) {
        if (!built) build();
        if (input) input.placeholder = "Search frames ( / )";
        if (ranged) { syncSel(); rangeTable(); }
        // A range is chosen here: the samples are read meanwhile (10 M took seconds), not
        // when the drag ends.
        if (ranged && SMP === undefined) setTimeout(function () { if (view === "time") loadSamples(); }, 300);
        var a = parseFloat(p && p.t0), b = parseFloat(p && p.t1);
        if (b > a) { v0 = Math.max(lo, lo + a); v1 = Math.min(hi, lo + b); }
        draw();
      },
      search: function (q) { filter = q; }
    };
  }

  // ---- the collector's page: its fleet Time view read when its tab is first opened -----
  // M.fleetTime is {url}: GET url answers {fleetTime: the block a file holds, pin} (the
  // collector's /v1/query/flame_time, same origin, the dashboard's session; the URL pins
  // the graph's uploads, and pin.same false says the view could not be of those). Until then the
  // section says it is being read (aria-busy, a status line); an error is said there.
  function fetchedFleetTimeView(M) {
    var sec = doc.getElementById("v-time"), real = null, lastShown = null;
    var note = el("p", {"class": "note", role: "status", "data-note": "reading"},
      "Reading the Time view of these filters\u2026");
    sec.setAttribute("aria-busy", "true");
    sec.appendChild(note);
    fetch(M.fleetTime.url, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (r) {
        return r.json().then(function (d) {
          if (!r.ok || !d || !d.fleetTime) throw new Error((d && d.error) || "HTTP " + r.status);
          return d;
        }, function () { throw new Error("HTTP " + r.status); });
      })
      .then(function (d) {
        sec.removeChild(note);
        // The collector could not answer for the uploads the graph was drawn from (its
        // `pin`), or a prune took some of them since (pin.pruned): said above the lanes,
        // never shown as if it were the graph's.
        if (d.pin && (d.pin.same === false || d.pin.pruned)) {
          sec.appendChild(el("p", {"class": "note", role: "status", "data-note": "pin"},
            vis(String(d.pin.note || "This Time view is not of the graph's uploads."))));
        }
        M.fleetTime = d.fleetTime;
        real = fleetTimeView(M);
        sec.setAttribute("aria-busy", "false");
        if (view === "time") real.show(lastShown);
      }, function (err) {
        note.textContent = vis("The Time view could not be read: " + (err && err.message || err));
        note.setAttribute("data-note", "error");
        sec.setAttribute("aria-busy", "false");
      });
    return {
      show: function (p) { lastShown = p; if (real) real.show(p); },
      search: function (q) { if (real) real.search(q); }
    };
  }

  // ---- time of a fleet merge: time since each page's start, summed over page loads ------
  // No common clock: each page load's samples sit at their time since its navigation start,
  // summed per bucket (fleet/timecourse.py). A lane per function (its self time per bucket,
  // darker for a larger share of the bucket's sampled time), the sampled time itself, and
  // when long animation frames, interactions and LCP came; a range's table; the vitals
  // rows of the same selection; example uploads, whose own Time view has real times.

  function fleetTimeView(M) {
    var sec = doc.getElementById("v-time"), F = M.fleetTime, built = false, filter = "";
    var B = F.buckets, bw = F.width, lanes = [], selA = null, selB = null, dragFrom = null;
    var rangeBox, fnBox, NAMEW = 250, SHOWN = 30;
    var rows = F.fns.map(function (r) {
      var v = new Float64Array(B);
      for (var k = 0; k < r.b.length; k++) v[r.b[k]] = r.v[k];
      return {r: r, v: v};
    });
    function span(k) {
      return F.later && k === B - 1 ? "from " + ms(k * bw) + " ms on" : ms(k * bw) + "\u2013" + ms((k + 1) * bw) + " ms";
    }
    function W() { return Math.max(sec.clientWidth - NAMEW - 40, 200); }
    // Two functions of one name (two scripts, or two places in one) were two lanes of the
    // same label: such a lane says where its function is ("has42 (page11.html:20:17)").
    var seen = {};
    F.fns.forEach(function (r) { seen[r.name] = (seen[r.name] || 0) + 1; });
    function shown(r) {
      return seen[r.name] > 1 && r.loc ? r.name + " (" + r.loc.split("/").pop() + ")" : r.name;
    }
    function lane(parent, kind, name, height, values, tip, label) {
      var box = el("div", {"class": "flane", "data-lane": name, "data-kind": kind});
      box.appendChild(el("div", {"class": "fname", title: label || name}, label || name));
      var c = el("canvas", {});
      box.appendChild(c);
      parent.appendChild(box);
      var ln = {kind: kind, name: name, canvas: c, height: height, values: values, tip: tip};
      lanes.push(ln);
      c.addEventListener("mousemove", function (e) {
        var k = bucketAt(e);
        if (dragFrom !== null) {
          var kc = bucketAt(e, true);
          selA = Math.min(dragFrom, kc); selB = Math.max(dragFrom, kc);
          draw();
          return;
        }
        if (k < 0) { if (tipEl) tipEl.style.display = "none"; return; }
        showTip(e, ln.tip(k));
      });
      c.addEventListener("mouseleave", function () { if (tipEl) tipEl.style.display = "none"; });
      c.addEventListener("mousedown", function (e) {
        dragFrom = bucketAt(e, true);
        selA = selB = dragFrom;
        e.preventDefault();
      });
      return ln;
    }
    // The bucket under the pointer (-1: none; `clamp`: the nearest, for a drag past an end).
    function bucketAt(e, clamp) {
      var r = e.target.getBoundingClientRect(), k = Math.floor((e.clientX - r.left) / W() * B);
      if (clamp) return Math.max(0, Math.min(B - 1, k));
      return k >= 0 && k < B ? k : -1;
    }
    function fnLanes() {
      fnBox.textContent = "";
      lanes = lanes.filter(function (ln) { return ln.kind !== "function"; });
      var q = filter.toLowerCase(), n = 0;
      rows.forEach(function (x) {
        if (n >= SHOWN) return;
        if (q && x.r.name.toLowerCase().indexOf(q) < 0 && x.r.loc.toLowerCase().indexOf(q) < 0) return;
        n++;
        lane(fnBox, "function", x.r.name, D.row, x.v, function (k) {
          var v = x.v[k];
          return x.r.name + (x.r.loc ? "\n" + x.r.loc : "") + "\n" + span(k) + " since page start: " +
            ms(v) + " ms self, " + pct(v, F.bucketMs[k]) + "% of the " + ms(F.bucketMs[k]) +
            " ms sampled there\n" + ms(x.r.self) + " ms in all (" + pct(x.r.self, F.totalMs) + "%)";
        }, shown(x.r));
      });
      if (!n) fnBox.appendChild(el("p", {"class": "note"}, "No function matches the search."));
    }
    function build() {
      built = true;
      var more = F.uploads < F.uploadsAll ? " Read " + F.uploads + " of the " + F.uploadsAll +
        " matching uploads (an even spread): the lanes and the range's table count those; the vitals rows below count all." :
        F.timelineUploads < F.uploadsAll ? " The long frames, interactions and LCP rows are those of " + F.timelineUploads +
        " of the " + F.uploadsAll + " uploads (an even spread); the lanes count all." : "";
      if (F.samplesNonFinite) more += " " + F.samplesNonFinite + " sample" + (F.samplesNonFinite === 1 ? "" : "s") +
        " stored with a time that is not a finite number (not from a browser) are in no bucket: left out.";
      sec.appendChild(el("p", {"class": "note", "data-note": "fleet"},
        "No common clock: each of the " + F.pageLoads + " page load" + (F.pageLoads === 1 ? "" : "s") +
        " (" + F.uploads + " upload" + (F.uploads === 1 ? "" : "s") + ") is placed at its own time since navigation start, " +
        "and their samples are summed per " + ms(bw) + " ms (each in the bucket where it starts). " +
        "A lane per function: its self time in each bucket, darker for a larger share of what was sampled there. " +
        "The order of calls within one page load is not here: open an example upload's own Time view for that." + more));
      var axis = el("div", {"class": "flane", "data-kind": "axis"});
      axis.appendChild(el("div", {"class": "fname note"}, "since page start"));
      var ac = el("canvas", {});
      axis.appendChild(ac);
      sec.appendChild(axis);
      lanes.push({kind: "axis", canvas: ac, height: 20});
      var top = el("div", {});
      sec.appendChild(top);
      lane(top, "sampled", "sampled time", 2 * D.row, F.bucketMs, function (k) {
        return span(k) + " since page start: " + ms(F.bucketMs[k]) + " ms sampled in " +
          F.bucketLoads[k] + " page load" + (F.bucketLoads[k] === 1 ? "" : "s");
      });
      fnBox = el("div", {"data-panel": "functions"});
      sec.appendChild(fnBox);
      fnLanes();
      var bottom = el("div", {});
      sec.appendChild(bottom);
      lane(bottom, "long-frames", "long animation frames", 2 * D.row, F.longFrames.n, function (k) {
        return span(k) + ": " + F.longFrames.n[k] + " long animation frame" + (F.longFrames.n[k] === 1 ? "" : "s") +
          " started, " + ms(F.longFrames.blocking[k]) + " ms blocking in all";
      });
      lane(bottom, "interactions", "interactions", 2 * D.row, F.interactions.n, function (k) {
        return span(k) + ": " + F.interactions.n[k] + " interaction" + (F.interactions.n[k] === 1 ? "" : "s") +
          " started" + (F.interactions.n[k] ? ", the slowest " + ms(F.interactions.slowest[k]) + " ms" : "");
      });
      lane(bottom, "lcp", "largest contentful paint", 2 * D.row, F.lcp, function (k) {
        return span(k) + ": LCP of " + F.lcp[k] + " page load" + (F.lcp[k] === 1 ? "" : "s");
      });
      sec.appendChild(el("div", {"class": "tl-bar"})).appendChild(el("span", {"class": "note"},
        "drag across the lanes: that span's functions"));
      rangeBox = el("div", {"class": "panel", "data-panel": "range"});
      sec.appendChild(rangeBox);
      sec.appendChild(vitalsTable());
      sec.appendChild(examples());
      window.addEventListener("resize", function () { if (view === "time") draw(); });
    }
    function vitalsTable() {
      var box = el("div", {"class": "panel", "data-panel": "vitals"});
      box.appendChild(el("h2", {}, "What users waited for (as `jsprof fleet vitals` counts it)"));
      var t = el("table", {"class": "fn"}), head = el("tr", {});
      var cols = [["release", "Release"], ["route", "Route"], ["pageLoads", "Page loads"],
        ["interactions", "Interactions"], ["inpP75Ms", "INP p75 ms"], ["longFrames", "Long frames"],
        ["longFrameBlockingP75Ms", "Blocking p75 ms"], ["lcpP75Ms", "LCP p75 ms"]];
      cols.forEach(function (c, k) { head.appendChild(el("th", {"class": k < 2 ? "name" : ""}, c[1])); });
      t.appendChild(head);
      F.vitals.forEach(function (r) {
        var tr = el("tr", {});
        cols.forEach(function (c, k) {
          var v = r[c[0]];
          tr.appendChild(el("td", {"class": k < 2 ? "loc" : "", "data-col": c[0]},
            v === null || v === undefined ? "\u2013" : (typeof v === "number" && k >= 4 && c[0].indexOf("Ms") > 0 ? ms(v) : String(v))));
        });
        t.appendChild(tr);
      });
      box.appendChild(t);
      // what the clients counted and did not send: the p75s above are of what was sent
      var lost = {interactions: 0, longFrames: 0, unsampledPageLoads: 0, unsampledMs: 0,
        unsampledInteractions: 0, unsampledLongFrames: 0};
      F.vitals.forEach(function (r) {
        var d = r.leftOut || {};
        Object.keys(lost).forEach(function (k) { lost[k] += Number(d[k]) || 0; });
      });
      function n(k, what) { return lost[k] + " " + what + (lost[k] === 1 ? "" : "s"); }
      if (lost.interactions || lost.longFrames) {
        box.appendChild(el("p", {"class": "note", "data-note": "left-out"},
          "Left out by the clients (past their caps, or cut to fit a page's way out), not in " +
          "these p75s: " + n("interactions", "interaction") + ", " + n("longFrames", "long frame") + "."));
      }
      // the pieces profiling as their pages left, whose Profiler.stop() never resolved
      if (lost.unsampledPageLoads) {
        box.appendChild(el("p", {"class": "note", "data-note": "unsampled"},
          n("unsampledPageLoads", "page load") + " ended with " + (lost.unsampledMs / 1000).toFixed(1) +
          " s unsampled (the piece profiling as the page left: its samples never came; " +
          n("unsampledInteractions", "interaction") + " and " + n("unsampledLongFrames", "long frame") + " in it)."));
      }
      return box;
    }
    function examples() {
      var box = el("div", {"class": "panel", "data-panel": "examples"});
      box.appendChild(el("h2", {}, "Example uploads (their own Time view has real sample times)"));
      if (!F.examples.length) box.appendChild(el("p", {"class": "note"}, "No upload to show."));
      var ul = el("ul", {});
      F.examples.forEach(function (x) {
        var li = el("li", {});
        // (a page saved from the collector, `fleet flame --url`, has no collector to link to)
        if (x.href && /^https?:$/.test(location.protocol)) li.appendChild(el("a", {href: x.href + "#view=time", target: "_blank", rel: "noopener"}, x.id));
        else li.appendChild(el("code", {}, x.id));
        li.appendChild(doc.createTextNode(vis(" (release " + x.release + "): " + x.why)));
        ul.appendChild(li);
      });
      box.appendChild(ul);
      if (F.examples.length && !(F.examples[0].href && /^https?:$/.test(location.protocol))) {
        box.appendChild(el("p", {"class": "note"}, "On the collector, GET /v1/traces/ID/flame draws one upload."));
      }
      return box;
    }
    function draw() {
      var w = W(), cw = w / B;
      lanes.forEach(function (ln) {
        var h = ln.height, g = sizeLane(ln, w);
        if (ln.kind === "axis") { axis(g, w); return; }
        var k, max = 0;
        if (ln.kind === "function") {
          for (k = 0; k < B; k++) {
            var share = F.bucketMs[k] > 0 ? ln.values[k] / F.bucketMs[k] : 0;
            if (!(ln.values[k] > 0)) continue;
            g.fillStyle = "hsl(8,85%," + (93 - 55 * Math.sqrt(Math.min(share, 1))).toFixed(1) + "%)";
            g.fillRect(k * cw, 0, Math.max(cw - 0.5, 0.5), h - 1);
          }
        } else {
          for (k = 0; k < B; k++) if (ln.values[k] > max) max = ln.values[k];
          g.fillStyle = {sampled: "hsl(210,55%,62%)", "long-frames": "hsl(28,80%,58%)",
            interactions: "hsl(275,50%,62%)", lcp: "hsl(140,45%,50%)"}[ln.kind] || "#999";
          for (k = 0; k < B; k++) {
            if (!(ln.values[k] > 0)) continue;
            var bh = Math.max(1, (h - 2) * ln.values[k] / max);
            g.fillRect(k * cw, h - bh, Math.max(cw - 0.5, 0.5), bh);
          }
        }
        g.fillStyle = "#e3e3e6";
        g.fillRect(0, h - 1, w, 1);
        if (selA !== null) {
          g.fillStyle = "rgba(11,97,196,0.15)";
          g.fillRect(selA * cw, 0, (selB - selA + 1) * cw, h);
        }
      });
    }
    function axis(g, w) {
      var total = B * bw, step = tickStep(total, Math.max(2, Math.min(12, w / 110))), ticks = [];
      g.font = "11px system-ui, sans-serif";
      g.fillStyle = "#6e6e73";
      g.strokeStyle = "#c8c8cc";
      var end = F.later ? (B - 1) * bw : B * bw;
      // A tick's label that would run into "later" (or off the canvas) is left out, its
      // tick kept: the last one printed over it ("late120000.0").
      var room = w - 2 - (F.later ? g.measureText("later").width + 8 : 0);
      for (var t = 0; t <= end + 1e-9; t += step) {
        var x = t / (B * bw) * w;
        g.beginPath(); g.moveTo(x + 0.5, 12); g.lineTo(x + 0.5, 20); g.stroke();
        var text = tick(t, step);
        if (x + 3 + g.measureText(text).width <= room) { g.fillText(text, x + 3, 10); ticks.push(text); }
      }
      g.canvas.setAttribute("data-ticks", ticks.join("|"));
      if (F.later) { g.textAlign = "right"; g.fillText("later", w - 2, 10); g.textAlign = "left"; }
    }
    doc.addEventListener("mouseup", function () {
      if (dragFrom === null) return;
      dragFrom = null;
      if (selA !== null) select(selA, selB);
    });
    // A range of buckets: each function's self time in it, as the lanes sum it.
    function select(a, b) {
      var all = 0, k;
      for (k = a; k <= b; k++) all += F.bucketMs[k];
      var got = rows.map(function (x) {
        var v = 0;
        for (var j = a; j <= b; j++) v += x.v[j];
        return {r: x.r, v: v};
      }).filter(function (x) { return x.v > 0; });
      got.sort(function (x, y) { return y.v - x.v; });
      rangeBox.textContent = "";
      rangeBox.appendChild(el("h2", {}, (a === b ? span(a) : "From " + span(a).split("\u2013")[0] + " to " +
        (F.later && b === B - 1 ? "the end" : ms((b + 1) * bw) + " ms")) + " since page start: " + ms(all) + " ms sampled"));
      var table = el("table", {"class": "fn"}), head = el("tr", {});
      ["Self ms", "Share %", "Function", "Location"].forEach(function (h, k2) {
        head.appendChild(el("th", {"class": k2 >= 2 ? "name" : ""}, h));
      });
      table.appendChild(head);
      got.slice(0, 50).forEach(function (x) {
        var tr = el("tr", {});
        tr.appendChild(el("td", {}, ms(x.v)));
        tr.appendChild(el("td", {}, pct(x.v, all)));
        var f = x.r.other ? -1 : findFn(M, x.r.name, x.r.loc), td = el("td", {"class": "name"});
        if (f >= 0) td.appendChild(fnLink("sandwich", M, f, x.r.name)); else td.textContent = vis(x.r.name);
        tr.appendChild(td);
        tr.appendChild(el("td", {"class": "loc"}, x.r.loc));
        table.appendChild(tr);
      });
      rangeBox.appendChild(table);
      draw();
    }
    return {
      show: function () {
        if (!built) build();
        if (input) input.placeholder = "Search functions ( / )";
        if ((input ? input.value : "") !== filter) { filter = input ? input.value : ""; fnLanes(); }
        draw();
      },
      search: function (q) { filter = q || ""; if (built) { fnLanes(); draw(); } }
    };
  }
})();
