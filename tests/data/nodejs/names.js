function declared(n) { let s = 0; for (let i = 0; i < n; i++) s += i; return s; }
const arrow = (n) => declared(n);
class Shape {
  area(n) { return arrow(n); }
  get size() { return declared(50000); }
}
function busy(ms, f) { const end = Date.now() + ms; while (Date.now() < end) f(); }
const s = new Shape();
busy(300, () => s.area(100000));
busy(300, () => s.size);
