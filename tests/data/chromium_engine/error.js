function spin(ms) { const end = performance.now() + ms; let x = 0; while (performance.now() < end) x++; return x; }
function failing() { spin(100); throw new TypeError('bad thing'); }
console.log('before');
console.error('to stderr', 42);
setTimeout(failing, 10);
