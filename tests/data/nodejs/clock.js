// Sessions started while V8's profiler already runs: how early can a first sample be?
const warm = new Profiler({ sampleInterval: 0.1, maxBufferSize: 100000 });
const spin = (ms) => { const end = performance.now() + ms; while (performance.now() < end) {} };
spin(200);
(async () => {
  let worst = Infinity;
  for (let i = 0; i < 30; i++) {
    const t0 = performance.now();
    const p = new Profiler({ sampleInterval: 0.1, maxBufferSize: 10000 });
    spin(5);
    const tr = await p.stop();
    if (tr.samples.length) worst = Math.min(worst, tr.samples[0].timestamp - t0);
  }
  console.log(JSON.stringify({ worst, tag: Object.prototype.toString.call(warm) }));
})();
