class Boom {
  go() { throw new TypeError("boom"); }
}
console.log("before");
new Boom().go();
