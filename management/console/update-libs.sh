#!/usr/bin/env bash
# update-libs.sh fetches the web console's libraries from npm and copies
# their minified ES modules and licenses into assets/lib, where they are
# committed and embedded in the binary (nothing is fetched at run time).
# Usage: management/console/update-libs.sh [PREACT_VERSION HTM_VERSION DAGRE_VERSION]
# Then update the versions in the README's Dependencies table and run the
# console's browser test (go test ./e2e/console).
set -euo pipefail
preact=${1:-10.29.8} htm=${2:-3.1.1} dagre=${3:-3.1.3}
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm init -y >/dev/null
npm install --no-audit --no-fund "preact@$preact" "htm@$htm" "@dagrejs/dagre@$dagre" >/dev/null
lib="$here/assets/lib"
n="$tmp/node_modules"
cp "$n/preact/dist/preact.module.js" "$n/preact/hooks/dist/hooks.module.js" "$n/preact/LICENSE" "$lib/preact/"
cp "$n/htm/dist/htm.module.js" "$n/htm/LICENSE" "$lib/htm/"
cp "$n/@dagrejs/dagre/dist/dagre.esm.js" "$n/@dagrejs/dagre/LICENSE" "$lib/dagre/"
printf 'preact %s\nhtm %s\n@dagrejs/dagre %s\n' "$preact" "$htm" "$dagre" >"$lib/VERSIONS"
echo "updated $lib"
