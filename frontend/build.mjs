// Bundles editor.js (CodeMirror 6 and its JavaScript/TypeScript mode) into static/hub_admin/editor.js.
// Run `npm ci && npm run build` here after changing editor.js or package.json; the built file is
// committed so `make run` needs no Node build step.
import { build } from "esbuild";
import { readdirSync, existsSync } from "node:fs";
import { join } from "node:path";

// Two copies of @codemirror/state in one bundle break the editor in odd places (Enter threw a
// TypeError: @codemirror/commands' nested copy built the transaction the other copy read). Refuse them.
function statePackages(dir, found = []) {
  if (!existsSync(dir)) return found;
  for (const name of readdirSync(dir)) {
    const scope = join(dir, name);
    if (name === "@codemirror" && existsSync(join(scope, "state"))) found.push(join(scope, "state"));
    const nested = name.startsWith("@") ? readdirSync(scope).map((n) => join(scope, n, "node_modules"))
      : [join(scope, "node_modules")];
    for (const inner of nested) statePackages(inner, found);
  }
  return found;
}
const copies = statePackages("node_modules");
if (copies.length !== 1) {
  throw new Error(`expected one @codemirror/state, found ${copies.length}: ${copies.join(", ")}; ` +
                  "pin the version every @codemirror package accepts in package.json");
}

await build({
  entryPoints: ["editor.js"],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020"],
  legalComments: "eof",
  outfile: "../static/hub_admin/editor.js",
  banner: { js: "/* Middleware Hub admin code editor: CodeMirror 6 (MIT), built by frontend/build.mjs. */" },
});
