#!/usr/bin/env bash
# The reliability suite (RELIABILITY.md's 20 tests) against the release binary.
#   tests/reliability/run.sh            short mode (the README test command runs this)
#   tests/reliability/run.sh --long     full durations (10-min fuzzing per target, 30-min soak)
#   tests/reliability/run.sh --only 6,7 some tests
#   tests/reliability/run.sh --build-only   install the tools and build, run nothing
#                                           (scripts/test-all.sh runs it in the background)
# Installs what it needs itself: iproute2 (apt, for test 7), cargo-fuzz and cargo-deny
# (crates.io, --locked, into target/reliability/tools unless on PATH), schemathesis (PyPI,
# pinned, in a venv under target/reliability/). Long steps print a line every 30 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TERM_COLOR=never
SCHEMATHESIS_VERSION=4.32.5
work=target/reliability
mkdir -p "$work"

if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    flock /tmp/steerd-apt.lock apt-get update -qq && DEBIAN_FRONTEND=noninteractive flock /tmp/steerd-apt.lock apt-get install -y -qq iproute2 >/dev/null || echo "iproute2 could not be installed: test 7 will be skipped"
  fi
fi
# cargo-fuzz and cargo-deny: installed once into cargo's own bin directory (~/.cargo/bin, kept by the machine
# across clones), without LTO and with 16 codegen units (cargo-deny's release profile uses LTO:
# ~30 min on 2 busy cores instead of ~14), in the background while the suite's binaries build.
tools="$PWD/$work/tools"
export PATH="$tools/bin:$PATH"
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
install_tool() { # crate, cargo subcommand
  cargo "$2" --version >/dev/null 2>&1 && return 0
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    alive "installing $1" "$work/install-$1.log" \
    cargo install --locked --target-dir "$work/tools-build" "$1"
}
(install_tool cargo-fuzz fuzz && install_tool cargo-deny deny) &
installs=$!
if [ ! -x "$work/venv/bin/schemathesis" ] || ! "$work/venv/bin/schemathesis" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION"
fi

alive "building steerd and the suite" "$work/build.log" cargo build --release -p steerd --bin steerd -p steerd-tests --bin reliability
wait "$installs" || { echo "installing cargo-fuzz/cargo-deny failed"; exit 1; }
# The fuzz targets: their own workspace, stable toolchain with RUSTC_BOOTSTRAP for libFuzzer's
# flags, no sanitizer.
alive "building the fuzz targets" "$PWD/$work/fuzz-build.log" bash -c 'cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build -s none'

if [ "${1:-}" = "--build-only" ]; then echo "reliability: tools installed, suite and fuzz targets built"; exit 0; fi
STEERD_BIN="$PWD/target/release/steerd" SCHEMATHESIS="$PWD/$work/venv/bin/schemathesis" \
  exec target/release/reliability "$@"
