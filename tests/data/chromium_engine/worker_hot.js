function workerSpin(ms) { const end = performance.now() + ms; let x = 0; while (performance.now() < end) x++; return x; }
function workerHot() { return workerSpin(400); }
workerHot();
postMessage('done');
