#!/usr/bin/env bash
# Compares the hot paths of the working tree against a base commit, interleaved, in one sitting.
#
#   scripts/bench-compare.sh [options] <base-commit> [case…]
#
# Builds the base into its own worktree and target directory under target/bench-compare/
# (kept, so a second comparison against the same base builds nothing), builds the working tree,
# then runs every case on both for --rounds rounds, alternating which goes first, each binary
# with its own checkout's scenario files. Prints one table row per case and thread count: the
# median of each side, and current/base. Exits 1 when a ratio exceeds --threshold (a regression
# of the current tree), 2 on a usage or build error.
#
# Cases (default: all):
#   wander   steerd simulate swarm-10k.json at 100,000 agents, 40 ticks: p50 tick (ms)
#   circle   steerd simulate circle.json at 1,000 agents, 400 ticks: p50 tick (ms)
#   maze     steerd simulate maze-moveto.json, 400 ticks: p50 tick (ms)
#   fanout   steerd serving swarm-10k, 200 steer-swarm bots for 20 s: server CPU µs per tick
# A case is `name` or `name:agents:ticks` (fanout: `fanout:bots:seconds`).
#
# Options:
#   --rounds N       interleaved rounds (default 5)
#   --threads LIST   thread counts of the simulate cases, comma separated (default 1,2)
#   --threshold R    largest current/base ratio that passes (default 1.05)
#   --smoke          one round, small cases, no ratio gate: checks that the script works (the
#                    test command runs `--smoke HEAD`; a latency gate does not belong there)
#   --fifo           runs each simulate case under SCHED_FIFO (`chrt -f 10`; needs root or
#                    CAP_SYS_NICE), so that other processes on a busy host do not preempt its
#                    ticks: without it, the wall time of a tick on a loaded host is largely the
#                    scheduler's (a driver that never sleeps is sliced more than one that does)
#
# Run it against the last release tag or the previous main before a change to the tick, the
# fan-out or the wire lands, and quote its table in the change's description (CONTRIBUTING.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
rounds=5 threads=1,2 threshold=1.05 smoke=0 fifo=()
usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=${2:?}; shift 2 ;;
    --threads) threads=${2:?}; shift 2 ;;
    --threshold) threshold=${2:?}; shift 2 ;;
    --smoke) smoke=1; shift ;;
    --fifo) fifo=(chrt -f 10); shift ;;
    -h|--help) usage ;;
    --*) echo "unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
base_ref=$1; shift
base=$(git rev-parse --verify --quiet "$base_ref^{commit}") || { echo "bench-compare: no commit \`$base_ref\`" >&2; exit 2; }
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  if [ $smoke = 1 ]; then cases=(wander:2000:5 circle:100:20 maze:0:20 fanout:5:3); else cases=(wander circle maze fanout); fi
fi
[ $smoke = 1 ] && rounds=1
export CARGO_TERM_COLOR=never

# The working tree's binaries.
cargo build --release -q -p steerd -p steer-swarm
cur_bin=$root/target/release
cur_src=$root
# The base's: the working tree's own when the base is HEAD and nothing is changed, else a
# worktree of its own (cached) built into its own target directory.
# (The smoke run compares the working tree with itself whatever it has changed: it checks the
# script, not a ratio, and must not build a second copy inside the test command.)
if [ "$base" = "$(git rev-parse HEAD)" ] && { [ $smoke = 1 ] || git diff --quiet HEAD -- server client-proto loadtest scenarios Cargo.toml Cargo.lock; }; then
  base_bin=$cur_bin base_src=$cur_src
else
  cache=$root/target/bench-compare
  base_src=$cache/src-$base
  if [ ! -d "$base_src" ]; then
    mkdir -p "$cache"
    git worktree add --detach "$base_src" "$base" >/dev/null
  fi
  echo "building the base $base_ref (${base:0:10}) in $base_src" >&2
  (cd "$base_src" && CARGO_TARGET_DIR=$cache/target-$base cargo build --release -q -p steerd -p steer-swarm) || { echo "bench-compare: the base does not build" >&2; exit 2; }
  base_bin=$cache/target-$base/release
fi

work=$(mktemp -d)
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# One simulate run: prints the p50 tick in ms.
simulate() { # bin src scenario agents ticks threads
  local args=("$2/scenarios/$3.json" --ticks "$5" --threads "$6" --json)
  [ "$4" != 0 ] && args+=(--agents "$4")
  "${fifo[@]}" "$1/steerd" simulate "${args[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tick_ms"]["p50"])'
}

