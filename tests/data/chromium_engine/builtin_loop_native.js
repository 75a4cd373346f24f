// Chromium's native Profiler over a busy loop that calls built-ins and allocates: the
// page prints its trace (jsprof run). Many of its samples come back with no stack
// (docs/engines.md, "Chromium's own Profiler loses stacks").
function builtinLoop(ms) {
  const end = performance.now() + ms;
  const re = /^(\d+)-(\d+)$/;
  let n = 0;
  let s = '';
  while (performance.now() < end) {
    for (let i = 0; i < 200; i++) {
      if (String(i).includes('7')) n++;
      s += i;
      if (s.length > 200000) s = '';
      if (re.test(i + '-' + n)) n++;
    }
    n += [5, 3, 9, 1, 7, 2, 8].map(String).sort()[0].length;
  }
  return n;
}
(async () => {
  const profiler = new Profiler({ sampleInterval: 10, maxBufferSize: 100000 });
  builtinLoop(800);
  console.log(JSON.stringify(await profiler.stop()));
  window.close();
})();
