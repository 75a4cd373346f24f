export function busy(ms) { const t = performance.now(); while (performance.now() - t < ms) {} }
export const answer = 42;
