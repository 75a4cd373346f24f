"""JavaScript the QuickJS sampler tests share (duplicates D1): the sort tests' data, made
the same way wherever a comparator is measured, so their numbers compare."""

from __future__ import annotations

# `n` objects of three 10-bit fields from a linear congruential generator: the same array
# for the same seed on every engine, with no call into a built-in per element but push
# (the comparators' time is their own, not the data's).
MAKE_DATA = """\
function makeData(n, seed) {
  const a = [];
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    a.push({ x: x & 1023, y: (x >> 10) & 1023, z: (x >> 20) & 1023 });
  }
  return a;
}
"""
