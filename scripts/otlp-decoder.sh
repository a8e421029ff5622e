#!/usr/bin/env bash
# Installs the test-only OTLP decoder (tests/telemetry/package.json: the official
# OpenTelemetry protobuf definitions from the npm registry, pinned by its lock file) into
# DIR/node_modules, where the e2e tier's span test finds it (<build>/otlp-decoder).
#   scripts/otlp-decoder.sh DIR
# Exit 0 when installed (or already there), 1 when node, npm or the registry is missing.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${1:?usage: scripts/otlp-decoder.sh DIR}
mkdir -p "$dir"
if cmp -s "$root/tests/telemetry/package-lock.json" "$dir/package-lock.json" && [[ -d $dir/node_modules ]]; then
  exit 0
fi
command -v npm >/dev/null || { echo "otlp-decoder.sh: npm is not installed" >&2; exit 1; }
cp "$root/tests/telemetry/package.json" "$root/tests/telemetry/package-lock.json" "$dir/"
(cd "$dir" && timeout 300 npm ci --no-audit --no-fund --loglevel=error) >&2
