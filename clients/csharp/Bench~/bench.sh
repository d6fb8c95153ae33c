#!/usr/bin/env bash
# Benchmarks of the C# SDK under mono (not a gate; figures go to README.md). Needs node (the
# stream comes from the TypeScript benchmark's generator) and mono (Tests~/run.sh installs it).
# Builds into target/csharp-sdk/bench/ of the repository.
set -euo pipefail
pkg="$(cd "$(dirname "$0")/.." && pwd)"
ts="$pkg/../typescript"
out="$pkg/../../target/csharp-sdk/bench"
(cd "$ts" && npm ci --no-audit --no-fund >/dev/null && npx tsc -p tsconfig.json)
mkdir -p "$out"
(cd "$ts" && node bench/bench.mjs --write-stream "$out/stream-10k.bin" --write-cells-stream "$out/cells-10k.bin")
mcs -langversion:7.2 -target:library -optimize+ -out:"$out/Steerd.Client.dll" -recurse:"$pkg/Runtime/*.cs"
mcs -langversion:7.2 -target:exe -optimize+ -out:"$out/Bench.exe" -r:"$out/Steerd.Client.dll" "$pkg"/'Bench~'/Bench.cs
cd "$out" && mono --optimize=all Bench.exe cells-10k.bin stream-10k.bin
