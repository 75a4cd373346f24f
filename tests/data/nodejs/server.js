// A long-running process for --pid: does a little work every few ms until killed.
function tick() { const end = Date.now() + 3; let x = 0; while (Date.now() < end) x++; return x; }
setInterval(tick, 5);
console.log('ready');
