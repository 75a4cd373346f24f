// The Profiler global inside a worker thread: each isolate profiles itself.
const { Worker, isMainThread, parentPort } = require('node:worker_threads');
function spinInWorker(ms) { const end = Date.now() + ms; while (Date.now() < end); }
if (isMainThread) {
  const w = new Worker(__filename);
  w.on('message', (m) => console.log(m));
} else {
  (async () => {
    const p = new Profiler({ sampleInterval: 1, maxBufferSize: 1000 });
    spinInWorker(100);
    const t = await p.stop();
    parentPort.postMessage(JSON.stringify({ n: t.samples.length, names: t.frames.map((f) => f.name) }));
  })();
}
