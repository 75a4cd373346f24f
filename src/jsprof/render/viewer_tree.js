// The viewer's call tree as columns, and what the views compute from it (render/flame/
// inlines this file into every viewer page, before flame.js, as a script of its own pinned
// by the page's Content-Security-Policy). A tree is the page's whole call tree (the
// `fg-index` block) or one a transform made of it (viewer_transforms.js): nodes numbered
// parents first, each with its function and its own time (self ms and samples); totals,
// children lists and per-function sums are derived here, the same way for every tree, so
// the tables, the transforms and the flame graph agree with each other and with `report`.
(function (JV) {
  "use strict";

  // A tree: {parent: Int32Array (-1: root), fn: Int32Array, self: Float64Array (ms),
  // selfN: Float64Array (samples), ts: per-track self ms or null, fns: the function table}.
  // `finish` adds tot, n (totals), tt (per-track totals) and total (all the time).
  function finish(T) {
    var nn = T.parent.length, P = T.parent;
    // (new Float64Array(typed) is a copy; Float64Array.from walked an iterator: 20 ms a
    // tree of 500,000 in Chromium)
    var tot = new Float64Array(T.self), n = new Float64Array(T.selfN);
    // Parents come before children: one backward pass adds each node into its parent.
    for (var i = nn - 1; i >= 0; i--) {
      var p = P[i];
      if (p >= 0) { tot[p] += tot[i]; n[p] += n[i]; }
    }
    T.tot = tot;
    T.n = n;
    T.tt = null;
    if (T.ts) {
      T.tt = T.ts.map(function (own) {
        var t = new Float64Array(own);
        for (var i = nn - 1; i >= 0; i--) if (P[i] >= 0) t[P[i]] += t[i];
        return t;
      });
    }
    var total = 0;
    for (i = 0; i < nn; i++) if (P[i] < 0) total += tot[i];
    T.total = total;
    T.kids = null;
    T.present = null;
    T.byFn = null;
    T.outer = null;
    T.ftab = null;
    return T;
  }

  // The page's whole tree from the index columns (flame.js's index()): its own times are
  // each node's total less its children's.
  function fromIndex(I, fns) {
    var nn = I.parent.length, P = I.parent;
    var self = new Float64Array(I.tot), selfN = new Float64Array(nn);
    for (var i = 0; i < nn; i++) selfN[i] = I.n[i];
    for (i = 0; i < nn; i++) {
      var p = P[i];
      if (p >= 0) { self[p] -= I.tot[i]; selfN[p] -= I.n[i]; }
    }
    // (rounding leaves -1e-13 where a node has no time of its own)
    for (i = 0; i < nn; i++) {
      if (self[i] < 1e-9 * (I.tot[i] || 1)) self[i] = Math.max(self[i], 0);
      if (Math.abs(self[i]) < 1e-9) self[i] = 0;
    }
    var ts = null;
    if (I.tt) {
      ts = I.tt.map(function (t) {
        var own = new Float64Array(t);
        for (var i = 0; i < nn; i++) if (P[i] >= 0) own[P[i]] -= t[i];
        for (i = 0; i < nn; i++) if (Math.abs(own[i]) < 1e-9) own[i] = 0;
        return own;
      });
    }
    return finish({parent: P, fn: I.fn, self: self, selfN: selfN, ts: ts, fns: fns, base: true});
  }

  // Per function: 1 where a node of the tree runs it (what a transform's "matched" asks).
  function present(T) {
    if (T.present) return T.present;
    var out = new Uint8Array(T.fns.count() + 1), F = T.fn;
    for (var i = 0; i < F.length; i++) out[F[i]] = 1;
    T.present = out;
    return out;
  }

  // Children of every node as one list (node k's are kList[kStart[k] .. kStart[k+1]]; the
  // roots at k = number of nodes), in node order.
  function kids(T) {
    if (T.kids) return T.kids;
    var nn = T.parent.length, P = T.parent;
    var start = new Int32Array(nn + 2), list = new Int32Array(nn);
    for (var c = 0; c < nn; c++) start[(P[c] < 0 ? nn : P[c]) + 1]++;
    for (c = 0; c <= nn; c++) start[c + 1] += start[c];
    var fill = start.slice(0, nn + 1);
    for (c = 0; c < nn; c++) list[fill[P[c] < 0 ? nn : P[c]]++] = c;
    T.kids = {start: start, list: list};
    return T.kids;
  }
  function childrenOf(T, k) {
    var K = kids(T), i = k < 0 ? T.parent.length : k;
    return K.list.subarray(K.start[i], K.start[i + 1]);
  }

  // Per node: 1 where no ancestor runs the same function (a recursive call's time is
  // inside its outermost call's already: `report` takes a function's total there). A walk
  // down the tree keeping how many nodes of each function are on the path.
  function outermost(T) {
    if (T.outer) return T.outer;
    var nn = T.parent.length, F = T.fn, out = new Uint8Array(nn);
    var on = new Int32Array(T.fns.count()), K = kids(T);
    var stack = [], roots = childrenOf(T, -1);
    for (var r = roots.length - 1; r >= 0; r--) stack.push(roots[r]);
    while (stack.length) {
      var x = stack.pop();
      if (x < 0) { on[F[~x]]--; continue; }
      out[x] = on[F[x]] === 0 ? 1 : 0;
      on[F[x]]++;
      stack.push(~x);
      for (var j = K.start[x + 1] - 1; j >= K.start[x]; j--) stack.push(K.list[j]);
    }
    T.outer = out;
    return out;
  }

  // Per function: self and total ms and samples as `report` counts them (flame/model.py's
  // function_table): self summed over every node, total over the outermost ones.
  function functionTable(T) {
    if (T.ftab) return T.ftab;
    var nf = T.fns.count(), out = outermost(T), F = T.fn, nn = F.length;
    var self = new Float64Array(nf), total = new Float64Array(nf);
    var selfN = new Float64Array(nf), totalN = new Float64Array(nf);
    for (var i = 0; i < nn; i++) {
      var f = F[i];
      self[f] += T.self[i];
      selfN[f] += T.selfN[i];
      if (out[i]) { total[f] += T.tot[i]; totalN[f] += T.n[i]; }
    }
    T.ftab = {self: self, total: total, selfN: selfN, totalN: totalN};
    return T.ftab;
  }

  // The nodes of each function (CSR: function f's are list[start[f] .. start[f+1]]).
  function byFunction(T) {
    if (T.byFn) return T.byFn;
    var nf = T.fns.count(), F = T.fn, nn = F.length;
    var start = new Int32Array(nf + 1), list = new Int32Array(nn);
    for (var i = 0; i < nn; i++) start[F[i] + 1]++;
    for (var f = 0; f < nf; f++) start[f + 1] += start[f];
    var fill = start.slice(0, nf);
    for (i = 0; i < nn; i++) list[fill[F[i]]++] = i;
    T.byFn = {start: start, list: list};
    return T.byFn;
  }

  // The function table of a page: names and locations (lower-cased once for search), and
  // what the transforms match on. Functions a transform makes (a collapsed script, the
  // "(merged)" row) are added once and keep their number for the rest of the visit.
  function Functions(I) {
    var self = this;
    this.name = I.fname.slice();
    this.loc = I.floc.slice();
    this.low = I.low.slice();
    this.lowLoc = I.lowLoc.slice();
    this.res = Array.prototype.slice.call(I.fres || []);  // resource index, -1: none
    this.resUrl = (I.res || []).slice();
    this.resAlt = I.rsp || [];
    this.anon = new Uint8Array(this.name.length + 1024);
    this.nostack = new Uint8Array(this.name.length + 1024);
    (I.anon || []).forEach(function (k) { self.anon[k] = 1; });
    (I.nostack || []).forEach(function (k) { self.nostack[k] = 1; });
    this.colorBy = I.colorBy || "function";
    this.rhue = I.rhue || [];
    this.nolo = new Uint8Array(this.name.length + 1024);
    (I.nolo || []).forEach(function (k) { self.nolo[k] = 1; });
    this.fills = [];
    this.made = Object.create(null);
  }
  // CRC-32 (zlib's) of a string's UTF-8 bytes: the hash flame/colours.py's are made of.
  var CRC = null;
  function crc32(s) {
    if (!CRC) {
      CRC = new Int32Array(256);
      for (var n = 0; n < 256; n++) {
        var c = n;
        for (var k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
        CRC[n] = c;
      }
    }
    var b = new TextEncoder().encode(s), h = -1;
    for (var j = 0; j < b.length; j++) h = CRC[(h ^ b[j]) & 255] ^ (h >>> 8);
    return (h ^ -1) >>> 0;
  }
  // A function's fill as flame/colours.py's fill_rule gives it: by script (the script's hue,
  // varied a little by the name) or by name; grey for samples with no JavaScript.
  Functions.prototype.fillOf = function (f) {
    if (this.fills[f]) return this.fills[f];
    var name = this.name[f], h = crc32(name), r = this.res[f], out;
    if (this.colorBy === "function") {
      out = "hsl(" + (8 + h % 44) + "," + (70 + (h >>> 8) % 20) + "%," + (58 + (h >>> 16) % 12) + "%)";
    } else if (r < 0 && (this.nolo[f] || !this.loc[f])) out = "hsl(220,8%,78%)";
    else if (r < 0 || !(this.rhue[r] >= 0)) out = "hsl(210,18%,72%)";
    else {
      var hue = this.rhue[r];
      out = "hsl(" + (hue - 7 + h % 15) + "," + (58 + (h >>> 8) % 20) + "%," + (62 + (h >>> 16) % 15) + "%)";
    }
    return (this.fills[f] = out);
  };
  Functions.prototype.count = function () { return this.name.length; };
  // A function of the transforms' own (its name, location, resource): the same one each
  // time it is asked for.
  Functions.prototype.make = function (name, loc, res) {
    var key = name + "\u0000" + loc, k = this.made[key];
    if (k !== undefined) return k;
    k = this.made[key] = this.name.length;
    this.name.push(name);
    this.loc.push(loc);
    this.low.push(name.toLowerCase());
    this.lowLoc.push(loc.toLowerCase());
    this.res.push(res);
    if (k >= this.anon.length) {
      var a = new Uint8Array(this.anon.length * 2), b = new Uint8Array(this.anon.length * 2);
      var c = new Uint8Array(this.anon.length * 2);
      a.set(this.anon); b.set(this.nostack); c.set(this.nolo);
      this.anon = a; this.nostack = b; this.nolo = c;
    }
    return k;
  };
  // Does function f match the search query q (lower-cased)? As every list's search: in
  // its name or its location.
  Functions.prototype.matches = function (f, q) {
    return !q || this.low[f].indexOf(q) >= 0 || this.lowLoc[f].indexOf(q) >= 0;
  };

  // The Flame view's frames of a tree, laid out as flame/layout.py's layout() does: the nodes of
  // at least `minMs` (and some time), children widest first (ties by node number), depth
  // first, after a root frame standing for all (node -1). Columns: depth, x and width (ms),
  // node.
  function flameLayout(T, minMs) {
    // One pass over the tree (parents come first) finds the drawn nodes: wide enough and
    // under a drawn parent; only those (tens of thousands of 500,000) get children lists.
    var nn = T.parent.length, P = T.parent, TOT = T.tot, i, p, k, j;
    var kix = new Int32Array(nn), knode = new Int32Array(nn), kpar = new Int32Array(nn), K = 0;
    for (i = 0; i < nn; i++) {
      var t = TOT[i];
      if (!(t >= minMs && t > 0)) { kix[i] = -1; continue; }
      p = P[i];
      if (p >= 0 && kix[p] < 0) { kix[i] = -1; continue; }
      kix[i] = K;
      knode[K] = i;
      kpar[K++] = p < 0 ? -1 : kix[p];
    }
    // children of each drawn node (K: the roots), widest first, ties by node number
    var start = new Int32Array(K + 2), list = new Int32Array(K);
    for (k = 0; k < K; k++) start[(kpar[k] < 0 ? K : kpar[k]) + 1]++;
    for (k = 0; k <= K; k++) start[k + 1] += start[k];
    var fill = start.slice(0, K + 1);
    for (k = 0; k < K; k++) list[fill[kpar[k] < 0 ? K : kpar[k]]++] = k;
    function wider(a, b) { return (TOT[knode[b]] - TOT[knode[a]]) || (a - b); }
    for (k = 0; k <= K; k++) if (start[k + 1] - start[k] > 1) list.subarray(start[k], start[k + 1]).sort(wider);
    // depth first, each node's children after it, placed left to right from its x
    var m = K + 1, d = new Int32Array(m), x = new Float64Array(m), w = new Float64Array(m), node = new Int32Array(m);
    d[0] = 0; x[0] = 0; w[0] = T.total; node[0] = -1;
    var kd = new Int32Array(K), kx = new Float64Array(K), stack = new Int32Array(K), sp = 0, at = 1;
    function place(g, depth, cx) {
      for (j = start[g]; j < start[g + 1]; j++) {
        var c = list[j];
        kd[c] = depth; kx[c] = cx; cx += TOT[knode[c]];
      }
      for (j = start[g + 1] - 1; j >= start[g]; j--) stack[sp++] = list[j];
    }
    place(K, 1, 0);
    while (sp) {
      k = stack[--sp];
      i = knode[k];
      d[at] = kd[k]; x[at] = kx[k]; w[at] = TOT[i]; node[at] = i; at++;
      place(k, kd[k] + 1, kx[k]);
    }
    return {d: d, x: x, w: w, node: node};
  }

  JV.flameLayout = flameLayout;
  JV.finishTree = finish;
  JV.treeFromIndex = fromIndex;
  JV.childrenOf = childrenOf;
  JV.outermost = outermost;
  JV.presentFunctions = present;
  JV.functionTable = functionTable;
  JV.byFunction = byFunction;
  JV.Functions = Functions;
})(window.JsprofViewer = window.JsprofViewer || {});
