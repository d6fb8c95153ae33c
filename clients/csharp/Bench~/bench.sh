#!/usr/bin/env bash
# Benchmarks of the C# SDK under mono (not a gate; figures go to README.md). Needs node (the
# stream comes from the TypeScript benchmark's generator) and mono (run-tests.sh installs it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ts="$here/../typescript"
(cd "$ts" && npm ci --no-audit --no-fund >/dev/null && npx tsc -p tsconfig.json)
mkdir -p "$here/build"
(cd "$ts" && node bench/bench.mjs --write-stream "$here/build/stream-10k.bin" --write-cells-stream "$here/build/cells-10k.bin")
mcs -langversion:7.2 -target:library -optimize+ -out:"$here/build/Steerd.Client.dll" "$here"/Runtime/*.cs
mcs -langversion:7.2 -target:exe -optimize+ -out:"$here/build/Bench.exe" -r:"$here/build/Steerd.Client.dll" "$here"/'Bench~'/Bench.cs
cd "$here/build" && mono --optimize=all Bench.exe cells-10k.bin stream-10k.bin
