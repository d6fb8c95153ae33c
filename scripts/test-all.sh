#!/usr/bin/env bash
# Runs every test of the project: the same command README.md gives and .ci/run calls.
# Installs what it needs itself (Debian chromium, jq, mono + NUnit, npm packages, podman + runc).
#
#  1. cargo test: unit, property, scenario tests, and the end-to-end suite (server/tests/it) that
#     drives the real server binary Cargo built over real sockets (release: the simulation tests
#     need the speed)
#  2. one build per profile: after step 1, `cargo build -p steerd` / `-p steer-swarm` (what the
#     README and the suites below run) must compile nothing (workspace-hack/ unifies features)
#  3. docs: the runnable shell blocks of README.md and docs/ against a real server, and the
#     book's table of contents and relative links (scripts/doc-tests.sh). The generated reference
#     tables (routes, configuration, protocol version and close codes) are checked in step 1
#     (steerd's reference_docs test).
#  4. steer-swarm smoke: 50 bots for 10 s against a real server, gated on correctness only
#     (no disconnects, decode/checksum errors, chain breaks, command timeouts or missed ticks);
#     then scripts/bench-compare.sh --smoke HEAD (the baseline guard runs, no ratio gate)
#  5. viewer: JS decoder against the golden vectors, and the page in headless Chromium
#  6. client SDKs (clients/): TypeScript (node) and C# (mono + NUnit): golden vectors, the
#     schema check, frame chains, cell-edge smoothness, the npm pack/install check (TypeScript),
#     the Unity package layout (C#), and end-to-end tests against a real server (ghost commands
#     and subscriptions under a network cut)
#  7. container: the image built with podman (runc), run, probed, drained with SIGTERM; a durable
#     world with steer-swarm bots handed off from one container to another
#  8. reliability: the 21 tests of docs/reliability.md, short mode (tests/reliability/run.sh; installs
#     cargo-fuzz, cargo-deny, schemathesis in a venv, iproute2)
#
# Lints are not tests: .ci/run runs clippy (scripts/lint.sh) after this command, so CI still
# gates on them while a newcomer's test run skips the extra check build of every crate.
#
# Every suite shows it is alive: a line at least every 30 s. The summary gives each suite's wall
# time.
set -uo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
failed=()
times=()
t_all=$SECONDS

# Prints "… NAME: N s" every 30 s while the step runs (its own output may be quiet for minutes:
# a long compile, a container build, a test that takes a while).
heartbeat() {
  local name=$1 t0=$2
  while sleep 30; do echo "  … $name: $((SECONDS - t0)) s"; done
}

step() {
  local name=$1; shift
  echo
  echo "=================== $name"
  local t0=$SECONDS
  heartbeat "$name" "$t0" &
  local hb=$!
  if "$@"; then local verdict=ok; else local verdict=FAILED; failed+=("$name"); fi
  kill "$hb" 2>/dev/null; wait "$hb" 2>/dev/null
  local took=$((SECONDS - t0))
  times+=("$(printf '%-24s %5d s  %s' "$name" "$took" "$verdict")")
  echo "=================== $name: $verdict ($took s)"
}

# After the workspace build, building the binaries alone must reuse it: prints what a `-p`
# build compiled and fails if it compiled anything.
no_rebuild() {
  local p out rc=0
  for p in steerd steer-swarm; do
    out=$(cargo build --release -p "$p" 2>&1) || { echo "$out"; return 1; }
    if grep -q "Compiling" <<<"$out"; then
      echo "cargo build --release -p $p rebuilt after the workspace build (features differ;"
      echo "run \`cargo hakari generate\`, see workspace-hack/Cargo.toml):"
      grep "Compiling" <<<"$out"
      rc=1
    else
      echo "cargo build --release -p $p: nothing to compile"
    fi
  done
  return $rc
}

# Runs "$@" after background job $1 has ended (whatever its result: the command itself fails
# with the build's errors if the build failed).
after() {
  local pid=$1; shift
  wait "$pid" 2>/dev/null
  "$@"
}

# The suites' installs (Debian chromium, mono + NUnit, podman; the npm packages) wait on the
# network and dpkg, not the CPU: they run in the background while step 1 compiles, and the first
# suite that needs them waits for them. Each suite still installs what is missing when run alone.
mkdir -p target
{ ./tests/browser/run.sh --install-only && ./clients/run-tests.sh --install-only \
    && ./tests/container/run.sh --install-only; } >target/prepare.log 2>&1 &
prepare=$!
# `--tests` (not `--all-targets`: its `--lib --bins`, like `--benches`, select every library and
# binary whatever their `test = false`, and build each a second time as an empty test harness),
# the bench targets (criterion runs each benchmark once) and the examples.
step "cargo test" cargo test --workspace --release --tests --bench '*' --examples
# The reliability suite's tools and fuzz targets (a profile of their own, in target/fuzz) build
# now, in the background, while the quieter suites below wait on sockets and browsers; its log is
# target/prebuild-reliability.log. The container image holds the release binaries step 1 built.
./tests/reliability/run.sh --build-only >target/prebuild-reliability.log 2>&1 &
pre_reliability=$!
step "one build per profile" no_rebuild
step "docs" ./scripts/doc-tests.sh
step "swarm smoke" ./loadtest/smoke.sh
# The baseline guard (scripts/bench-compare.sh) against itself, one round of small cases: it
# checks that the script works; its ratios are no gate here (they belong in benchmarks).
step "bench-compare (smoke)" ./scripts/bench-compare.sh --smoke HEAD
step "viewer (browser)" after "$prepare" ./tests/browser/run.sh
step "client SDKs" ./clients/run-tests.sh
step "container (podman)" ./tests/container/run.sh
step "reliability (short)" after "$pre_reliability" ./tests/reliability/run.sh
echo
echo "suite                     wall   result"
printf '%s\n' "${times[@]}"
echo "total                    $(printf '%5d' $((SECONDS - t_all))) s"
if [ ${#failed[@]} -eq 0 ]; then
  echo "all suites passed"
  exit 0
fi
echo "failed suites: ${failed[*]}"
exit 1
