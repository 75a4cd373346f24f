// Read a Chrome trace with Chrome DevTools' own trace engine (the npm
// `@paulirish/trace_engine`, DevTools' models/trace as Lighthouse uses it) and print, per
// CPU profile it finds, the samples as DevTools' CPU profile model has them: each sample's
// stack as function names, root first, and its timestamp (ms on the trace's clock).
// Usage: node read-chrome-trace.mjs FILE
import {analyzeTrace} from '@paulirish/trace_engine/analyze-trace.mjs';

const {parsedTrace} = await analyzeTrace(process.argv[2]);
const out = [];
for (const [pid, threads] of parsedTrace.data.Samples.profilesInProcess) {
  for (const [tid, p] of threads) {
    const model = p.parsedProfile;
    const stacks = model.samples.map((id) => {
      const names = [];
      for (let n = model.nodeById(id); n && n.parent; n = n.parent) names.push(n.functionName);
      return names.reverse();
    });
    out.push({pid, tid, stacks, timestamps: model.timestamps.slice(0, stacks.length)});
  }
}
process.stdout.write(JSON.stringify(out));
