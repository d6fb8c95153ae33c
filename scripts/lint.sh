#!/usr/bin/env bash
# Lints, with warnings denied: what CI runs after the test command (.ci/run). Run it before you
# push; it checks every crate and target of the workspace in the release profile's check build,
# and that every invariant of ARCHITECTURE.md names a test that exists.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
t0=$SECONDS
# ARCHITECTURE.md's invariants each name a test, and each named test exists (a second).
python3 scripts/invariant-tests.py
cargo clippy --workspace --all-targets --release -- -D warnings &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -0 "$pid" 2>/dev/null && echo "  … clippy: $((SECONDS - t0)) s"
done
wait "$pid"
echo "clippy: ok ($((SECONDS - t0)) s)"
