// The Profiler global inside a worker thread: each isolate profiles itself.
const { Worker, isMainThread, parentPort } = require('node:worker_threads');
function spinInWorker(ms) { const end = Date.now() + ms; while (Date.now() < end); }
if (isMainThread) {
  const w = new Worker(__filename);
  w.on('message', (m) => console.log(m));
} else {
  (async () => {
    // 100 ms, then longer while a session got fewer than 10 samples: a loaded machine can
    // keep the thread or V8's sampler off the CPU for most of 100 wall ms (CI: 8 samples).
    let t;
    for (let ms = 100; ms <= 1600; ms *= 2) {
      const p = new Profiler({ sampleInterval: 1, maxBufferSize: 10000 });
      spinInWorker(ms);
      t = await p.stop();
      if (t.samples.length >= 10) break;
    }
    parentPort.postMessage(JSON.stringify({ n: t.samples.length, names: t.frames.map((f) => f.name) }));
  })();
}
