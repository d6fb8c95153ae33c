#!/usr/bin/env bash
# The reliability suite (RELIABILITY.md's 20 tests) against the release binary.
#   tests/reliability/run.sh            short mode (the README test command runs this)
#   tests/reliability/run.sh --long     full durations (10-min fuzzing per target, 30-min soak)
#   tests/reliability/run.sh --only 6,7 some tests
# Installs what it needs itself: iproute2 (apt, for test 7), cargo-fuzz and cargo-deny
# (crates.io, --locked), schemathesis (PyPI, pinned, in a venv under target/reliability/).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TERM_COLOR=never
SCHEMATHESIS_VERSION=4.32.5
work=target/reliability
mkdir -p "$work"

if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null || echo "iproute2 could not be installed: test 7 will be skipped"
  fi
fi
cargo fuzz --version >/dev/null 2>&1 || cargo install cargo-fuzz --locked
cargo deny --version >/dev/null 2>&1 || cargo install cargo-deny --locked
if [ ! -x "$work/venv/bin/schemathesis" ] || ! "$work/venv/bin/schemathesis" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION"
fi

cargo build --release -p steerd --bin steerd -p steerd-tests --bin reliability
# The fuzz targets: their own workspace, stable toolchain with RUSTC_BOOTSTRAP for libFuzzer's
# flags, no sanitizer.
(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build -s none)

STEERD_BIN="$PWD/target/release/steerd" SCHEMATHESIS="$PWD/$work/venv/bin/schemathesis" \
  exec target/release/reliability "$@"
