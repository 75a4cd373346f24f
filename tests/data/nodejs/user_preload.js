// A user's own preload (node --require): its time is Node's start-up of the script and
// stays in the profile, unlike jsprof's own preload.
function preloadWork() {
  const t0 = Date.now();
  let s = 0;
  while (Date.now() - t0 < 40) s += Math.sqrt(s + 1);
  return s;
}
globalThis.preloaded = preloadWork() > 0;
