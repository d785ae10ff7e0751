// Validate .glb files with the Khronos glTF validator; prints one JSON report per file on
// one line each ({"file", "errors", "warnings", "messages": [first 20 issues]}).
// Usage: node validate.mjs FILE.glb [...]
import { readFile } from "node:fs/promises";
import validator from "gltf-validator";

for (const file of process.argv.slice(2)) {
  const data = new Uint8Array(await readFile(file));
  const report = await validator.validateBytes(data, { maxIssues: 200 });
  const issues = report.issues;
  console.log(JSON.stringify({
    file,
    errors: issues.numErrors,
    warnings: issues.numWarnings,
    messages: issues.messages.slice(0, 20).map((m) => `${m.severity} ${m.code} ${m.pointer ?? ""}: ${m.message}`),
  }));
}
