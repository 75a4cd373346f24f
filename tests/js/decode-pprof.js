// Decode a (gzipped) pprof file with the npm `pprof-format` package and print it as JSON,
// with string indices resolved, so tests can compare it with what jsprof meant to write.
// Usage: node decode-pprof.js FILE
'use strict';
const fs = require('fs');
const zlib = require('zlib');
const { Profile } = require('pprof-format');

let buf = fs.readFileSync(process.argv[2]);
if (buf[0] === 0x1f && buf[1] === 0x8b) buf = zlib.gunzipSync(buf);
const p = Profile.decode(buf);
const str = (i) => p.stringTable.strings[Number(i)];
const num = (v) => Number(v);
const out = {
  sampleType: p.sampleType.map((t) => [str(t.type), str(t.unit)]),
  periodType: p.periodType ? [str(p.periodType.type), str(p.periodType.unit)] : null,
  period: num(p.period),
  timeNanos: num(p.timeNanos),
  durationNanos: num(p.durationNanos),
  comments: (p.comment || []).map(str),
  samples: p.sample.map((s) => ({
    locationId: s.locationId.map(num),
    value: s.value.map(num),
    labels: Object.fromEntries(s.label.map((l) => [str(l.key), str(l.str)])),
  })),
  locations: p.location.map((l) => ({
    id: num(l.id),
    lines: l.line.map((x) => ({ functionId: num(x.functionId), line: num(x.line) })),
  })),
  functions: p.function.map((f) => ({
    id: num(f.id), name: str(f.name), filename: str(f.filename), startLine: num(f.startLine),
  })),
};
process.stdout.write(JSON.stringify(out));
