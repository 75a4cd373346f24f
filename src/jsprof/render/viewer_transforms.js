// The viewer's transforms (inlined by render/flame/ before flame.js): the command line's
// `--transform SPEC` (analysis/transforms.py) over the page's call tree, with the same
// grammar and the same results, plus three of the page's own. A tree node stands for every
// sample with its call path, so a step that maps each call path to a new one (or to none)
// does to the tree what the command line does to the stacks: the per-function totals of
// `jsprof report --transform SPEC` and of the page's tables agree (tests/test_viewer_
// transforms.py checks each kind on a real recording).
//
// - merge:NAME             NAME leaves every path; its self time goes to its callers.
// - merge-node:A>B>C       only the call node at that path leaves.
// - focus-subtree:A>B      only the samples under that path, rooted at its last node.
// - focus:NAME             only the samples through NAME, rooted at its outermost call,
//                          its recursive calls merged into that root.
// - collapse:NAME          NAME's callees fold into NAME.
// - collapse-resource:URL  a script's frames become one frame named after its file.
// - collapse-recursion:NAME  a call of NAME inside NAME (directly or not) joins the outer one.
// - drop:NAME              the samples whose path holds NAME are dropped.
// - focus-resource:URL     only a script's frames stay (the others merged); the samples
//                          with none of them are dropped.
// The page's own (the command line has no such kind):
// - collapse-direct-recursion:NAME  only NAME called directly by NAME joins its caller.
// - hide-repeating:A>B>C   DevTools' "hide repeating children": under that node, a call of
//                          a function by itself joins its caller.
// - ignore:REGEX           the ignore list: every function of a script whose URL matches
//                          the regular expression is merged (its time goes to its callers).
//
// A NAME matches a function's name whole, `*`, `?` and `[...]` as in Python's fnmatch; a
// function with no name matches "(anonymous)" and its label, "(anonymous app.js:8)".
(function (JV) {
  "use strict";

  var CLI_KINDS = ["merge", "merge-node", "focus-subtree", "focus", "collapse", "collapse-resource",
    "collapse-recursion", "drop", "focus-resource"];
  var PAGE_KINDS = ["collapse-direct-recursion", "hide-repeating", "ignore"];
  var KINDS = CLI_KINDS.concat(PAGE_KINDS);
  var PATH_KINDS = ["merge-node", "focus-subtree", "hide-repeating"];
  var RESOURCE_KINDS = ["collapse-resource", "focus-resource"];  // URL, not NAME
  var DROPS = ["focus", "focus-subtree", "drop", "focus-resource"];  // their lost samples are gone, not (merged)
  var MERGED = "(merged)";
  var MAX_SPEC = 4096;
  // Steps applied at most: each keeps a whole tree (memo), so a link of thousands of steps
  // would hold thousands of trees and build each of them.
  var MAX_STEPS = 64;
  // ignore:REGEX: its length, and a group holding a quantifier or `|` that is itself
  // quantified (catastrophic backtracking), refused
  var MAX_PATTERN = 200;
  function backtracks(p) {
    var open = [], inClass = false;
    for (var i = 0; i < p.length; i++) {
      var c = p[i];
      if (c === "\\") { i++; continue; }
      if (inClass) { if (c === "]") inClass = false; continue; }
      if (c === "[") inClass = true;
      else if (c === "(") open.push(i);
      else if (c === ")" && open.length) {
        var inner = p.slice(open.pop() + 1, i).replace(/\\./g, "").replace(/\[[^\]]*\]/g, "");
        var next = p.slice(i + 1, i + 3);
        if (/^(?:[+*]|\{\d)/.test(next) && /[+*|]|\{\d/.test(inner)) return true;
      }
    }
    return false;
  }

  // `KIND:ARG`, as the command line parses it; throws an Error saying what is wrong.
  function parseSpec(text) {
    text = String(text);
    var kinds = KINDS.join(", ");
    if (text.length > MAX_SPEC) throw new Error("a transform of " + text.length + " characters is not one");
    var at = text.indexOf(":");
    if (at < 0) throw new Error("'" + text + "': expected KIND:NAME, KIND one of " + kinds);
    var kind = text.slice(0, at).trim(), arg = text.slice(at + 1);
    if (KINDS.indexOf(kind) < 0) throw new Error("'" + text + "': unknown transform '" + kind + "'; one of " + kinds);
    var what = RESOURCE_KINDS.indexOf(kind) >= 0 ? "URL" : kind === "ignore" ? "regular expression" :
      PATH_KINDS.indexOf(kind) >= 0 ? "call path A>B>C" : "NAME";
    if (!arg.trim()) throw new Error("'" + text + "': " + kind + " needs a " + what + " after the colon");
    var t = {kind: kind, arg: arg, text: kind + ":" + arg, path: null, re: null};
    if (PATH_KINDS.indexOf(kind) >= 0) {
      t.path = arg.split(">").map(function (p) { return p.trim(); });
      if (t.path.some(function (p) { return !p; })) {
        throw new Error("'" + text + "': an empty name in the call path; write " + kind + ":A>B>C");
      }
    }
    if (kind === "ignore") {
      // A link is anyone's: a pattern that backtracks without end ((a+)+$, (a|a)*b, \1)
      // would hang the tab on a long URL. Script URLs want none of that: refused.
      if (arg.length > MAX_PATTERN || backtracks(arg) || /\\[1-9]/.test(arg)) {
        throw new Error("'" + text + "': a pattern of at most " + MAX_PATTERN +
          " characters with no quantified group holding a quantifier or an alternative, " +
          "and no back-reference");
      }
      try { t.re = new RegExp(arg); } catch (err) {
        throw new Error("'" + text + "': not a regular expression (" + err.message + ")");
      }
    }
    return t;
  }

  // Python's fnmatch.translate: `*`, `?`, `[seq]`, `[!seq]`; anything else literal; the
  // whole name.
  var cache = Object.create(null);
  function globRe(pat) {
    if (cache[pat]) return cache[pat];
    var i = 0, n = pat.length, res = "";
    while (i < n) {
      var c = pat[i++];
      if (c === "*") { if (res.slice(-2) !== ".*") res += ".*"; }
      else if (c === "?") res += ".";
      else if (c === "[") {
        var j = i;
        if (j < n && pat[j] === "!") j++;
        if (j < n && pat[j] === "]") j++;
        while (j < n && pat[j] !== "]") j++;
        if (j >= n) res += "\\[";
        else {
          var stuff = pat.slice(i, j).replace(/\\/g, "\\\\");
          i = j + 1;
          if (stuff[0] === "!") stuff = "^" + stuff.slice(1);
          else if (stuff[0] === "^" || stuff[0] === "[") stuff = "\\" + stuff;
          res += "[" + stuff + "]";
        }
      } else res += c.replace(/[.*+?^${}()|[\]\\\/-]/g, "\\$&");
    }
    return (cache[pat] = new RegExp("^(?:" + res + ")$", "s"));
  }
  // A name as a pattern that matches only itself (the menu's transforms name one function).
  function escapeName(name) {
    return name.replace(/[*?[]/g, function (c) { return "[" + c + "]"; });
  }
  // A call path's names for a path spec; `>` cannot be said in one, so it is `?` there.
  function pathSpec(names) {
    return names.map(function (s) { return escapeName(s).replace(/>/g, "?"); }).join(">");
  }

  // Per function of `fns`: does NAME match it (as filters.name_matcher does)?
  function nameHits(fns, pattern) {
    var re = globRe(pattern), nf = fns.count(), hit = new Uint8Array(nf);
    var anonHit = re.test("(anonymous)");
    for (var f = 0; f < nf; f++) {
      if (fns.nostack[f]) continue;  // the rows of samples with no stack: no frame to match
      hit[f] = (fns.anon[f] && anonHit) || re.test(fns.name[f]) ? 1 : 0;
    }
    return hit;
  }
  // Per resource: does URL (a pattern) match it, as transforms.resource_matches does?
  function resourceHits(fns, pattern) {
    var re = globRe(pattern);
    return fns.resUrl.map(function (u, r) {
      return re.test(u) || (fns.resAlt[r] || []).some(function (s) { return re.test(s); });
    });
  }
  // A collapsed script's frame name (transforms.script_label).
  function scriptLabel(url) {
    var path = url.split("#")[0].split("?")[0].replace(/\/+$/, "");
    return path.slice(path.lastIndexOf("/") + 1) || url;
  }

  // The new tree a step builds: nodes interned by (parent, function), parents first, in an
  // open-addressing hash of typed arrays (a Map of 500,000 keys was most of a step's time).
  // Most new nodes stand for one old node, whose children had distinct functions: their
  // children need no look-up. Such a node is "pure"; once a second old node maps to it, or
  // two of its children may get one function (collapse-resource), the step says so
  // (`same`): the children it has are put in the hash and later ones are looked up.
  function Builder(cap) {
    var parent = new Int32Array(cap + 2), fn = new Int32Array(cap + 2), n = 0, size = 1;
    var pure = new Uint8Array(cap + 2), first = new Int32Array(cap + 2), next = new Int32Array(cap + 2);
    while (size < 2 * (cap + 2)) size *= 2;
    // The hash's slots hold node + 1 (0: empty, as allocated: no fill); made on first use
    // (a step that keeps every node pure never needs it). Roots are looked up in a Map.
    var mask = size - 1, slot = null, roots = new Map();
    var b = {parent: parent, fn: fn, n: 0};
    function put(p, f, id) {
      if (!slot) slot = new Int32Array(size);
      var h = (Math.imul(p + 1, 0x9e3779b1) ^ Math.imul(f, 0x85ebca6b)) >>> 0;
      var i = (h ^ (h >>> 15)) & mask;
      while (slot[i] > 0) i = (i + 1) & mask;
      slot[i] = id + 1;
    }
    function make(p, f) {
      var id = n++;
      parent[id] = p;
      fn[id] = f;
      first[id] = -1;
      pure[id] = 1;
      b.n = n;
      return id;
    }
    b.same = function (x) {
      if (x < 0 || !pure[x]) return;
      pure[x] = 0;
      for (var c = first[x]; c >= 0; c = next[c]) put(x, fn[c], c);
    };
    b.push = function (p, f) {
      if (p >= 0 && pure[p]) {
        var c = make(p, f);
        next[c] = first[p];
        first[p] = c;
        return c;
      }
      var id;
      if (p < 0) {
        id = roots.get(f);
        if (id !== undefined) { b.same(id); return id; }
        id = make(p, f);
        roots.set(f, id);
        return id;
      }
      if (!slot) slot = new Int32Array(size);
      var h = (Math.imul(p + 1, 0x9e3779b1) ^ Math.imul(f, 0x85ebca6b)) >>> 0;
      var i = (h ^ (h >>> 15)) & mask;
      while ((id = slot[i] - 1) >= 0) {
        if (parent[id] === p && fn[id] === f) { b.same(id); return id; }
        i = (i + 1) & mask;
      }
      id = make(p, f);
      slot[i] = id + 1;
      return id;
    };
    return b;
  }

  // One step over tree T: {tree, matched}. `fresh` is T's node -> the new tree's node (-1:
  // no node: dropped, or charged to "(merged)").
  function applyOne(T, t) {
    var fns = T.fns, P = T.parent, F = T.fn, nn = P.length, b = Builder(nn);
    var nu = new Int32Array(nn).fill(-1), matched = false, i, p, f;
    var NOST = fns.nostack;  // (no loop that reads it makes a function: it stays this array)
    // The new node of a root's parent is -1, as is "no node": `at(p)` reads both alike.
    function at(x) { return x < 0 ? -1 : nu[x]; }
    var kind = t.kind, hit = null, present = JV.presentFunctions(T);
    if (kind === "ignore") {
      hit = new Uint8Array(fns.count());
      var resHit = fns.resUrl.map(function (u) { return t.re.test(u); });
      for (f = 0; f < hit.length; f++) if (fns.res[f] >= 0 && resHit[fns.res[f]]) hit[f] = 1;
    } else if (kind === "focus-resource") {
      // every function not of the script is merged; a path left with none is dropped
      hit = new Uint8Array(fns.count());
      var rk = resourceHits(fns, t.arg);
      for (f = 0; f < hit.length; f++) {
        if (fns.res[f] >= 0 && rk[fns.res[f]]) { if (present[f]) matched = true; } else hit[f] = 1;
      }
    } else if (!t.path && kind !== "collapse-resource") hit = nameHits(fns, t.arg);
    // (focus-resource's `matched` is said above: a kept function, not a merged one)
    if (hit && kind !== "focus-resource") for (f = 0; f < hit.length; f++) if (hit[f] && present[f]) { matched = true; break; }

    // Path kinds: how many names of the path each node matches from the root (-1 once
    // it leaves the path).
    var k = null, n = 0;
    if (t.path) {
      var masks = t.path.map(function (name) { return nameHits(fns, name); });
      n = masks.length;
      k = new Int32Array(nn);
      for (i = 0; i < nn; i++) {
        var kp = P[i] < 0 ? 0 : k[P[i]];
        k[i] = kp >= 0 && kp < n && masks[kp][F[i]] ? kp + 1 : -1;
        if (k[i] === n) matched = true;
      }
    }
    var flag = new Uint8Array(nn);  // per kind: under the focused node, inside a collapse...
    if (kind === "merge" || kind === "ignore" || kind === "focus-resource") {
      var keepIdle = kind !== "focus-resource";
      for (i = 0; i < nn; i++) {
        if (NOST[F[i]] && P[i] < 0) { if (keepIdle) nu[i] = b.push(-1, F[i]); continue; }
        if (hit[F[i]]) b.same(nu[i] = at(P[i]));
        else nu[i] = b.push(at(P[i]), F[i]);
      }
    } else if (kind === "merge-node") {
      for (i = 0; i < nn; i++) {
        if (k[i] === n) b.same(nu[i] = at(P[i]));
        else nu[i] = b.push(at(P[i]), F[i]);
      }
    } else if (kind === "focus-subtree") {
      for (i = 0; i < nn; i++) {
        p = P[i];
        if (p >= 0 && flag[p]) { nu[i] = b.push(nu[p], F[i]); flag[i] = 1; }
        else if (k[i] === n) { nu[i] = b.push(-1, F[i]); flag[i] = 1; }
      }
    } else if (kind === "hide-repeating") {
      for (i = 0; i < nn; i++) {
        p = P[i];
        if (p >= 0 && flag[p]) {
          flag[i] = 1;
          if (F[i] === F[p]) b.same(nu[i] = nu[p]);
          else nu[i] = b.push(nu[p], F[i]);
        } else {
          nu[i] = b.push(at(p), F[i]);
          if (k[i] === n) flag[i] = 1;
        }
      }
    } else if (kind === "collapse") {
      for (i = 0; i < nn; i++) {
        p = P[i];
        if (p >= 0 && flag[p]) { b.same(nu[i] = nu[p]); flag[i] = 1; }
        else { nu[i] = b.push(at(p), F[i]); flag[i] = NOST[F[i]] ? 0 : hit[F[i]]; }
      }
    } else if (kind === "collapse-direct-recursion") {
      for (i = 0; i < nn; i++) {
        p = P[i];
        if (p >= 0 && hit[F[i]] && F[p] === F[i]) b.same(nu[i] = nu[p]);
        else nu[i] = b.push(at(p), F[i]);
      }
    } else if (kind === "focus" || kind === "collapse-recursion") {
      // Per node, the hit functions on its path with their outermost call's new node (a
      // linked list: only hit functions add to it). ABOVE: focus, above the first hit.
      var ABOVE = {}, seen = new Array(nn), focus = kind === "focus";
      for (i = 0; i < nn; i++) {
        p = P[i];
        f = F[i];
        var up = p < 0 ? (focus ? ABOVE : null) : seen[p];
        if (NOST[f] && p < 0) {
          if (!focus) nu[i] = b.push(-1, f);
          seen[i] = ABOVE;
          continue;
        }
        if (up === ABOVE) {
          if (hit[f]) { nu[i] = b.push(-1, f); seen[i] = {f: f, node: nu[i], next: null}; }
          else seen[i] = ABOVE;
          continue;
        }
        if (!hit[f]) { nu[i] = b.push(at(p), f); seen[i] = up; continue; }
        var outer = -1;
        for (var e = up; e; e = e.next) if (e.f === f) { outer = e.node; break; }
        if (outer >= 0) { b.same(nu[i] = outer); seen[i] = up; }
        else { nu[i] = b.push(at(p), f); seen[i] = {f: f, node: nu[i], next: up}; }
      }
    } else if (kind === "collapse-resource") {
      var rh = resourceHits(fns, t.arg), script = Object.create(null);
      var leaf = new Int32Array(nn);
      for (i = 0; i < nn; i++) {
        p = P[i];
        f = F[i];
        var r = fns.res[f];
        if (r >= 0 && rh[r]) {
          matched = true;
          var g = script[r];
          if (g === undefined) g = script[r] = fns.make(scriptLabel(fns.resUrl[r]), fns.resUrl[r], r);
          if (p >= 0 && leaf[p] === g) { b.same(nu[i] = nu[p]); leaf[i] = g; continue; }
          // two old children of one parent may both become this script's frame: that
          // parent's children are looked up (the others' need no look-up)
          var np = at(p);
          b.same(np);
          nu[i] = b.push(np, g);
          leaf[i] = g;
        } else {
          nu[i] = b.push(at(p), f);
          leaf[i] = f;
        }
      }
    } else if (kind === "drop") {
      for (i = 0; i < nn; i++) {
        p = P[i];
        if ((p >= 0 && flag[p]) || hit[F[i]]) { flag[i] = 1; continue; }
        nu[i] = b.push(at(p), F[i]);
      }
    }
    // The new tree's own times: each old node's, at its new node. A sample whose path is
    // gone is dropped (focus, drop) or charged to "(merged)" (what the command line does).
    var drops = DROPS.indexOf(kind) >= 0, merged = -1;
    // (the columns in locals: trees of different shapes pass through here, and a property
    // read in a loop of 500,000 went megamorphic)
    var tracks = T.ts ? T.ts.length : 0, TS = T.self, TSN = T.selfN;
    var lost = [];
    if (!drops) {
      for (i = 0; i < nn; i++) if (nu[i] < 0 && (TS[i] > 0 || TSN[i] > 0)) lost.push(i);
    }
    if (lost.length) {
      merged = b.push(-1, fns.make(MERGED, "", -1));
      for (var j = 0; j < lost.length; j++) nu[lost[j]] = merged;
    }
    var m = b.n, self = new Float64Array(m), selfN = new Float64Array(m), x;
    for (i = 0; i < nn; i++) {
      x = nu[i];
      if (x < 0) continue;
      self[x] += TS[i];
      selfN[x] += TSN[i];
    }
    var ts = tracks ? T.ts.map(function (src) {
      var dst = new Float64Array(m);
      for (var r = 0; r < nn; r++) if (nu[r] >= 0) dst[nu[r]] += src[r];
      return dst;
    }) : null;
    var out = JV.finishTree({parent: b.parent.subarray(0, m), fn: b.fn.subarray(0, m), self: self,
      selfN: selfN, ts: ts, fns: fns, base: false});
    return {tree: out, matched: matched};
  }

  // The transforms in order over `base`: {tree, steps: [{spec, matched, error}]}. A spec
  // that does not parse is kept in the list with its error and changes nothing.
  function applyAll(base, specs, memo) {
    specs = specs.slice(0, MAX_STEPS);
    var T = base, steps = [], key = "", keep = Object.create(null);
    // Only the steps of this list are kept (each holds a whole tree): going back to any of
    // them is free, and a list given up frees its trees.
    for (var s0 = 0, k0 = ""; s0 < specs.length; s0++) { k0 += "\n" + specs[s0]; keep[k0] = 1; }
    if (memo) for (var old in memo) if (!keep[old]) delete memo[old];
    for (var s = 0; s < specs.length; s++) {
      key += "\n" + specs[s];
      if (memo && memo[key]) { T = memo[key].tree; steps.push(memo[key].step); continue; }
      var step = {spec: specs[s], matched: false, error: ""};
      try {
        var r = applyOne(T, parseSpec(specs[s]));
        step.matched = r.matched;
        // one that matches nothing changes nothing (a focus on nothing would empty it)
        if (r.matched) T = r.tree;
      } catch (err) {
        step.error = err.message;
      }
      steps.push(step);
      if (memo) memo[key] = {tree: T, step: step};
    }
    return {tree: T, steps: steps};
  }

  JV.KINDS = KINDS;
  JV.MAX_STEPS = MAX_STEPS;
  JV.CLI_KINDS = CLI_KINDS;
  JV.parseSpec = parseSpec;
  JV.backtracks = backtracks;
  JV.globRe = globRe;
  JV.escapeName = escapeName;
  JV.pathSpec = pathSpec;
  JV.applyTransform = applyOne;
  JV.applyTransforms = applyAll;
})(window.JsprofViewer = window.JsprofViewer || {});
