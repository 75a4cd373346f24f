// A short CPU-bound script: most of a recording of it is start-up and this loop.
// 30 ms of CPU, not of the wall clock: on a loaded machine 30 wall ms could pass with the
// thread descheduled throughout, and the loop went unsampled (CI, 8 samples in all).
function shortWork() {
  const t0 = process.cpuUsage();
  let s = 0;
  for (;;) {
    for (let i = 0; i < 1000; i++) s += Math.sqrt(s + 1);
    const d = process.cpuUsage(t0);
    if (d.user + d.system >= 30000) break;
  }
  return s;
}
if (!(shortWork() > 0)) throw new Error('unreachable');
