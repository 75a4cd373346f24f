// 50/30/20 split of busy time between three functions.
function spin(ms) { const end = Date.now() + ms; let x = 0; while (Date.now() < end) x++; return x; }
function fifty() { return spin(5); }
function thirty() { return spin(3); }
function twenty() { return spin(2); }
for (let i = 0; i < 100; i++) { fifty(); thirty(); twenty(); }
