#!/usr/bin/env bash
# The client SDKs' tests (README's test command runs this through scripts/test-all.sh):
#  1. TypeScript (clients/typescript): npm ci from the lockfile, tsc, the viewer's committed copy
#     (server/viewer/sdk/) equals a fresh tsc build of the sources, then node --test: golden
#     vectors, the codec tables against client-proto/schema.json, frame chain, view/clock unit
#     tests (cell-edge smoothness at 60 Hz), npm pack -> install into a fresh strict-TypeScript
#     project with ws -> connect, and end-to-end tests against a real steerd (through a proxy that
#     cuts the network: no ghost commands or subscriptions, connection life cycle).
#  2. C# (clients/csharp): the Unity package's layout (LICENSE.md, CHANGELOG.md, author, a .meta
#     per entry outside `~` folders, no scripts or build output at the root, the test asmdef);
#     installs Debian's mono + NUnit when missing, compiles the library and its tests
#     (Tests/Editor + Tests~/NUnit2.cs) with mcs (Tests~/run.sh, into target/csharp-sdk/),
#     runs them with nunit-console: the same conformance, schema, smoothness and end-to-end tests.
# steerd is built (release) unless STEERD_BIN is set. Correctness gates only: no timing asserts.
# Ends with `N passed, N failed` (suites); exit 1 on any failure. `--ts` / `--cs` run one SDK.
# `--install-only`: the TypeScript SDK's npm packages and mono + NUnit, then stop.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
run_ts=1
run_cs=1
# The TypeScript SDK's npm packages, from the lockfile.
ts_packages() {
  command -v node >/dev/null || { echo "node is not installed"; return 1; }
  (cd "$here/typescript" && npm ci --no-audit --no-fund)
}

case "${1:-}" in
  --ts) run_cs=0 ;;
  --cs) run_ts=0 ;;
  --install-only)
    ts_packages || exit 1
    exec "$here/csharp/Tests~/run.sh" --install-only ;;
  "") ;;
  *) echo "usage: $0 [--ts|--cs|--install-only]" >&2; exit 2 ;;
esac

passed=0
failed=0
failures=()
suite() {
  local name=$1; shift
  echo
  echo "---- $name"
  if "$@"; then passed=$((passed + 1)); echo "---- $name: ok"; else failed=$((failed + 1)); failures+=("$name"); echo "---- $name: FAILED"; fi
}

if [ -z "${STEERD_BIN:-}" ]; then
  echo "== cargo build --release -p steerd"
  if ! cargo build --release -p steerd; then echo "clients: cargo build failed"; echo "0 passed, 1 failed"; exit 1; fi
  target="${CARGO_TARGET_DIR:-target}"
  case "$target" in /*) ;; *) target="$root/$target" ;; esac
  export STEERD_BIN="$target/release/steerd"
fi

ts_install() {
  ts_packages && (cd "$here/typescript" && npx tsc -p tsconfig.json)
}

ts_viewer_copy() {
  # The viewer's SDK files are committed so that `cargo run` needs no node: they must be exactly
  # what tsc makes of the sources (no hand edits, no stale build).
  local tmp
  tmp="$(mktemp -d)"
  (cd "$here/typescript" && npx tsc -p tsconfig.viewer.json --outDir "$tmp") || { rm -rf "$tmp"; return 1; }
  if diff -r "$tmp" "$root/server/viewer/sdk"; then rm -rf "$tmp"; return 0; fi
  echo "server/viewer/sdk/ differs from a fresh build: run \`npm run build:viewer\` in clients/typescript and commit"
  rm -rf "$tmp"
  return 1
}

ts_tests() {
  (cd "$here/typescript" && timeout 400 node --test --test-concurrency=1 --test-reporter=spec test/)
}

if [ "$run_ts" = 1 ]; then
  if suite "typescript: npm ci + tsc" ts_install; then
    suite "typescript: viewer copy == tsc build" ts_viewer_copy
    suite "typescript: vectors, unit, end-to-end" ts_tests
  fi
fi

cs_layout() {
  # The Unity package (installed by git URL) carries what a user needs and nothing else at its
  # root: every entry outside `~` folders and dotfiles has its .meta (Unity ignores files without
  # one in an immutable package), no scripts or build output, and the manifest's required fields.
  local pkg="$here/csharp" rc=0 f base
  for f in LICENSE.md CHANGELOG.md README.md package.json Runtime Tests; do
    [ -e "$pkg/$f" ] || { echo "csharp package: $f missing"; rc=1; }
  done
  for f in "$pkg"/*; do
    base=$(basename "$f")
    case "$base" in *~|*.meta) continue ;; esac
    case "$base" in *.sh|build|bin|obj) echo "csharp package: $base at the package root (not for users: move it into a ~ folder)"; rc=1 ;; esac
    [ -e "$f.meta" ] || { echo "csharp package: $base has no $base.meta"; rc=1; }
  done
  for f in "$pkg"/*.meta; do
    [ -e "${f%.meta}" ] || { echo "csharp package: $(basename "$f") without its asset"; rc=1; }
  done
  # Below the root too: Unity ignores an asset without its .meta in an immutable package.
  while IFS= read -r f; do
    [ -e "$f.meta" ] || { echo "csharp package: ${f#$pkg/} has no .meta"; rc=1; }
  done < <(find "$pkg"/Runtime "$pkg"/Tests -mindepth 1 ! -name '*.meta')
  [ -f "$pkg/Tests/Editor/Steerd.Client.Tests.asmdef" ] || { echo "csharp package: Tests/Editor/Steerd.Client.Tests.asmdef missing"; rc=1; }
  if grep -l 'TestFixtureSetUp\|TestFixtureTearDown' "$pkg"/Tests/Editor/*.cs; then
    echo "csharp package: NUnit 2 attributes above (Unity's Test Runner is NUnit 3: OneTimeSetUp / OneTimeTearDown)"; rc=1
  fi
  node -e '
    const p = require(process.argv[1]);
    const miss = ["name", "version", "displayName", "description", "unity", "license", "author"].filter((k) => !p[k]);
    if (!p.author || !p.author.name) miss.push("author.name");
    if (miss.length) { console.log("csharp package.json: missing " + miss.join(", ")); process.exit(1); }
  ' "$pkg/package.json" || rc=1
  return $rc
}

if [ "$run_cs" = 1 ]; then
  suite "csharp: package layout" cs_layout
  suite "csharp: mono + NUnit" "$here/csharp/Tests~/run.sh"
fi

echo
[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
