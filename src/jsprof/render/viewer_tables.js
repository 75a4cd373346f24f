// The viewer's Bottom-up and Call tree tables (DevTools' two tables; inlined by
// render/flame/ before flame.js, which makes them views). Both read the page's current
// tree (viewer_tree.js: the whole call tree, or what the transforms made of it), so their
// numbers are the flame graph's and, for the same transforms, `jsprof report`'s:
//
// - Call tree: the call tree from its roots, every node expandable to its callees.
// - Bottom-up: every function with its self and total time (as `report` counts them),
//   expandable to its callers, and theirs: a row is a call path read upwards, with the
//   part of the function's self and total time spent on that path.
//
// Both sort by self or total (a header click), follow the search box (Bottom-up lists the
// matching functions; Call tree shows the paths to matching calls, opened, the matches
// marked) and move by keyboard (arrows, Enter). Names are DOM text, never markup.
(function (JV) {
  "use strict";

  var ROWS = 2000;  // rows in the DOM at once
  var KIDS = 200;  // children shown under one row before a "more" row

  // The table both views draw: columns, sort headers, indented names with a toggle, the
  // keyboard, and a "more" row where a row's children run past KIDS.
  function makeTable(ctx, sec, kind, onSort) {
    var el = ctx.el;
    var box = el("div", {"class": "tt-box"});
    var table = el("table", {"class": "fn tt", "data-table": kind, tabindex: "0"});
    var head = el("tr", {}), ths = {};
    [["self", "Self ms"], ["selfp", "Self %"], ["total", "Total ms"], ["totalp", "Total %"],
     ["name", "Function"], ["loc", "Location"]].forEach(function (c) {
      var th = el("th", {"data-sort": c[0], "class": c[0] === "name" || c[0] === "loc" ? "name" : ""}, c[1]);
      ths[c[0]] = th;
      th.addEventListener("click", function () {
        if (c[0] === "self" || c[0] === "selfp") onSort("self");
        else if (c[0] === "total" || c[0] === "totalp") onSort("total");
      });
      head.appendChild(th);
    });
    var thead = el("thead", {});
    thead.appendChild(head);
    table.appendChild(thead);
    var tbody = el("tbody", {});
    table.appendChild(tbody);
    box.appendChild(table);
    sec.appendChild(box);
    return {box: box, table: table, tbody: tbody, ths: ths};
  }

  function headers(t, sortBy) {
    t.ths.self.textContent = "Self ms" + (sortBy === "self" ? " \u25BE" : "");
    t.ths.total.textContent = "Total ms" + (sortBy === "total" ? " \u25BE" : "");
  }

  // One row: numbers, then the name indented by depth behind its toggle.
  function row(ctx, T, r, depth, open, leaf, hit) {
    var el = ctx.el, F = T.fns, f = r.f;
    var tr = el("tr", {"data-key": r.key, "data-f": f, "data-depth": depth,
      "class": (hit ? "hit" : "") + (r.key === ctx.selected ? " sel" : "")});
    tr.appendChild(el("td", {"data-col": "self"}, ctx.ms(r.self)));
    tr.appendChild(el("td", {}, ctx.pct(r.self, T.total)));
    tr.appendChild(el("td", {"data-col": "total"}, ctx.ms(r.total)));
    tr.appendChild(el("td", {}, ctx.pct(r.total, T.total)));
    var td = el("td", {"class": "name", "data-col": "name", title: F.name[f]});
    td.style.paddingLeft = (6 + 14 * depth) + "px";
    td.appendChild(el("span", {"class": "tog", "aria-hidden": "true"}, leaf ? "\u00a0" : open ? "\u25be" : "\u25b8"));
    td.appendChild(ctx.doc.createTextNode(ctx.vis(F.name[f])));
    tr.appendChild(td);
    tr.appendChild(el("td", {"class": "loc", title: F.loc[f]}, F.loc[f]));
    if (!leaf) tr.setAttribute("aria-expanded", open ? "true" : "false");
    return tr;
  }

  // What both views share: the rows' state (open rows, the selected one), drawing the
  // visible rows from a tree of items, clicks and keys.
  function treeTable(ctx, sec, kind, source) {
    var t = null, sortBy = source.defaultSort, filter = "", opened = Object.create(null);
    var more = Object.create(null), items = [], shown = 0, T = null, built = false;
    function build() {
      built = true;
      sec.appendChild(ctx.el("p", {"class": "note tt-note"}, source.note));
      t = makeTable(ctx, sec, kind, function (s) { sortBy = s; draw(); });
      t.tbody.addEventListener("click", function (e) {
        var tr = e.target;
        while (tr && tr.tagName !== "TR") tr = tr.parentNode;
        if (!tr) return;
        var key = tr.getAttribute("data-key");
        if (tr.getAttribute("data-more") !== null) { more[key] = (more[key] || KIDS) * 4; draw(); return; }
        ctx.selected = key;
        if (tr.getAttribute("aria-expanded") !== null) toggle(key);
        else draw();
      });
      t.tbody.addEventListener("contextmenu", function (e) {
        var tr = e.target;
        while (tr && tr.tagName !== "TR") tr = tr.parentNode;
        if (!tr || tr.getAttribute("data-f") === null || !ctx.menu) return;
        e.preventDefault();
        ctx.selected = tr.getAttribute("data-key");
        draw();
        ctx.menu(e, source.menuTarget(tr.getAttribute("data-key"), +tr.getAttribute("data-f")));
      });
      t.table.addEventListener("keydown", keys);
    }
    function isOpen(it) {
      var o = opened[it.key];
      return o !== undefined ? o : source.openByDefault(it, filter);
    }
    function toggle(key) {
      var it = null;
      for (var k = 0; k < items.length; k++) if (items[k].key === key) it = items[k];
      opened[key] = !(it ? isOpen(it) : opened[key]);
      draw();
    }
    function sortItems(list) {
      var a = sortBy === "self" ? "self" : "total", b = a === "self" ? "total" : "self";
      list.sort(function (x, y) { return (y[a] - x[a]) || (y[b] - x[b]) || (x.f - y.f) || (x.key < y.key ? -1 : 1); });
      return list;
    }
    function draw() {
      if (!built) return;
      T = ctx.tree();
      headers(t, sortBy);
      var frag = ctx.doc.createDocumentFragment();
      items = [];
      shown = 0;
      var top = sortItems(source.roots(T, filter)), cut = false;
      // Depth first, the open rows' children after them (an explicit stack: a call tree
      // can be thousands of levels deep).
      var stack = [];
      function pushList(list, depth, parentKey) {
        var lim = more[parentKey] || KIDS, n = Math.min(list.length, lim);
        if (list.length > lim) stack.push({moreOf: parentKey, left: list.length - lim, depth: depth});
        for (var j = n - 1; j >= 0; j--) stack.push({it: list[j], depth: depth});
      }
      pushList(top, 0, "");
      while (stack.length) {
        if (shown >= ROWS) { cut = true; break; }
        var e = stack.pop();
        if (e.moreOf !== undefined) {
          var mr = ctx.el("tr", {"data-more": "1", "data-key": e.moreOf, "class": "more"});
          var td = ctx.el("td", {colspan: 6}, "\u2026 " + e.left + " more (click to show them)");
          td.style.paddingLeft = (6 + 14 * e.depth) + "px";
          mr.appendChild(td);
          frag.appendChild(mr);
          shown++;
          continue;
        }
        var it = e.it, leaf = !source.hasKids(T, it, filter), open = !leaf && isOpen(it);
        items.push(it);
        frag.appendChild(row(ctx, T, it, e.depth, open, leaf, filter && T.fns.matches(it.f, filter)));
        shown++;
        if (open) pushList(sortItems(source.kids(T, it, filter)), e.depth + 1, it.key);
      }
      t.tbody.textContent = "";
      t.tbody.appendChild(frag);
      t.table.setAttribute("data-rows", String(items.length));
      if (ctx.status) {
        ctx.status.textContent = [
          filter ? source.searchStatus(T, filter, top.length) : "",
          cut ? "the first " + ROWS + " rows shown: close some, or search" : "",
          ctx.transformsNote ? ctx.transformsNote() : ""].filter(Boolean).join("; ");
      }
    }
    // Arrows move the selection (Right opens, Left closes or goes to the parent row),
    // Enter opens or closes.
    function keys(e) {
      var trs = t.tbody.querySelectorAll("tr[data-f]"), at = -1;
      for (var k = 0; k < trs.length; k++) if (trs[k].getAttribute("data-key") === ctx.selected) at = k;
      var tr = at >= 0 ? trs[at] : null;
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        var n = at < 0 ? 0 : Math.max(0, Math.min(trs.length - 1, at + (e.key === "ArrowDown" ? 1 : -1)));
        if (!trs[n]) return;
        ctx.selected = trs[n].getAttribute("data-key");
        draw();
        var sel = t.tbody.querySelector("tr.sel");
        if (sel && sel.scrollIntoView) sel.scrollIntoView({block: "nearest"});
      } else if (tr && (e.key === "ArrowRight" || e.key === "ArrowLeft" || e.key === "Enter")) {
        e.preventDefault();
        var ex = tr.getAttribute("aria-expanded");
        if (e.key === "Enter" && ex !== null) toggle(ctx.selected);
        else if (e.key === "ArrowRight" && ex === "false") toggle(ctx.selected);
        else if (e.key === "ArrowLeft" && ex === "true") toggle(ctx.selected);
        else if (e.key === "ArrowLeft") {
          var d = +tr.getAttribute("data-depth");
          for (k = at - 1; k >= 0; k--) {
            if (+trs[k].getAttribute("data-depth") < d) { ctx.selected = trs[k].getAttribute("data-key"); draw(); break; }
          }
        }
      }
    }
    return {
      show: function () {
        if (!built) build();
        if (ctx.input) ctx.input.placeholder = "Search functions ( / )";
        filter = (ctx.input ? ctx.input.value : "").toLowerCase();
        draw();
      },
      search: function (q) {
        filter = (q || "").toLowerCase();
        opened = Object.create(null);  // a new search opens the paths to its matches
        draw();
      },
      redraw: function () { opened = Object.create(null); more = Object.create(null); draw(); },
      // The selected row as a transform's target (flame.js's keys).
      target: function () {
        if (ctx.selected === null || ctx.selected === undefined || !T) return null;
        var tr = t.tbody.querySelector("tr.sel");
        return tr ? source.menuTarget(ctx.selected, +tr.getAttribute("data-f")) : null;
      },
      // For tests and tools: the rows drawn now.
      rows: function () {
        var out = [];
        t.tbody.querySelectorAll("tr[data-f]").forEach(function (tr) {
          var c = tr.children;
          out.push({key: tr.getAttribute("data-key"), f: +tr.getAttribute("data-f"),
            depth: +tr.getAttribute("data-depth"), self: c[0].textContent, total: c[2].textContent,
            name: T.fns.name[+tr.getAttribute("data-f")], loc: c[5].textContent,
            open: tr.getAttribute("aria-expanded"), hit: /\bhit\b/.test(tr.className)});
        });
        return out;
      }
    };
  }

  // ---- Call tree: nodes of the current tree, callees under their callers ----

  function callTreeView(ctx) {
    var marks = null, marksFor = null;
    // Under a search: the matching nodes and their ancestors (the rows shown).
    function marked(T, q) {
      if (marksFor === q && marks && marks.T === T) return marks.m;
      var nn = T.parent.length, m = new Uint8Array(nn), P = T.parent, F = T.fn, fh = new Uint8Array(T.fns.count());
      for (var f = 0; f < fh.length; f++) fh[f] = T.fns.matches(f, q) ? 1 : 0;
      for (var i = nn - 1; i >= 0; i--) {
        if (fh[F[i]]) m[i] |= 2;  // 2: a match, 1: on the way to one
        if (m[i] && P[i] >= 0) m[P[i]] |= 1;
      }
      marks = {T: T, m: m};
      marksFor = q;
      return m;
    }
    function item(T, k) { return {key: String(k), node: k, f: T.fn[k], self: T.self[k], total: T.tot[k]}; }
    function list(T, parent, q) {
      var ks = JV.childrenOf(T, parent), out = [], m = q ? marked(T, q) : null;
      for (var j = 0; j < ks.length; j++) {
        var k = ks[j];
        if (!(T.tot[k] > 0)) continue;
        // Under a search, a match's own callees are all listed (it is what was asked for).
        if (m && !m[k] && !(parent >= 0 && m[parent] & 2)) continue;
        out.push(item(T, k));
      }
      return out;
    }
    return treeTable(ctx, ctx.section, "calltree", {
      defaultSort: "total",
      note: "The call tree from its roots: a row's callees under it. Self: time in the function itself at " +
        "this call path; total: with its callees. Click a row (or Right, Enter) to open it; a header to sort.",
      roots: function (T, q) { return list(T, -1, q); },
      kids: function (T, it, q) { return list(T, it.node, q); },
      hasKids: function (T, it, q) { return list(T, it.node, q).length > 0; },
      openByDefault: function (it, q) {
        // Under a search, the paths to the matches are open (not the matches themselves).
        if (!q) return false;
        var T = ctx.tree(), m = marked(T, q);
        return !(m[it.node] & 2) && !!(m[it.node] & 1);
      },
      searchStatus: function (T, q) {
        var m = marked(T, q), n = 0, fs = Object.create(null), nf = 0;
        for (var i = 0; i < m.length; i++) {
          if (m[i] & 2 && T.tot[i] > 0) { n++; if (!fs[T.fn[i]]) { fs[T.fn[i]] = 1; nf++; } }
        }
        return "\u201c" + ctx.vis(q) + "\u201d: " + n + " call" + (n === 1 ? "" : "s") + " of " + nf +
          " function" + (nf === 1 ? "" : "s");
      },
      menuTarget: function (key) {
        var T = ctx.tree(), k = +key, path = [];
        for (var a = k; a >= 0; a = T.parent[a]) path.push(T.fn[a]);
        return {f: T.fn[k], path: path.reverse(), node: k};
      }
    });
  }

  // ---- Bottom-up: functions, each expandable to its callers ----

  function bottomUpView(ctx) {
    var cache = null;
    // A row: a function f0 read up a path of callers; `nodes` its f0 nodes on that path and
    // `at` the path's top node above each (the caller the next level groups by).
    function sums(T, nodes) {
      var out = JV.outermost(T), s = 0, t = 0;
      for (var j = 0; j < nodes.length; j++) {
        var x = nodes[j];
        s += T.self[x];
        if (out[x]) t += T.tot[x];
      }
      return [s, t];
    }
    function roots(T, q) {
      var ft = JV.functionTable(T), nf = T.fns.count(), out = [];
      for (var f = 0; f < nf; f++) {
        if (!(ft.total[f] > 0) || (q && !T.fns.matches(f, q))) continue;
        out.push({key: String(f), f: f, self: ft.self[f], total: ft.total[f], f0: f, nodes: null, at: null});
      }
      return out;
    }
    function callers(T, it) {
      if (!cache || cache.T !== T) cache = {T: T, m: Object.create(null)};
      if (cache.m[it.key]) return cache.m[it.key];
      var nodes = it.nodes, at = it.at;
      if (!nodes) {
        var B = JV.byFunction(T);
        nodes = B.list.subarray(B.start[it.f], B.start[it.f + 1]);
        at = nodes;
      }
      // Group by the caller above each path's top.
      var groups = Object.create(null), order = [];
      for (var j = 0; j < nodes.length; j++) {
        var p = T.parent[at[j]];
        if (p < 0) continue;
        var g = groups[T.fn[p]];
        if (!g) { g = groups[T.fn[p]] = {nodes: [], at: []}; order.push(T.fn[p]); }
        g.nodes.push(nodes[j]);
        g.at.push(p);
      }
      var out = order.map(function (f) {
        var g = groups[f], st = sums(T, g.nodes);
        return {key: it.key + "," + f, f: f, self: st[0], total: st[1], f0: it.f0, nodes: g.nodes, at: g.at};
      }).filter(function (r) { return r.total > 0; });
      cache.m[it.key] = out;
      return out;
    }
    return treeTable(ctx, ctx.section, "bottomup", {
      defaultSort: "self",
      note: "Every function with its self and total time (as jsprof report counts them), expandable to its " +
        "callers: a row under a function is the part of that function's time called through it. " +
        "Click a row (or Right, Enter) to open it; a header to sort.",
      roots: roots,
      kids: function (T, it) { return callers(T, it); },
      // (without grouping them: a row is drawn far more often than opened)
      hasKids: function (T, it) {
        var at = it.at, B;
        if (!at) { B = JV.byFunction(T); at = B.list.subarray(B.start[it.f], B.start[it.f + 1]); }
        for (var j = 0; j < at.length; j++) {
          var p = T.parent[at[j]];
          if (p >= 0 && T.tot[p] > 0) return true;
        }
        return false;
      },
      openByDefault: function () { return false; },
      searchStatus: function (T, q, n) {
        return "\u201c" + ctx.vis(q) + "\u201d: " + n + " function" + (n === 1 ? "" : "s");
      },
      menuTarget: function (key) {
        var fs = key.split(",").map(Number);
        return {f: fs[fs.length - 1], path: null, node: -1};
      }
    });
  }

  JV.callTreeView = callTreeView;
  JV.bottomUpView = bottomUpView;
})(window.JsprofViewer = window.JsprofViewer || {});
