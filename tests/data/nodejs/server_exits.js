// Runs ~2.5 s doing work every few ms, then exits by itself.
function tick() { const end = Date.now() + 3; let x = 0; while (Date.now() < end) x++; return x; }
setInterval(tick, 5);
setTimeout(() => process.exit(0), 2500);
console.log('ready');
