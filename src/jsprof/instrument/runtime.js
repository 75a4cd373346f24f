// jsprof's instrumenting runtime: the `jsprof` global and `__jsprof_register`, which the
// source transform (jsprof/instrument/transform.py) calls right after every class is
// created. Engine-neutral (QuickJS and Node): it needs only performance.now().
//
// Evaluated as a script with `globalThis.__jsprof_config` set beforehand:
//   {watch: ["Shape", ...] or ["*"], byInstance: bool, spans: bool, maxSpans: number}
// `globalThis.__jsprof_dump()` returns everything as a JSON string for the Python side.
//
// Invisibility is the design constraint: wrappers keep name, length and toString(); the
// class binding becomes a Proxy (construct trap) whose prototype.constructor points back
// at it, so `new`, `instanceof`, `obj.constructor === Shape` and `Shape.name` are as before.
(function () {
  "use strict";
  const G = globalThis;
  if (typeof G.__jsprof_register === "function") return;
  const config = G.__jsprof_config || {};
  delete G.__jsprof_config;

  // Captured once: the program may replace any of these later.
  const perf = G.performance;
  const now = perf.now.bind(perf);
  const O = Object;
  const R = Reflect;
  const apply = R.apply;
  const construct = R.construct;
  const ownKeys = R.ownKeys;
  const rset = R.set;
  const defineProperty = O.defineProperty;
  // The originals the patched ones below call: once installed, O.defineProperties and
  // R.getPrototypeOf/R.defineProperty are the patched ones (calling them through O and R
  // recursed until the stack overflowed: acorn's Object.defineProperties of its
  // prototype accessors, under `instrument --watch Parser`).
  const defineProperties = O.defineProperties;
  const reflectGetPrototypeOf = R.getPrototypeOf;
  const reflectDefineProperty = R.defineProperty;
  const getOwnPropertyDescriptor = O.getOwnPropertyDescriptor;
  const getPrototypeOf = O.getPrototypeOf;
  const setPrototypeOf = O.setPrototypeOf;
  const hasOwn = (o, k) => apply(O.prototype.hasOwnProperty, o, [k]);
  const fnToString = Function.prototype.toString;
  const promiseThen = Promise.prototype.then;
  const ProxyC = Proxy;
  const AsyncFunctionProto = getPrototypeOf(async function () {});
  const GeneratorFunctionProto = getPrototypeOf(function* () {});
  const AsyncGeneratorFunctionProto = getPrototypeOf(async function* () {});
  const stringify = JSON.stringify;

  const byInstance = !!config.byInstance;
  const spansOn = !!config.spans;
  const maxSpans = config.maxSpans > 0 ? config.maxSpans : 2000000;
  const watchedNames = new Set(config.watch || []);
  let watchAll = watchedNames.has("*");

  // wrapper or class proxy -> the original, for Function.prototype.toString
  const masks = new WeakMap();
  const wrappers = new WeakSet();
  // raw class or its proxy -> class record
  const recOf = new WeakMap();
  // object whose later-added function properties get wrapped -> {rec, role, obj}
  const owners = new WeakMap();
  // instance -> {rec, n}
  const instances = new WeakMap();
  const classes = [];
  const rows = [];
  const sites = new Map();

  // ---- accounting: a stack of active timed calls ---------------------------------------
  let depth = 0;
  const child = [0]; // time spent in watched callees, per depth
  let ctorDepth = 0; // > 0 while a watched constructor runs
  const spanStart = [];
  const spanEnd = [];
  const spanFrame = [];
  const spanParent = [];
  let spanTop = -1;
  let spansDropped = 0;
  // The calls in progress, per depth: an interrupted run (Ctrl-C, SIGTERM) unwinds past
  // every `finally`, so the dump closes them itself (closeOpenCalls).
  const openRow = [];
  const openT0 = [];
  const openSp = [];

  function newRow(rec, method, kind, instance) {
    const row = {
      id: rows.length, cls: rec.name, method, kind, instance,
      calls: 0, total: 0, self: 0, max: 0, active: 0,
      settled: 0, settleTotal: 0, settleMax: 0,
    };
    rows.push(row);
    return row;
  }

  function openSpan(row, t0) {
    if (spanStart.length >= maxSpans) {
      spansDropped++;
      return -1;
    }
    const i = spanStart.length;
    spanStart.push(t0);
    spanEnd.push(-1); // still open
    spanFrame.push(row.id);
    spanParent.push(spanTop);
    spanTop = i;
    return i;
  }

  function leave(row, d, t0, sp) {
    const t1 = now();
    const dt = t1 - t0;
    depth = d;
    row.self += dt - child[d];
    // Recursion: only the outermost activation adds to total (no double counting).
    if (--row.active === 0) row.total += dt;
    if (dt > row.max) row.max = dt;
    if (d > 0) child[d - 1] += dt;
    if (sp >= 0) {
      spanEnd[sp] = t1;
      spanTop = spanParent[sp];
    }
  }

  // Calls an interrupt left open end now: their rows get the time so far (a method
  // that looped until Ctrl-C is where the time went), their spans end here, and the span
  // columns are cut to one length (an interrupt can fall between two pushes).
  function closeOpenCalls() {
    const t1 = now();
    const n = Math.min(spanStart.length, spanEnd.length, spanFrame.length, spanParent.length);
    spanStart.length = spanEnd.length = spanFrame.length = spanParent.length = n;
    const open = depth;
    while (depth > 0) {
      const d = depth - 1;
      const sp = openSp[d];
      leave(openRow[d], d, openT0[d], sp < n ? sp : -1);
    }
    for (let i = 0; i < n; i++) if (spanEnd[i] < 0) spanEnd[i] = t1;
    spanTop = -1;
    return open;
  }

  // One timed synchronous call. `count` is 0 for a generator's resumptions (the call
  // that created the generator was counted).
  function run(row, fn, self, args, count) {
    row.calls += count;
    row.active++;
    const d = depth;
    child[d] = 0;
    const t0 = now();
    const sp = spansOn ? openSpan(row, t0) : -1;
    openRow[d] = row;
    openT0[d] = t0;
    openSp[d] = sp;
    depth = d + 1;
    try {
      return apply(fn, self, args);
    } finally {
      leave(row, d, t0, sp);
    }
  }

  function settled(row, t0) {
    const dt = now() - t0;
    row.settled++;
    row.settleTotal += dt;
    if (dt > row.settleMax) row.settleMax = dt;
  }

  // async: the synchronous part is a normal timed call; the settle time is measured on a
  // promise derived from the original, which is what the caller gets. Nobody else holds
  // the original, so a rejection stays unhandled exactly when the program leaves it so.
  function runAsync(row, fn, self, args) {
    const t0 = now();
    const p = run(row, fn, self, args, 1);
    if (p === null || typeof p !== "object" || typeof p.then !== "function") return p;
    return apply(promiseThen, p, [
      (v) => { settled(row, t0); return v; },
      (e) => { settled(row, t0); throw e; },
    ]);
  }

  // generators: each resumption (next/return/throw) is a timed call of the same row.
  function runGen(row, fn, self, args) {
    const g = run(row, fn, self, args, 1);
    if (g === null || typeof g !== "object") return g;
    const proto = getPrototypeOf(g);
    for (const k of ["next", "return", "throw"]) {
      const orig = proto && proto[k];
      if (typeof orig !== "function") continue;
      const w = { [k]() { return run(row, orig, this, arguments, 0); } }[k];
      masks.set(w, orig);
      // Own and non-enumerable: for-of, spread and destructuring find it; keys do not.
      defineProperty(g, k, { value: w, writable: true, configurable: true, enumerable: false });
    }
    return g;
  }

  // ---- wrapping ----------------------------------------------------------------------
  function instRow(site, self) {
    if (self === null || (typeof self !== "object" && typeof self !== "function")) {
      return site.row;
    }
    let inst = instances.get(self);
    if (inst === undefined) {
      inst = { rec: site.rec, n: ++site.rec.count };
      instances.set(self, inst);
    }
    let row = site.byInst.get(inst.n);
    if (row === undefined) {
      row = newRow(site.rec, site.method, site.kind, inst.n);
      site.byInst.set(inst.n, row);
    }
    return row;
  }

  // Statics are named like methods (`Shape.make`) and told apart by their kind.
  function siteFor(rec, method, kind, isStatic) {
    const key = rec.id + (isStatic ? "\0static\0" : "\0") + method;
    let site = sites.get(key);
    if (site === undefined) {
      site = { rec, method, kind, isStatic: !!isStatic, row: newRow(rec, method, kind, null), byInst: null };
      // statics and constructors are not split by instance
      if (byInstance && !isStatic && kind !== "constructor") {
        site.byInst = new Map();
      }
      sites.set(key, site);
    }
    return site;
  }

  function copyProp(w, fn, k) {
    const d = getOwnPropertyDescriptor(fn, k);
    try {
      if (d) defineProperty(w, k, d);
      else delete w[k];
    } catch (e) {
      // a frozen original's name/length: the wrapper keeps its own
    }
  }

  function isClass(fn) {
    try {
      return apply(fnToString, fn, []).startsWith("class");
    } catch (e) {
      return false;
    }
  }

  function wrapFn(fn, site) {
    let w;
    const proto = getPrototypeOf(fn);
    const staticPrefix = site.isStatic ? "static " : "";
    if (proto === AsyncFunctionProto) {
      site.kind = site.row.kind = staticPrefix + "async";
      w = { m() { return runAsync(site.byInst ? instRow(site, this) : site.row, fn, this, arguments); } }.m;
    } else if (proto === GeneratorFunctionProto || proto === AsyncGeneratorFunctionProto) {
      site.kind = site.row.kind = staticPrefix + "generator";
      w = { m() { return runGen(site.byInst ? instRow(site, this) : site.row, fn, this, arguments); } }.m;
    } else if (hasOwn(fn, "prototype")) {
      // A plain `function`: it may be called with `new`, so the wrapper must be too.
      w = function () {
        if (new.target !== undefined) return construct(fn, arguments, new.target === w ? fn : new.target);
        return run(site.byInst ? instRow(site, this) : site.row, fn, this, arguments, 1);
      };
      try { w.prototype = fn.prototype; } catch (e) { /* keep the wrapper's own */ }
    } else {
      // method syntax: like the original method, not a constructor and no .prototype
      w = { m() { return run(site.byInst ? instRow(site, this) : site.row, fn, this, arguments, 1); } }.m;
    }
    copyProp(w, fn, "length");
    copyProp(w, fn, "name");
    masks.set(w, fn);
    wrappers.add(w);
    return w;
  }

  function keyLabel(key) {
    return typeof key === "symbol" ? "[" + (key.description || "") + "]" : String(key);
  }

  const SKIP_STATIC = new Set(["length", "name", "prototype", "caller", "arguments"]);

  function wrapProp(rec, obj, key, isStatic) {
    let d;
    try {
      d = getOwnPropertyDescriptor(obj, key);
    } catch (e) {
      return;
    }
    if (!d) return;
    const label = keyLabel(key);
    const staticPrefix = isStatic ? "static " : "";
    let changed = false;
    if ("value" in d) {
      const f = d.value;
      if (typeof f !== "function" || wrappers.has(f) || recOf.has(f) || isClass(f)) return;
      if (!d.writable && !d.configurable) return;
      d.value = wrapFn(f, siteFor(rec, label, isStatic ? "static" : "method", isStatic));
      changed = true;
    } else {
      if (!d.configurable) return;
      if (typeof d.get === "function" && !wrappers.has(d.get)) {
        d.get = wrapFn(d.get, siteFor(rec, "get " + label, staticPrefix + "get", isStatic));
        changed = true;
      }
      if (typeof d.set === "function" && !wrappers.has(d.set)) {
        d.set = wrapFn(d.set, siteFor(rec, "set " + label, staticPrefix + "set", isStatic));
        changed = true;
      }
    }
    if (changed) {
      try { defineProperty(obj, key, d); } catch (e) { /* frozen: leave it */ }
    }
  }

  // A function property added later to a watched prototype, class or instance.
  function noteAdded(target, key) {
    const o = owners.get(target);
    if (o === undefined || !o.rec.watched) return;
    if (o.role === "instance" && ctorDepth > 0) return; // construction-time state
    wrapProp(o.rec, o.obj, key, o.role === "static");
  }

  // ---- later additions: a Proxy spliced into the prototype chain ------------------------
  // Assigning a property an object (and its chain below this point) does not have walks
  // up to here: the set trap does the ordinary [[Set]] and then wraps the new function.
  // Its target inherits from Object.prototype, so lookups and instanceof Object still work.
  const chainTarget = O.create(O.prototype);
  const chainProxy = new ProxyC(chainTarget, {
    set(t, key, value, receiver) {
      const ok = rset(t, key, value, receiver);
      if (ok && typeof value === "function") noteAdded(receiver, key);
      return ok;
    },
  });

  function spliceChain(proto) {
    let o = proto;
    for (let i = 0; i < 10000 && o !== null; i++) {
      const q = getPrototypeOf(o);
      if (q === chainProxy) return;
      if (q === O.prototype) {
        try { setPrototypeOf(o, chainProxy); } catch (e) { /* non-extensible */ }
        return;
      }
      o = q;
    }
  }

  // ---- classes -----------------------------------------------------------------------
  function watchRec(rec) {
    if (rec.watched) return;
    rec.watched = true;
    const C = rec.raw;
    const P = C.prototype;
    if (P !== null && typeof P === "object") {
      for (const k of ownKeys(P)) if (k !== "constructor") wrapProp(rec, P, k, false);
      owners.set(P, { rec, role: "proto", obj: P });
      spliceChain(P);
    }
    for (const k of ownKeys(C)) if (!SKIP_STATIC.has(k)) wrapProp(rec, C, k, true);
    owners.set(C, { rec, role: "static", obj: C });
    if (rec.proxy) owners.set(rec.proxy, { rec, role: "static", obj: C });
  }

  function newRec(C, name, line) {
    const rec = {
      id: classes.length, name, line, raw: C, proxy: null, watched: false, count: 0,
      ctorSite: null,
    };
    classes.push(rec);
    recOf.set(C, rec);
    return rec;
  }

  function classProxy(rec) {
    const C = rec.raw;
    const handler = {
      construct(target, args, newTarget) {
        if (!rec.watched) return construct(target, args, newTarget);
        if (rec.ctorSite === null) rec.ctorSite = siteFor(rec, "constructor", "constructor");
        ctorDepth++;
        let obj;
        // The constructor sees the raw class as new.target, as without jsprof: its own
        // body compares new.target with the inner binding (`new.target === Shape`).
        const nt = recOf.get(newTarget);
        const rawTarget = nt !== undefined && nt.proxy === newTarget ? nt.raw : newTarget;
        try {
          obj = run(rec.ctorSite.row, construct, undefined, [target, args, rawTarget], 1);
        } finally {
          ctorDepth--;
        }
        // The most-derived watched class names the instance; inner super() calls defer.
        const outer = recOf.get(newTarget);
        if (newTarget === proxy || outer === undefined || !outer.watched) {
          const prev = instances.get(obj);
          if (prev === undefined || prev.rec !== rec) {
            instances.set(obj, { rec, n: prev ? prev.n : ++rec.count });
          }
          owners.set(obj, { rec, role: "instance", obj });
        }
        return obj;
      },
      set(target, key, value, receiver) {
        const ok = rset(target, key, value, receiver);
        if (ok && typeof value === "function") noteAdded(receiver, key);
        return ok;
      },
    };
    const proxy = new ProxyC(C, handler);
    rec.proxy = proxy;
    recOf.set(proxy, rec);
    masks.set(proxy, C);
    // `obj.constructor === Shape` outside the class body keeps holding.
    const d = getOwnPropertyDescriptor(C.prototype, "constructor");
    if (d && d.value === C && d.writable) {
      d.value = proxy;
      defineProperty(C.prototype, "constructor", d);
    }
    return proxy;
  }

  // mode: undefined = class declaration (rebound to the result), 0/1 = class expression
  // (1: the spec would have inferred `hint` as its name), 2 = registered from a static
  // block (`export default class {}`; no constructor timing), 3 = the class's inner
  // binding used inside its own body (`new Shape()`, `extends Shape`): the watched class,
  // registered here already when a static initializer runs before the class is complete.
  function register(C, hint, line, mode) {
    if (typeof C !== "function") return C;
    const known = recOf.get(C);
    if (known !== undefined) return known.proxy || C;
    if (mode === 3 && !isClass(C)) return C; // the name is shadowed by a plain function
    if (mode === 1 && typeof hint === "string") {
      const d = getOwnPropertyDescriptor(C, "name");
      if (!d || d.value === "") defineProperty(C, "name", { value: hint, configurable: true });
    }
    let name = typeof C.name === "string" && C.name !== "" ? C.name : hint;
    if (typeof name !== "string" || name === "") name = "(anonymous class)";
    const rec = newRec(C, name, line);
    const out = mode === 2 ? C : classProxy(rec);
    if (watchAll || watchedNames.has(name)) watchRec(rec);
    return out;
  }

  // ---- invisibility: toString, getPrototypeOf, defineProperty ----------------------------
  const patched = {
    toString() {
      const o = masks.get(this);
      return apply(fnToString, o === undefined ? this : o, arguments);
    },
    getPrototypeOf(o) {
      const p = getPrototypeOf(o);
      return p === chainProxy ? O.prototype : p;
    },
    reflectGetPrototypeOf(o) {
      const p = reflectGetPrototypeOf(o);
      return p === chainProxy ? O.prototype : p;
    },
    defineProperty(o, k, d) {
      const r = defineProperty(o, k, d);
      if (owners.has(o)) noteAdded(o, k);
      return r;
    },
    defineProperties(o, ds) {
      const r = defineProperties(o, ds);
      if (owners.has(o)) for (const k of ownKeys(O(ds))) noteAdded(o, k);
      return r;
    },
    reflectDefineProperty(o, k, d) {
      const r = reflectDefineProperty(o, k, d);
      if (r && owners.has(o)) noteAdded(o, k);
      return r;
    },
  };
  function install(obj, key, fn, orig) {
    masks.set(fn, orig);
    copyProp(fn, orig, "name");
    copyProp(fn, orig, "length");
    const d = getOwnPropertyDescriptor(obj, key);
    d.value = fn;
    defineProperty(obj, key, d);
  }
  install(Function.prototype, "toString", patched.toString, fnToString);
  install(O, "getPrototypeOf", patched.getPrototypeOf, getPrototypeOf);
  install(R, "getPrototypeOf", patched.reflectGetPrototypeOf, reflectGetPrototypeOf);
  install(O, "defineProperty", patched.defineProperty, defineProperty);
  install(O, "defineProperties", patched.defineProperties, defineProperties);
  install(R, "defineProperty", patched.reflectDefineProperty, reflectDefineProperty);
  const protoDesc = getOwnPropertyDescriptor(O.prototype, "__proto__");
  if (protoDesc && protoDesc.get) {
    const origGet = protoDesc.get;
    const get = { get __proto__() {
      const p = apply(origGet, this, []);
      return p === chainProxy ? O.prototype : p;
    } };
    const g = getOwnPropertyDescriptor(get, "__proto__").get;
    masks.set(g, origGet);
    copyProp(g, origGet, "name");
    protoDesc.get = g;
    defineProperty(O.prototype, "__proto__", protoDesc);
  }

  // ---- the jsprof global -------------------------------------------------------------
  function rowData(row) {
    const async = row.kind === "async";
    const total = async ? row.settleTotal : row.total;
    const out = {
      class: row.cls,
      method: row.method,
      kind: row.kind,
      calls: row.calls,
      total_ms: total,
      self_ms: row.self,
      mean_ms: row.calls ? total / (async ? row.settled || 1 : row.calls) : 0,
      max_ms: async ? row.settleMax : row.max,
    };
    if (async) {
      out.sync_ms = row.total;
      out.settled = row.settled;
    }
    if (row.instance !== null) out.instance = row.instance;
    return out;
  }

  function report() {
    const out = [];
    for (const row of rows) if (row.calls > 0 || row.settled > 0) out.push(rowData(row));
    out.sort((a, b) => b.self_ms - a.self_ms);
    return out;
  }

  const jsprof = {
    watch(...names) {
      for (const n of names) {
        if (typeof n === "function") {
          const rec = recOf.get(n) || newRec(n, n.name || "(anonymous class)", 0);
          watchRec(rec);
          continue;
        }
        const s = String(n);
        if (s === "*") watchAll = true;
        watchedNames.add(s);
        for (const rec of classes) if (watchAll || rec.name === s) watchRec(rec);
      }
    },
    // Watch one object that no watched class made (e.g. one array): wrappers of its
    // class's methods become own non-enumerable properties of that object only.
    profile(klass, instance) {
      const name = typeof klass === "function" ? klass.name || "(anonymous class)" : String(klass);
      let rec = typeof klass === "function" ? recOf.get(klass) : undefined;
      if (rec === undefined) {
        rec = {
          id: classes.length, name, line: 0, raw: null, proxy: null, watched: true, count: 0,
          ctorSite: null,
        };
        classes.push(rec);
        if (typeof klass === "function") recOf.set(klass, rec);
      }
      const seen = new Set();
      for (let p = getPrototypeOf(instance); p !== null && p !== O.prototype; p = getPrototypeOf(p)) {
        for (const k of ownKeys(p)) {
          if (k === "constructor" || seen.has(k) || hasOwn(instance, k)) continue;
          seen.add(k);
          const d = getOwnPropertyDescriptor(p, k);
          if (!("value" in d) || typeof d.value !== "function") continue;
          const w = wrapFn(d.value, siteFor(rec, keyLabel(k), "method"));
          defineProperty(instance, k, { value: w, writable: true, configurable: true, enumerable: false });
        }
      }
      for (const k of ownKeys(instance)) wrapProp(rec, instance, k, false);
      owners.set(instance, { rec, role: "instance", obj: instance });
      return instance;
    },
    report,
  };
  defineProperty(G, "jsprof", { value: jsprof, writable: true, configurable: true, enumerable: false });
  defineProperty(G, "__jsprof_register", { value: register, writable: false, configurable: true, enumerable: false });
  defineProperty(G, "__jsprof_dump", {
    value() {
      const openCalls = closeOpenCalls();
      const allRows = [];
      for (const row of rows) allRows.push(rowData(row));
      return stringify({
        timeOrigin: perf.timeOrigin,
        rows: allRows,
        classes: classes.map((c) => ({ name: c.name, line: c.line, watched: c.watched })),
        spans: { start: spanStart, end: spanEnd, frame: spanFrame, parent: spanParent },
        spansDropped,
        openCalls,
      });
    },
    writable: false, configurable: true, enumerable: false,
  });
})();
