// A logging loop: console output must not cost more under the profiler than without it.
const t = performance.now();
for (let i = 0; i < 20000; i++) console.log('line', i, { a: i });
console.error('loop ms', (performance.now() - t).toFixed(1));
