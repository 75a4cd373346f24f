// main -> worker -> worker: each thread spins in its own function.
const { Worker, isMainThread, workerData } = require('node:worker_threads');
function spin(ms) { const end = Date.now() + ms; let x = 0; while (Date.now() < end) x++; return x; }
function level0() { return spin(150); }
function level1() { return spin(250); }
function level2() { return spin(250); }
const depth = isMainThread ? 0 : workerData;
if (depth < 2) new Worker(__filename, { workerData: depth + 1 });
[level0, level1, level2][depth]();
