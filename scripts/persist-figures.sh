#!/usr/bin/env bash
# The durable-world figures of BENCHMARKS.md ("Durable worlds"): the tick cost of `swarm-10k`
# (10,000 agents, world `demo`) under a 200-bot steer-swarm commanding it, with persistence off
# and with `fsync = "interval"` (100 ms group commits), interleaved, ROUNDS rounds of SECS
# seconds each (defaults 3 and 30); the log's bytes per world-hour; and, after each interval run,
# the recovery: `kill -9` right after the swarm's run, restart, and the wall time from the new
# process's start until the world ticks again past its recovered tick, with the world's age and
# the ticks of log re-run after the newest snapshot (`snapshot_every_secs` 30, the default: the
# kill falls SECS + 2 s after the start, so SECS sets where in the snapshot interval it lands).
# Prints markdown rows ending with BENCHMARKS.md's date, commit, machine and command cells.
# Usage: [SNAPSHOT_SECS=N] scripts/persist-figures.sh [ROUNDS] [SECS] (SNAPSHOT_SECS sets
# `persistence.snapshot_every_secs` instead of its default, 30).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
secs="${2:-30}"
. scripts/bench-meta.sh
snap_secs="${SNAPSHOT_SECS:-}"
meta="$(bench_meta "${snap_secs:+SNAPSHOT_SECS=$snap_secs }scripts/persist-figures.sh $rounds $secs")"
cargo build --release -p steerd -p steer-swarm >&2
target="${CARGO_TARGET_DIR:-target}"
bin="$target/release/steerd"
swarm="$target/release/steer-swarm"
out="$(mktemp)"
work="$(mktemp -d)"
pid=""
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work" "$out"; }
trap cleanup EXIT
port=18791
start() { # start DATA_DIR ARGS...: starts steerd, waits for its address
    local data=$1; shift
    "$bin" serve --listen "127.0.0.1:$port" --data-dir "$data" --scenarios-dir scenarios --scenario swarm-10k "$@" >"$data/log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do curl -fs "localhost:$port/health" >/dev/null 2>&1 && return 0; sleep 0.05; done
    echo "steerd did not start: $(tail -5 "$data/log")" >&2; exit 1
}
tick_stats() { curl -fs "localhost:$port/metrics" | awk '/^steerd_tick_duration_seconds_sum/ {s=$2} /^steerd_tick_duration_seconds_count/ {c=$2} END {print s, c}'; }
for round in $(seq 1 "$rounds"); do
    for mode in off interval; do
        data="$work/$mode-$round"; mkdir -p "$data"
        args=(); [ "$mode" = interval ] && args=(--persistence --fsync interval)
        if [ "$mode" = interval ] && [ -n "$snap_secs" ]; then
            printf '[persistence]\nsnapshot_every_secs = %s\n' "$snap_secs" >"$data/steerd.toml"
            args+=(--config "$data/steerd.toml")
        fi
        start "$data" "${args[@]}"
        sleep 2
        read -r s0 c0 < <(tick_stats)
        "$swarm" --url "ws://127.0.0.1:$port/ws" --world demo --bots 200 --ramp 2s --duration "${secs}s" --commands-per-sec 1 --spawn-per-bot 1 >"$data/swarm.log" 2>&1 || true
        read -r s1 c1 < <(tick_stats)
        bytes=0; age=0
        if [ "$mode" = interval ]; then
            read -r bytes age < <(curl -fs "localhost:$port/worlds/demo" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["persistence"]["bytes"], d["tick"])')
            kill -9 "$pid"; wait "$pid" 2>/dev/null || true
            t0=$(date +%s.%N)
            "$bin" serve --listen "127.0.0.1:$port" --data-dir "$data" --scenarios-dir scenarios --scenario swarm-10k "${args[@]}" >"$data/log" 2>&1 &
            pid=$!
            # Polled every 5 ms with curl and grep alone (an interpreter per poll would add tens
            # of ms): the server answers once the world is recovered; the top-level "tick" is
            # the world's, the one after "recovered":{ is where it resumed.
            rtick=""
            for _ in $(seq 6000); do
                j=$(curl -fs "localhost:$port/worlds/demo" 2>/dev/null) || { sleep 0.005; continue; }
                [ -z "$rtick" ] && rtick=$(grep -o '"recovered":{"tick":[0-9]*' <<<"$j" | cut -d: -f3)
                t=$(grep -o '"tick":[0-9]*' <<<"$j" | head -1 | cut -d: -f2)
                [ -n "$rtick" ] && [ "$t" -gt "$rtick" ] && break
                sleep 0.005
            done
            t1=$(date +%s.%N)
            [ -n "$rtick" ] || { echo "the world did not recover: $(tail -5 "$data/log")" >&2; exit 1; }
            read -r rsecs rticks < <(curl -fs "localhost:$port/worlds/demo" | python3 -c 'import json,sys; r=json.load(sys.stdin)["persistence"]["recovered"]; print(r["seconds"], r["ticks"])')
            echo "$round recovery $rtick $rsecs $(python3 -c "print($t1 - $t0)") $rticks" >>"$out"
        fi
        echo "$round $mode $s0 $c0 $s1 $c1 $bytes $secs $age" >>"$out"
        kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""
        echo "round $round $mode done" >&2
    done
done
python3 - "$out" "$meta" <<'PY'
import statistics, sys
from collections import defaultdict
tick = defaultdict(list); rate = []; rec = []
for line in open(sys.argv[1]):
    f = line.split()
    if f[1] == "recovery":
        rec.append((int(f[2]), float(f[3]), float(f[4]), int(f[5])))
        continue
    _, mode, s0, c0, s1, c1, b, secs, age = f
    tick[mode].append((float(s1) - float(s0)) / max(1.0, float(c1) - float(c0)) * 1000)
    if mode == "interval":
        rate.append(float(b) / (int(age) / 20) * 3600)
off, on = statistics.median(tick["off"]), statistics.median(tick["interval"])
meta = sys.argv[2]
print("| what | persistence off | `interval` | ratio | runs (off / interval, ms) | date | commit | machine | command |")
print("|---|---|---|---|---|---|---|---|---|")
print(f"| swarm-10k tick, 200 bots commanding (mean ms, median of rounds) | {off:.2f} | {on:.2f} | {on / off:.3f} | {', '.join(f'{x:.2f}' for x in tick['off'])} / {', '.join(f'{x:.2f}' for x in tick['interval'])} {meta}")
print(f"| log bytes per world-hour (`interval`) | — | {statistics.median(rate) / 2**20:.1f} MiB | — | {', '.join(f'{x / 2**20:.1f}' for x in rate)} {meta}")
for t, s, w, n in rec:
    print(f"| recovery of swarm-10k after `kill -9` at tick {t:,}: newest snapshot and {n} ticks of log after it (recovery {s:.2f} s) | — | ticking {w:.2f} s after the process starts | — | — {meta}")
PY