# One fan-out run: a server on swarm-10k and `bots` bots for `secs` seconds; prints the server's
# CPU µs per tick over the swarm's steady window.
fanout() { # bin src bots secs
  local out=$work/server.out
  RUST_LOG=warn "$1/steerd" --listen 127.0.0.1:0 --data-dir "$work/data" --scenarios-dir "$2/scenarios" --scenario swarm-10k --admin-token bench >"$out" 2>"$work/server.err" &
  server_pid=$!
  local addr=""
  for _ in $(seq 1 200); do
    addr=$(sed -n 's#^steerd listening on http://##p' "$out" | head -n1)
    [ -n "$addr" ] && break
    sleep 0.1
  done
  [ -n "$addr" ] || { echo "bench-compare: steerd did not start" >&2; exit 2; }
  "$1/steer-swarm" --url "ws://$addr/ws" --world demo --bots "$3" --ramp 1s --duration "${4}s" --aoi 100x100 --admin-token bench \
    --seed 1 --server-pid "$server_pid" --quiet --report "$work/swarm.json" >/dev/null
  kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true; server_pid=""
  rm -rf "$work/data"
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); v=r.get("server_cpu_us_per_tick"); print(v if v is not None else "nan")' "$work/swarm.json"
}

# Rows: "label<TAB>side<TAB>value" appended to $work/runs.
for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) = 1 ]; then order="base cur"; else order="cur base"; fi
  for c in "${cases[@]}"; do
    IFS=: read -r name a b <<<"$c"
    for side in $order; do
      if [ $side = base ]; then bin=$base_bin src=$base_src; else bin=$cur_bin src=$cur_src; fi
      case $name in
        wander|circle|maze)
          scen=$([ $name = wander ] && echo swarm-10k || { [ $name = maze ] && echo maze-moveto || echo circle; })
          agents=${a:-$([ $name = wander ] && echo 100000 || { [ $name = circle ] && echo 1000 || echo 0; })}
          ticks=${b:-$([ $name = wander ] && echo 40 || echo 400)}
          IFS=, read -ra tlist <<<"$threads"
          for t in "${tlist[@]}"; do
            v=$(simulate "$bin" "$src" "$scen" "$agents" "$ticks" "$t")
            if [ "$agents" = 0 ]; then who="its agents"; else who="$agents agents"; fi
            printf '%s\t%s\t%s\n' "$name, $who, $ticks ticks, $t thread(s): p50 tick ms" "$side" "$v" >>"$work/runs"
          done
          ;;
        fanout)
          v=$(fanout "$bin" "$src" "${a:-200}" "${b:-20}")
          printf '%s\t%s\t%s\n' "fanout, ${a:-200} bots, ${b:-20} s: server CPU µs per tick" "$side" "$v" >>"$work/runs"
          ;;
        *) echo "bench-compare: unknown case \`$name\`" >&2; exit 2 ;;
      esac
    done
  done
  echo "round $round of $rounds done" >&2
done

python3 - "$work/runs" "$threshold" "$smoke" "$base_ref" "${base:0:10}" "$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes)" "$rounds" <<'PY'
import math, statistics, sys
runs, threshold, smoke, base_ref, base, cur, rounds = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "1", *sys.argv[4:]
rows = {}
for line in open(runs):
    label, side, v = line.rstrip("\n").split("\t")
    rows.setdefault(label, {"base": [], "cur": []})[side].append(float(v))
print(f"| case | base {base_ref} ({base}) median | current {cur} median | current / base |")
print("|---|---|---|---|")
worst = 0.0
for label, r in rows.items():
    b = [x for x in r["base"] if not math.isnan(x)]
    c = [x for x in r["cur"] if not math.isnan(x)]
    if not b or not c:
        print(f"| {label} | {'n/a' if not b else f'{statistics.median(b):.3f}'} | {'n/a' if not c else f'{statistics.median(c):.3f}'} | n/a |")
        continue
    mb, mc = statistics.median(b), statistics.median(c)
    ratio = mc / mb if mb > 0 else float("inf")
    worst = max(worst, ratio)
    print(f"| {label} | {mb:.3f} | {mc:.3f} | {ratio:.3f} |")
print(f"({rounds} interleaved rounds; threshold {threshold})")
if not smoke and worst > threshold:
    print(f"bench-compare: a ratio of {worst:.3f} exceeds {threshold}", file=sys.stderr)
    sys.exit(1)
PY
