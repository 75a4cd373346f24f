// The jsprof global from inside the program: watch() after the class exists, profile()
// one array, report() as data.
class Counter {
  constructor() { this.n = 0; }
  inc() { this.n++; return this; }
}
const c = new Counter(); // not watched yet: not counted
c.inc();
jsprof.watch("Counter");
c.inc().inc();
new Counter().inc();
const arr = [3, 1, 2];
jsprof.profile(Array, arr);
arr.push(4);
arr.sort();
console.log(arr.join(","), Object.keys(arr).join(","), JSON.stringify(arr));
const rows = jsprof.report();
const pick = (k, m) => rows.find((r) => r.class === k && r.method === m).calls;
console.log(pick("Counter", "inc"), pick("Counter", "constructor"), pick("Array", "push"), pick("Array", "sort"));
