// Write a small gzipped pprof with the npm `pprof-format` encoder: a file from another
// producer for jsprof's reader. Stacks (root first) and counts come from argv[3] as JSON:
// [{"stack": [["name", "file", startLine, line], ...], "count": N, "ns": T}, ...]
// Usage: node encode-pprof.js OUT SPEC_JSON
'use strict';
const fs = require('fs');
const zlib = require('zlib');
const { Profile, StringTable, ValueType, Sample, Location, Line, Function: Fn } =
  require('pprof-format');

const spec = JSON.parse(process.argv[3]);
const st = new StringTable();
const functions = new Map();
const locations = [];
const fns = [];
const fnId = (name, file, startLine) => {
  const key = JSON.stringify([name, file, startLine]);
  if (!functions.has(key)) {
    const id = functions.size + 1;
    functions.set(key, id);
    fns.push(new Fn({ id, name: st.dedup(name), systemName: st.dedup(name),
                      filename: st.dedup(file), startLine }));
  }
  return functions.get(key);
};
const samples = spec.map(({ stack, count, ns }) => {
  // pprof lists locations leaf first; here every frame gets its own location.
  const ids = stack.map(([name, file, startLine, line]) => {
    const id = locations.length + 1;
    locations.push(new Location({ id, line: [new Line({ functionId: fnId(name, file, startLine), line })] }));
    return id;
  }).reverse();
  return new Sample({ locationId: ids, value: [count, ns] });
});
const profile = new Profile({
  sampleType: [new ValueType({ type: st.dedup('sample'), unit: st.dedup('count') }),
               new ValueType({ type: st.dedup('wall'), unit: st.dedup('nanoseconds') })],
  sample: samples,
  location: locations,
  function: fns,
  stringTable: st,
  timeNanos: 1700000000000000000n,
  durationNanos: 1000000000,
  periodType: new ValueType({ type: st.dedup('wall'), unit: st.dedup('nanoseconds') }),
  period: 1000000,
});
fs.writeFileSync(process.argv[2], zlib.gzipSync(profile.encode()));
