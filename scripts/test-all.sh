#!/usr/bin/env bash
# Runs every test of the project: the same command README.md gives and .ci/run calls.
# It installs what it needs itself (nothing beyond the Rust toolchain yet).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
echo "== cargo test (workspace: unit, property, scenario and integration tests)"
cargo test --workspace --all-targets --release 2>&1
echo "== clippy"
cargo clippy --workspace --all-targets --release -- -D warnings 2>&1
