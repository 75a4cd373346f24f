// Fixture for the instrumenting profiler: inheritance, a mixin added after construction,
// getters/setters, statics, recursion, a throwing method, async and generator methods.
class Shape {
  constructor(name) { this.name = name; }
  area() { return 0; }
  describe() { return this.name + " area " + this.area().toFixed(2); }
  get label() { return "<" + this.name + ">"; }
  set label(v) { this.name = v; }
  static create(name) { return new Shape(name); }
}

class Circle extends Shape {
  constructor(r) { super("circle"); this.r = r; }
  area() { return Math.PI * this.r * this.r; }
}

class Square extends Shape {
  constructor(s) { super("square"); this.s = s; }
  area() { return this.s * this.s; }
}

class MathBox {
  fib(n) { return n < 2 ? n : this.fib(n - 1) + this.fib(n - 2); }
  fail(x) { throw new RangeError("bad " + x); }
  async later(v) { await null; return v * 2; }
  *count(n) { for (let i = 0; i < n; i++) yield i; }
}

const shapes = [];
for (let i = 0; i < 3; i++) shapes.push(new Circle(i + 1));
for (let i = 0; i < 2; i++) shapes.push(new Square(i + 1));
shapes.push(Shape.create("plain"));
for (const s of shapes) console.log(s.describe());

// A mixin copied onto the prototype after the class was defined ...
const Greeter = { greet() { return "hi " + this.name; } };
Object.assign(Shape.prototype, Greeter);
console.log(shapes[0].greet(), shapes[5].greet());
// ... and one copied onto a single instance after construction.
Object.assign(shapes[1], { wave() { return "wave from " + this.name; } });
console.log(shapes[1].wave());

const c = shapes[0];
console.log(c.label);
c.label = "round";
console.log(c.label, c instanceof Circle, c instanceof Shape, c.constructor === Circle);
console.log(Circle.name, Circle.length, Shape.prototype.area.name, Shape.prototype.area.length);
console.log(Object.getPrototypeOf(Shape.prototype) === Object.prototype, String(MathBox).slice(0, 14));

const m = new MathBox();
console.log(m.fib(10));
try {
  m.fail(7);
} catch (e) {
  console.log("caught", e instanceof RangeError, e.message);
}
console.log([...m.count(4)].join(","));
m.later(21).then((v) => console.log("later", v));
m.later(1).then((v) => console.log("later", v));
