#!/usr/bin/env bash
# The browser tests: the JS decoder against the golden vectors, the live viewer page, the C#
# SDK's WebGL transport (its .jslib over the browser's WebSocket) and the TypeScript SDK's example
# game (clients/typescript/examples/rts: two players, fog of war, select and move), each in a real
# headless Chromium. Installs what it needs (Debian `chromium` when /usr/bin/chromium is
# missing, the npm packages from the lockfile), builds steerd (release) unless STEERD_BIN is
# set, runs both suites, and ends with a plain line `N passed, N failed` (exit 1 on failure).
# The screenshots are kept in tests/artifacts/ (viewer.png, rts.png). `--install-only`: the installs, then stop
# (scripts/test-all.sh runs them in the background while it compiles).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

fail_setup() {
  echo "viewer tests: setup failed: $*" >&2
  echo "0 passed, 1 failed"
  exit 1
}

if [ ! -x /usr/bin/chromium ]; then
  echo "== installing chromium (apt)"
  sudo=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo="sudo"; fi
  { $sudo flock /tmp/steerd-apt.lock apt-get update && DEBIAN_FRONTEND=noninteractive $sudo flock /tmp/steerd-apt.lock apt-get install -y chromium; } || fail_setup "apt-get install chromium"
fi

command -v node >/dev/null || fail_setup "node is not installed"

echo "== npm packages (tests/browser)"
(cd "$here" && if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi) || fail_setup "npm install"
[ "${1:-}" = "--install-only" ] && { echo "viewer tests: installed"; exit 0; }

if [ -z "${STEERD_BIN:-}" ]; then
  echo "== cargo build --release -p steerd"
  cargo build --release -p steerd || fail_setup "cargo build"
  target="${CARGO_TARGET_DIR:-target}"
  case "$target" in /*) ;; *) target="$root/$target" ;; esac
  export STEERD_BIN="$target/release/steerd"
fi
[ -x "$STEERD_BIN" ] || fail_setup "no steerd binary at $STEERD_BIN"

echo "== node --test: decoder vectors, viewer, WebGL transport and RTS example in headless Chromium"
tap="$(mktemp)"
trap 'rm -f "$tap"' EXIT
# Each browser test bounds itself (80 s at most); this outer limit only guards against a hang.
timeout 360 node --test --test-concurrency=1 \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$tap" \
  "$here/proto.test.mjs" "$here/viewer.test.mjs" "$here/webgl-transport.test.mjs" "$here/rts.test.mjs"
status=$?

pass="$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$tap" | tail -1)"
failed="$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$tap" | tail -1)"
cancelled="$(sed -n 's/^# cancelled \([0-9]*\)$/\1/p' "$tap" | tail -1)"
pass="${pass:-0}"
failed=$(( ${failed:-0} + ${cancelled:-0} ))
if [ "$status" != 0 ] && [ "$failed" = 0 ]; then failed=1; fi
[ -f "$root/tests/artifacts/viewer.png" ] && echo "screenshots: tests/artifacts/viewer.png, tests/artifacts/rts.png"
echo "$pass passed, $failed failed"
[ "$status" = 0 ] && [ "$failed" = 0 ]
