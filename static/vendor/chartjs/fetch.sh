#!/bin/sh
# Re-fetches the vendored Chart.js build from npm (the pinned version) and checks it against the
# committed checksum. Run from anywhere: sh static/vendor/chartjs/fetch.sh
set -eu
VERSION=4.6.1
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
npm pack --silent "chart.js@$VERSION" >/dev/null
tar xzf "chart.js-$VERSION.tgz"
cp package/dist/chart.umd.min.js "$HERE/chart.umd.min.js"
cp package/LICENSE.md "$HERE/LICENSE.md"
cd "$HERE"
sha256sum -c SHA256SUMS
echo "Chart.js $VERSION is in $HERE"
