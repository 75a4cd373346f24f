// jsprof demo app: a tiny "build pipeline" with a few distinct hot spots, so the report
// has something to show: parsing (JSON.parse is charged to `loadConfig`), a CPU-bound
// tokenizer, a sort with a comparator, an accessor, and an idle wait on a timer.
//
//   jsprof record examples/app.js && jsprof report app.quickjs.jsprof.json
//   jsprof record --engine node examples/app.js   (the same script on V8)
//   jsprof run examples/app.js 3      (the first argument: rounds, default 2)

// QuickJS passes the arguments as `scriptArgs` (the script first), Node as `process.argv`
// (node and the script first), a page none: the tour runs this file on all three engines.
const args = typeof scriptArgs !== "undefined" ? scriptArgs : typeof process !== "undefined" ? process.argv.slice(1) : [];
const rounds = Number(args[1] ?? 2);

function makeSource(n) {
  const parts = [];
  for (let i = 0; i < n; i++) parts.push(`let v${i} = (${i} * 31 + x${i % 7}) / 3; // ${i}`);
  return parts.join('\n');
}

function loadConfig() {
  const modules = Array.from({ length: 60000 }, (_, i) => ({ id: i, deps: [i % 13, i % 17] }));
  return JSON.parse(JSON.stringify({ modules }));
}

function tokenize(src) {
  const tokens = [];
  let i = 0;
  while (i < src.length) {
    const c = src.charCodeAt(i);
    if (c === 32 || c === 10) { i++; continue; }
    let j = i + 1;
    const word = (c >= 97 && c <= 122) || (c >= 48 && c <= 57);
    if (word) while (j < src.length && isWordChar(src.charCodeAt(j))) j++;
    tokens.push(src.slice(i, j));
    i = j;
  }
  return tokens;
}

const isWordChar = (c) => (c >= 97 && c <= 122) || (c >= 48 && c <= 57);

class Bundle {
  constructor(tokens) { this.tokens = tokens; }
  get weight() {
    let w = 0;
    for (const t of this.tokens) w += t.length * 3 + (t.charCodeAt(0) & 7);
    return w;
  }
  static rank(bundles) {
    return bundles.slice().sort((a, b) => a.tokens.length - b.tokens.length || a.id - b.id);
  }
}

function build(config, source) {
  const tokens = tokenize(source);
  const bundles = config.modules.slice(0, 20000).map((m) => Object.assign(new Bundle(tokens.slice(m.id % 50, m.id % 50 + m.deps[0])), { id: m.id }));
  const ranked = Bundle.rank(bundles);
  return new Bundle(tokens).weight + ranked.length;
}

async function main() {
  const t0 = performance.now();
  let total = 0;
  for (let r = 0; r < rounds; r++) {
    const config = loadConfig();
    total += build(config, makeSource(20000));
    await new Promise((resolve) => setTimeout(resolve, 50)); // idle: samples with no stack
  }
  console.log(`built ${rounds} rounds, checksum ${total}, ${(performance.now() - t0).toFixed(0)} ms`);
}

main();
