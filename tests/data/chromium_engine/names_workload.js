// Functions of every kind, each busy long enough to be seen at a 10 ms interval.
function spin(ms) { const end = performance.now() + ms; let x = 0; while (performance.now() < end) x++; return x; }
function declared() { return spin(60); }
const inferred = function () { return spin(60); };
const arrow = () => spin(60);
class Shape {
  constructor(n) { this.n = n; spin(60); }
  area() { return spin(60); }
  get size() { return spin(60); }
  set size(v) { spin(60); }
  static make() { return new Shape(1); }
}
const anonymous = [function () { return spin(60); }][0];
function workload() {
  for (let i = 0; i < 3; i++) {
    declared(); inferred(); arrow();
    const s = Shape.make(); s.area(); s.size; s.size = 2;
    anonymous();
  }
}
