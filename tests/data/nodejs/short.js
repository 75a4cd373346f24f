// A short CPU-bound script: most of a recording of it is start-up and this loop.
function shortWork() {
  const t0 = Date.now();
  let s = 0;
  while (Date.now() - t0 < 30) s += Math.sqrt(s + 1);
  return s;
}
if (!(shortWork() > 0)) throw new Error('unreachable');
