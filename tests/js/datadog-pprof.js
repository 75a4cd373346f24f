// Profile a small CPU-bound program with the real npm `@datadog/pprof` (V8's CPU profiler
// through its native addon) and write the gzipped pprof bytes it encodes.
// Usage: node datadog-pprof.js OUT [DURATION_MS]
'use strict';
const fs = require('fs');
const { time, encode } = require('@datadog/pprof');

function busyLoop(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x += Math.sqrt(i) * Math.sin(i);
  return x;
}

function lightWork(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x += (i * 7) % 13;
  return x;
}

function mainLoop(deadline) {
  let sink = 0;
  while (Date.now() < deadline) {
    sink += busyLoop(200000);
    sink += lightWork(100000);
  }
  return sink;
}

async function run() {
  const out = process.argv[2];
  const duration = Number(process.argv[3] || 600);
  const done = time.profile({ durationMillis: duration, intervalMicros: 1000 });
  // Busy until the profile ends; the profiler's timer fires on the event loop after that.
  setImmediate(() => {
    mainLoop(Date.now() + duration);
  });
  const profile = await done;
  fs.writeFileSync(out, await encode(profile));
}

run().catch((e) => {
  console.error(e);
  process.exit(1);
});
