// 50/30/20 split of busy time between three functions (loaded by a generated page).
function spin(ms) { const end = performance.now() + ms; let x = 0; while (performance.now() < end) x++; return x; }
function fifty() { return spin(25); }
function thirty() { return spin(15); }
function twenty() { return spin(10); }
for (let i = 0; i < 40; i++) { fifty(); thirty(); twenty(); }
console.log('split done');
