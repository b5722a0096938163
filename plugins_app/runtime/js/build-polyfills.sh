#!/bin/sh
# Bundles web-polyfills.js (npm polyfills pinned in package-lock.json) into dist/web-polyfills.js, the
# script the engine evaluates once per isolate. Run by `make js` after `npm ci`; needs node_modules.
set -eu
cd "$(dirname "$0")"
# `global` is defined because abortcontroller-polyfill falls back to it when there is no `self`.
./node_modules/.bin/esbuild web-polyfills.js --bundle --minify --format=iife --platform=neutral \
    --target=es2020 --main-fields=module,main --define:global=globalThis --log-level=warning \
    --outfile=dist/web-polyfills.js
