// Fixture for tests/test_quickjs.py: every function spins ms of its own running (CPU clock).
function spin(ms) { let ran = 0, t = performance.now(); while (ran < ms) { const n = performance.now(); if (n - t < 1) ran += n - t; t = n; } }
function declared() { spin(15); }
const expr = function () { spin(15); };
const named = function inner() { spin(15); };
const arrow = () => { spin(15); };
const arrowParam = x => { spin(15); };
class Shape {
  constructor() { spin(15); }
  method() { spin(15); }
  get area() { spin(15); return 1; }
  set area(v) { spin(15); }
  static create() { spin(15); }
  static get kind() { spin(15); return 'k'; }
}
const obj = {
  plain() { spin(15); },
  prop: function () { spin(15); },
  ['comp' + 'uted']() { spin(15); },
};
declared(); expr(); named(); arrow(); arrowParam(1);
const s = new Shape(); s.method(); s.area; s.area = 2; Shape.create(); Shape.kind;
obj.plain(); obj.prop(); obj.computed();
(function () { spin(15); })();
[1].forEach(function () { spin(15); });
spin(15);
const pp = {}; pp.next = function () { spin(15); }; pp.next();
