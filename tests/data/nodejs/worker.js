const { Worker, isMainThread } = require('node:worker_threads');
function spin(ms) { const end = Date.now() + ms; let x = 0; while (Date.now() < end) x++; return x; }
if (isMainThread) {
  function mainWork() { return spin(200); }
  const w = new Worker(__filename);
  mainWork();
  w.on('exit', () => { mainWork(); });
} else {
  function workerWork() { return spin(300); }
  workerWork();
}
