function spin(ms) { const end = performance.now() + ms; let x = 0; while (performance.now() < end) x++; return x; }
function beforeClose() { return spin(200); }
beforeClose();
console.log('closing');
// An interval that would keep the page alive: window.close() ends the run anyway.
setInterval(() => {}, 50);
setTimeout(() => window.close(), 100);
