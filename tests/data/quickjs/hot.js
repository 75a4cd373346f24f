// Hot line fixture: one function, a cold loop and a hot loop on their own lines.
function work() {
  let s = 0;
  for (let i = 0; i < 2e5; i++) s += i;
  for (let j = 0; j < 2e7; j++) s ^= j;
  return s;
}
work();
