// A real-library workload every engine runs (QuickJS, Node, Chromium): marked, acorn and
// lodash from node_modules (installed by `make test`), plus the class syntax engines give
// odd positions (instance, private and static fields, static blocks, private methods,
// accessors), generators, async functions, timers and `new Function` code (lodash's
// templates). tests/test_corpus_roundtrip.py records it at a fine interval and checks
// every recording, in every format jsprof writes, reads back.
//
// Relative paths and one dynamic import, so the three engines load the same files:
// QuickJS resolves no bare specifiers, and lodash is a UMD script (Node hands it over as
// the CommonJS default export; as a module elsewhere it sets globalThis._).
import { marked, Lexer } from "./node_modules/marked/lib/marked.esm.js";
import * as acorn from "./node_modules/acorn/dist/acorn.mjs";

const lodashModule = await import("./node_modules/lodash/lodash.js");
const _ = lodashModule.default ?? globalThis._;

const ROUNDS = Number(globalThis.CORPUS_ROUNDS ?? 2);

class Counter {
  count = 0;                 // instance field
  #seen = new Set();         // private field
  static made = 0;           // static field
  static #registry = [];     // private static field
  static {                   // static block
    for (let i = 0; i < 2000; i++) Counter.made += i % 3;
    Counter.#registry.push("ready");
  }
  label = `counter ${Counter.made}`;
  add(x) { this.count++; this.#remember(x); return this; }
  #remember(x) { this.#seen.add(x); }
  get distinct() { return this.#seen.size; }
  static registered() { return Counter.#registry.length; }
}

class Tokens extends Counter {
  kinds = Object.create(null);   // a derived class's field
  see(type) { this.kinds[type] = (this.kinds[type] || 0) + 1; return this.add(type); }
}

function markdownDoc(n) {
  const parts = [];
  for (let i = 0; i < n; i++) {
    parts.push(
      `# Section ${i}\n\nSome *emphasis*, **strong**, \`code\` and a [link](https://example.org/${i}).\n`,
      `- item ${i}\n- item ${i + 1}\n  - nested\n\n> quote ${i}\n\n`,
      "```js\nconst x = " + i + ";\n```\n\n| a | b |\n|---|---|\n| " + i + " | " + (i * 2) + " |\n\n"
    );
  }
  return parts.join("");
}

// A source for acorn to parse: the class above and some generated functions.
function jsSource(n) {
  let src = Counter.toString() + "\n" + Tokens.toString() + "\n";
  for (let i = 0; i < n; i++) {
    src += `function f${i}(a, b = ${i}) { const o = { a, b, [\`k${i}\`]: a + b }; ` +
      `return [...Object.keys(o)].map((k) => o[k] * 2).filter(Boolean); }\n`;
  }
  return src;
}

function* walk(node) {
  if (!node || typeof node.type !== "string") return;
  yield node;
  for (const key of Object.keys(node)) {
    const v = node[key];
    if (Array.isArray(v)) for (const c of v) yield* walk(c);
    else if (v && typeof v.type === "string") yield* walk(v);
  }
}

function useMarked(doc) {
  const html = marked.parse(doc);
  const tokens = new Tokens();
  for (const t of Lexer.lex(doc)) tokens.see(t.type);
  return html.length + tokens.distinct;
}

function useAcorn(src) {
  const ast = acorn.parse(src, { ecmaVersion: "latest", sourceType: "module", locations: true });
  const c = new Tokens();
  for (const node of walk(ast)) c.see(node.type);
  return c.count;
}

function useLodash(n) {
  const rows = _.times(n, (i) => ({ id: i, group: `g${i % 7}`, score: (i * 7919) % 1000 }));
  const byGroup = _.groupBy(_.sortBy(rows, ["score", "id"]), "group");
  const tpl = _.template("<li><%- name %>: <%= total %></li>");
  const out = _.map(byGroup, (list, name) => tpl({ name, total: _.sumBy(list, "score") }));
  return _.chunk(_.uniq(_.flatMap(rows, (r) => [r.group, r.score % 10])), 3).length + out.length;
}

async function round(i) {
  await null;  // a promise job between rounds
  return useMarked(markdownDoc(20 + i)) + useAcorn(jsSource(30 + i)) + useLodash(2000 + i);
}

let total = 0;
for (let i = 0; i < ROUNDS; i++) total += await round(i);
await new Promise((resolve) => setTimeout(resolve, 5));  // the event loop's real wait
console.log(`corpus ok ${total > 0} ${Counter.registered()}`);
