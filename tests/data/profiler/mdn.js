// MDN's example of the JS Self-Profiling API, unchanged apart from the work.
function work() { let x = 0; for (let i = 0; i < 3e7; i++) x += i % 7; return x; }
(async () => {
  const profiler = new Profiler({ sampleInterval: 10, maxBufferSize: 10000 });
  work();
  const trace = await profiler.stop();
  console.log(JSON.stringify(trace));
})();
