// Validate speedscope files against the JSON schema shipped in the npm `speedscope` package.
// Usage: node validate-speedscope.js FILE...   Exit 0 when all are valid, 1 otherwise.
'use strict';
const fs = require('fs');
const path = require('path');
const Ajv = require('ajv');

const schemaPath = path.join(
  path.dirname(require.resolve('speedscope/package.json')),
  'dist', 'release', 'file-format-schema.json');
const schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));
const ajv = new Ajv({ allErrors: true, strict: false });
const validate = ajv.compile(schema);

let failed = 0;
for (const file of process.argv.slice(2)) {
  const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (validate(doc)) {
    console.log(`valid ${file}`);
  } else {
    failed++;
    console.log(`INVALID ${file}: ${ajv.errorsText(validate.errors.slice(0, 5))}`);
  }
}
process.exit(failed ? 1 : 0);
