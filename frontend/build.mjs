// Bundles editor.js (CodeMirror 6 and its JavaScript/TypeScript mode) into static/hub_admin/editor.js.
// Run `npm ci && npm run build` here after changing editor.js or package.json; the built file is
// committed so `make run` needs no Node build step.
import { build } from "esbuild";

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
