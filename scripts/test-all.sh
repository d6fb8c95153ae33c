#!/usr/bin/env bash
# Runs every test of the project: the same command README.md gives and .ci/run calls.
# Installs what it needs itself (Debian chromium, mono + NUnit, npm packages, podman + runc).
#
#  1. cargo test: unit, property, scenario tests, and the end-to-end suite in tests/ that drives
#     the real server over real sockets (release build; the simulation tests need the speed)
#  2. clippy with warnings denied
#  3. steer-swarm smoke: 50 bots for 10 s against a real server, gated on correctness only
#     (no disconnects, decode/checksum errors, chain breaks, command timeouts or missed ticks)
#  4. viewer: JS decoder against the golden vectors, and the page in headless Chromium
#  5. client SDKs (clients/): TypeScript (node) and C# (mono + NUnit): golden vectors, frame
#     chains, and an end-to-end test each against a real server
#  6. container: the image built with podman (runc), run, probed, drained with SIGTERM
#  7. reliability: the 20 tests of RELIABILITY.md, short mode (tests/reliability/run.sh; installs
#     cargo-fuzz, cargo-deny, schemathesis in a venv, iproute2)
set -uo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
failed=()
step() {
  local name=$1; shift
  echo
  echo "=================== $name"
  if "$@"; then echo "=================== $name: ok"; else echo "=================== $name: FAILED"; failed+=("$name"); fi
}
step "cargo test" cargo test --workspace --all-targets --release
step "clippy" cargo clippy --workspace --all-targets --release -- -D warnings
step "swarm smoke" ./loadtest/smoke.sh
step "viewer (browser)" ./tests/browser/run.sh
step "client SDKs" ./clients/run-tests.sh
step "container (podman)" ./tests/container/run.sh
step "reliability (short)" ./tests/reliability/run.sh
echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "all suites passed"
  exit 0
fi
echo "failed suites: ${failed[*]}"
exit 1
