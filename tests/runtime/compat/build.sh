#!/bin/sh
# Rebuilds the compatibility suite's fixtures: each entries/NAME.js bundled with its npm library (the
# versions pinned in package.json / package-lock.json) as a plugin author would, into bundles/NAME.js.
# Usage: tests/runtime/compat/build.sh   (runs `npm ci` here first; needs Node.js and the npm registry)
set -eu
cd "$(dirname "$0")"
npm ci --no-audit --no-fund >/dev/null
mkdir -p bundles
for entry in entries/*.js; do
    name=$(basename "$entry" .js)
    # --main-fields: with --platform=neutral esbuild reads no main field at all, so packages that only
    # declare "main" (lodash, he, papaparse...) need it named; "browser" first picks the builds that
    # leave out Node built-ins (handlebars's `fs`). NODE_ENV is defined as browser bundlers do (immer
    # reads process.env.NODE_ENV, and a plugin has no `process`).
    ./node_modules/.bin/esbuild "$entry" --bundle --minify --format=iife --platform=neutral \
        --target=es2020 --main-fields=browser,module,main --define:process.env.NODE_ENV=\"production\" \
        --log-level=warning --outfile="bundles/$name.js"
done
node -e 'const l = require("./package-lock.json"); const p = require("./package.json");
  const v = Object.fromEntries(Object.keys(p.devDependencies).map((n) => [n, l.packages["node_modules/" + n].version]));
  require("fs").writeFileSync("bundles/versions.json", JSON.stringify(v, null, 2) + "\n");'
ls -l bundles
