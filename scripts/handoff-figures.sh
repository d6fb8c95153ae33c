#!/usr/bin/env bash
# The live-handoff figures of BENCHMARKS.md ("Live handoff"): a durable 1,000-agent world
# (wanderers, 20 Hz) on server A with 100 steer-swarm bots subscribed to the whole of it (10
# active: they spawn 2 agents each and command them), handed off to server B half-way through a
# SECS-second run (default 20). Every bot follows `moved` to B and resumes there. Prints one
# markdown row per round (ROUNDS, default 1): bots that followed, ticks missed by any bot
# (`tick_gaps`, summed), the longest time between two consecutive ticks' states at a bot
# (`tick_interval_ms.max`: the pause a client saw across the handoff), the source's frozen time
# (`frozen_ms`: freeze to the target's answer), the package's bytes, and the world's age at the
# freeze; then BENCHMARKS.md's date, commit, machine and command cells.
# Usage: scripts/handoff-figures.sh [ROUNDS] [SECS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-1}"
secs="${2:-20}"
. scripts/bench-meta.sh
meta="$(bench_meta "scripts/handoff-figures.sh $rounds $secs")"
cargo build --release -p steerd -p steer-swarm >&2
target="${CARGO_TARGET_DIR:-target}"
bin="$target/release/steerd"
swarm="$target/release/steer-swarm"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
secret="handoff-figures-secret-0123456789"
start() { # start PORT DATA_DIR: starts a durable, clustered steerd and waits for it
    "$bin" serve --listen "127.0.0.1:$1" --data-dir "$2" --scenarios-dir scenarios --persistence --cluster-secret "$secret" >"$2/log" 2>&1 &
    pids+=($!)
    for _ in $(seq 600); do curl -fs "localhost:$1/health" >/dev/null 2>&1 && return 0; sleep 0.05; done
    echo "steerd did not start: $(tail -5 "$2/log")" >&2; exit 1
}
scenario='{"name": "handoff-1k", "bounds": {"min": {"x": 0, "y": 0}, "max": {"x": 400, "y": 400}}, "edge": "wrap", "tick_rate": 20, "seed": 11,
  "groups": [{"name": "w", "count": 1000, "area": {"type": "rect", "min_x": 0, "min_y": 0, "max_x": 400, "max_y": 400},
  "limits": {"max_speed": 5, "max_accel": 10, "radius": 0.5}, "initial_speed": 3, "behaviors": [{"behavior": {"type": "wander"}}]}]}'
for round in $(seq 1 "$rounds"); do
    a=$((18800 + 2 * round)); b=$((a + 1))
    mkdir -p "$work/a$round" "$work/b$round"
    start "$a" "$work/a$round"
    start "$b" "$work/b$round"
    curl -fs -X PUT -H 'Content-Type: application/json' -d "$scenario" "localhost:$a/scenarios/handoff-1k" >/dev/null
    curl -fs -X POST -H 'Content-Type: application/json' -d '{"name": "big", "scenario": "handoff-1k"}' "localhost:$a/worlds" >/dev/null
    "$swarm" --url "ws://127.0.0.1:$a/ws" --world big --bots 100 --ramp 2s --whole-world --passive 0.9 --skim \
        --spawn-per-bot 2 --commands-per-sec 1 --duration "${secs}s" --report "$work/r$round.json" --quiet >"$work/swarm$round.log" 2>&1 &
    sp=$!
    sleep "$((secs / 2))"
    curl -fs -X POST -H 'Content-Type: application/json' -d "{\"to\": \"http://127.0.0.1:$b\"}" "localhost:$a/worlds/big/handoff" >"$work/h$round.json" \
        || { echo "handoff failed: $(tail -5 "$work/a$round/log")" >&2; exit 1; }
    wait "$sp" || true
    python3 - "$work/r$round.json" "$work/h$round.json" "$meta" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); h = json.load(open(sys.argv[2]))
gap = r["tick_interval_ms"]["max"]
print(f"| {r['follows']} of {r['bots_connected']} | {r['tick_gaps']} | {gap:.1f} | {h['frozen_ms']:.1f} | {h['bytes']:,} | {h['tick']} | {sys.argv[3][2:]}")
PY
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    pids=()
    echo "round $round done" >&2
done
