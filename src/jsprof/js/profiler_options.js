// WebIDL conversion of the spec's ProfilerInitOptions, shared by the `Profiler` globals of
// Node (required by node_profiler.js) and QuickJS (jsprof's host evaluates it in the same
// scope as quickjs_profiler.js, so it adds no global). Returns {sampleInterval,
// maxBufferSize} or throws what Chromium throws.
'use strict';

// WebIDL `unsigned long`: ToNumber, truncate, modulo 2^32; NaN and infinities give 0.
function toUnsignedLong(v) {
  const x = Number(v);
  if (!Number.isFinite(x)) return 0;
  const t = Math.trunc(x);
  return ((t % 4294967296) + 4294967296) % 4294967296;
}

function readProfilerOptions(options) {
  // WebIDL converts the dictionary's members in lexicographic order, so a missing
  // maxBufferSize is reported before anything about sampleInterval.
  if (options !== undefined && options !== null && typeof options !== 'object' &&
      typeof options !== 'function') {
    throw new TypeError("Failed to construct 'Profiler': The provided value is not of type 'ProfilerInitOptions'.");
  }
  const opts = options == null ? {} : options;
  const rawMax = opts.maxBufferSize;
  if (rawMax === undefined) {
    throw new TypeError("Failed to construct 'Profiler': Failed to read the 'maxBufferSize' property from 'ProfilerInitOptions': Required member is undefined.");
  }
  const maxBufferSize = toUnsignedLong(rawMax);
  const rawInterval = opts.sampleInterval;
  if (rawInterval === undefined) {
    throw new TypeError("Failed to construct 'Profiler': Failed to read the 'sampleInterval' property from 'ProfilerInitOptions': Required member is undefined.");
  }
  const sampleInterval = Number(rawInterval);
  if (!Number.isFinite(sampleInterval)) {
    throw new TypeError("Failed to construct 'Profiler': Failed to read the 'sampleInterval' property from 'ProfilerInitOptions': The provided double value is non-finite.");
  }
  if (sampleInterval < 0) {
    throw new RangeError("Failed to construct 'Profiler': sampleInterval must be non-negative.");
  }
  return { sampleInterval, maxBufferSize };
}

if (typeof module === 'object' && module && module.exports) module.exports = readProfilerOptions;
