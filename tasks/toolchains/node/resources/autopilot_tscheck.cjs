// Syntax check of TypeScript, TSX and JSX files with the TypeScript compiler's parser (no type
// checking: a patch is checked before the project's types are known). Prints one line per
// error, `file:line:col - error TS<code>: message`, and exits 1 when there is any.
"use strict";
const fs = require("fs");
// `--typescript=<dir>` names the TypeScript package (else it is resolved from NODE_PATH).
const args = process.argv.slice(2);
const flag = args.length && args[0].startsWith("--typescript=") ? args.shift() : null;
const ts = require(flag ? flag.slice("--typescript=".length) : "typescript");

let errors = 0;
for (const file of args) {
  let text;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (err) {
    console.log(`${file}:1:1 - error: cannot read: ${err.code || err.message}`);
    errors += 1;
    continue;
  }
  const out = ts.transpileModule(text, {
    fileName: file,
    reportDiagnostics: true,
    compilerOptions: { jsx: ts.JsxEmit.Preserve, allowJs: true, noEmit: false },
  });
  for (const d of out.diagnostics || []) {
    if (d.category !== ts.DiagnosticCategory.Error || d.file === undefined) continue;
    const { line, character } = d.file.getLineAndCharacterOfPosition(d.start || 0);
    const message = ts.flattenDiagnosticMessageText(d.messageText, " ");
    console.log(`${file}:${line + 1}:${character + 1} - error TS${d.code}: ${message}`);
    errors += 1;
  }
}
process.exit(errors ? 1 : 0);
