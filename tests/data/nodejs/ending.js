// argv[2]: normal | throw | exit | forever
function work(ms) { const end = Date.now() + ms; let x = 0; while (Date.now() < end) x++; return x; }
const how = process.argv[2];
work(200);
if (how === 'throw') throw new Error('boom from ending.js');
if (how === 'exit') process.exit(3);
if (how === 'forever') { for (;;) work(100); }
console.log('ended normally');
