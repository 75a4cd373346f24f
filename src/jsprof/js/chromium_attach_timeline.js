// `record --cdp`: the page's long animation frames and interactions in a tab jsprof attached
// to (its page helper is not there). The browser client's Timeline (inlined at the marker,
// engines/chromium/helper.py), observing with `buffered`, so what came before the attach is
// there too; `stop()` disconnects it and takes the global away, leaving the tab as it was.
(() => {
  'use strict';
  const g = globalThis;
  if (Object.prototype.hasOwnProperty.call(g, '__jsprofTimeline')) return;
  /*jsprof:timeline*/
  const perf = g.performance;
  const sT = g.setTimeout;
  const rAF0 = typeof g.requestAnimationFrame === 'function' ? g.requestAnimationFrame : null;
  const timeline = new Timeline();
  timeline.start();
  Object.defineProperty(g, '__jsprofTimeline', {
    enumerable: false,
    configurable: true,
    value: Object.freeze({
      // As the page helper's __jsprof.timeline (js/chromium_page.js): `last` waits for
      // the next frames, so the last interaction is reported.
      timeline: (last) => {
        const take = () => [perf.timeOrigin, timeline.take()];
        if (!last) return take();
        return new Promise((resolve) => {
          let done = false;
          const end = () => { if (!done) { done = true; resolve(take()); } };
          if (rAF0) rAF0.call(g, () => rAF0.call(g, () => sT.call(g, end, 50)));
          sT.call(g, end, 500);
        });
      },
      stop: () => { timeline.stop(); delete g.__jsprofTimeline; },
    }),
  });
})();
