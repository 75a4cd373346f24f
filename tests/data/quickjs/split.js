// 50/30/20 % busy split (tests/test_quickjs.py)
function spin(ms) { const t = performance.now(); while (performance.now() - t < ms) {} }
function fifty() { spin(500); }
function thirty() { spin(300); }
function twenty() { spin(200); }
fifty(); thirty(); twenty();
