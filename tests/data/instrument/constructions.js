// Fixture: every way to construct a watched class (issue 11), and new.target checks that
// must behave as without jsprof.
class Shape {
  static ORIGIN = new Shape("origin"); // a static initializer, before the class is complete
  static Unit = class extends Shape { constructor() { super("unit"); } }; // super() via the body
  constructor(name) { this.name = name; }
  static make(name) { return new Shape(name); } // the class's inner binding
  static *many(n) { for (let i = 0; i < n; i++) yield new Shape("m" + i); }
  static get count() { return 0; }
  clone() { return new this.constructor(this.name); }
}

class Circle extends Shape {
  constructor(r) { super("circle"); this.r = r; }
}

class Abstract {
  constructor() { if (new.target === Abstract) throw new TypeError("abstract"); }
}
class Concrete extends Abstract {}

const made = [
  new Shape("direct"),
  Shape.make("factory"),
  ...Shape.many(2),
  new Circle(1),
  new Shape.Unit(),
  Reflect.construct(Shape, ["reflect"]),
];
made.push(made[0].clone());
console.log(made.length, Shape.ORIGIN.name, Shape.count, made.every((s) => s instanceof Shape));
try {
  new Abstract();
  console.log("abstract did not throw");
} catch (e) {
  console.log("abstract throws", e instanceof TypeError);
}
console.log("concrete", new Concrete() instanceof Abstract);
