// Starts children the two usual ways; each reports its process.execArgv on stdout.
const cp = require('node:child_process');
function spin(ms) { const end = Date.now() + ms; let x = 0; while (Date.now() < end) x++; return x; }
if (process.argv[2] === 'child') {
  spin(50);
  console.log(`child ${JSON.stringify(process.execArgv)}`);
  process.exit(0);
}
console.log(`parent ${JSON.stringify(process.execArgv)}`);
function parentWork() { return spin(100); }
parentWork();
cp.fork(__filename, ['child']).on('exit', (code) => {
  const s = cp.spawn(process.execPath, [...process.execArgv, __filename, 'child'], { stdio: 'inherit' });
  s.on('exit', (c2) => { console.log(`exits ${code} ${c2}`); parentWork(); });
});
