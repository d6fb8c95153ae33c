#!/usr/bin/env bash
# The crowd figures of BENCHMARKS.md ("Crowd cost", "Crowd quality"), in one run of `steerd simulate`:
#
#  1. Cost: circle (one MoveTo per agent, reciprocal avoidance) against swarm-10k (wanderers) at
#     1,000 and 10,000 agents, 1 and 2 threads, ROUNDS rounds (default 3), interleaved. Each run
#     steps the first TICKS ticks (default 2,000 at 1k and 300 at 10k: the circle's walkers are
#     still crossing the open ring, before the central jam). Prints the median (over rounds) mean
#     ns per agent-tick, circle / swarm per-agent ratio, the 2-vs-1-thread speed-up, and whether
#     1 and 2 threads gave the same state_hash.
#  2. Quality: circle at 1,000 agents for 24,000 ticks (1,200 s simulated, the jam included),
#     maze-moveto for 2,700 ticks, crossing for 2,000, and the dense crowds (counterflow,
#     crossroads, rts-melee) for 12,000 (600 s) and doorway for 26,000 (1,300 s), audited every tick: max_penetration,
#     overlap_pair_ticks, contacts, arrivals, gave_up, all_arrived_tick, throughput, stuck_agents,
#     max_goal_distance, the whole run's mean ns per agent-tick and its slowest tick.
#
# Each row ends with BENCHMARKS.md's date, commit, machine and command cells.
# Usage: scripts/crowd-figures.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
. scripts/bench-meta.sh
meta="$(bench_meta "scripts/crowd-figures.sh $rounds")"
cargo build --release -p steerd >&2
bin="${CARGO_TARGET_DIR:-target}/release/steerd"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for round in $(seq 1 "$rounds"); do
    for n in 1000 10000; do
        case $n in 1000) ticks=2000 ;; *) ticks=300 ;; esac
        for sc in circle swarm-10k; do
            for t in 1 2; do
                "$bin" simulate "scenarios/$sc.json" --agents "$n" --ticks "$ticks" --threads "$t" --audit-every 0 --json \
                    | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["scenario"], r["agents"], r["threads"], r["ns_per_agent_tick"], r["state_hash"])' >>"$out"
                echo "round $round: $sc $n agents, $t threads" >&2
            done
        done
    done
done
python3 - "$out" "$meta" <<'EOF'
import statistics, sys
from collections import defaultdict
ns = defaultdict(list)
hashes = defaultdict(set)
for line in open(sys.argv[1]):
    sc, n, t, v, h = line.split()
    ns[(sc, int(n), int(t))].append(float(v))
    hashes[(sc, int(n))].add(h)
med = {k: statistics.median(v) for k, v in ns.items()}
print("| agents | threads | circle ns/agent-tick | swarm-10k ns/agent-tick | circle / swarm | circle 2 vs 1 | same hash (1, 2 threads) | date | commit | machine | command |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for n in (1000, 10000):
    for t in (1, 2):
        c, s = med[("circle", n, t)], med[("swarm-10k", n, t)]
        speed = med[("circle", n, 1)] / c if t == 2 else 1.0
        same = len(hashes[("circle", n)]) == 1 and len(hashes[("swarm-10k", n)]) == 1
        print(f"| {n:,} | {t} | {c:.0f} | {s:.0f} | {c / s:.2f}× | {speed:.2f}× | {'yes' if same else 'NO'} {sys.argv[2]}")
EOF
echo
echo "| scenario | ticks | max_penetration | overlap_pair_ticks | contacts | arrived | gave_up | all_arrived_tick | arrivals/min | stuck | max_goal_distance | mean ns/agent-tick | slowest tick ms | date | commit | machine | command |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for spec in circle:24000 maze-moveto:2700 crossing:2000 counterflow:12000 crossroads:12000 rts-melee:12000 doorway:26000; do
    sc="${spec%%:*}"
    ticks="${spec##*:}"
    "$bin" simulate "scenarios/$sc.json" --ticks "$ticks" --json >"$out"
    python3 - "$out" "$meta" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
g = r["max_goal_distance"]
g = "-" if g is None else f"{g:.3f}"
t = "-" if r["all_arrived_tick"] is None else r["all_arrived_tick"]
tp = "-" if r["throughput_per_min"] is None else f'{r["throughput_per_min"]:.0f}'
print("| `{}` | {} | {:.3f} | {} | {} | {} of {} | {} | {} | {} | {} | {} | {:.0f} | {:.1f} {}".format(
    r["scenario"], r["ticks"], r["max_penetration"], r["overlap_pair_ticks"], r["contacts"], r["arrived"],
    r["with_target"], r["gave_up"], t, tp, r["stuck_agents"], g, r["ns_per_agent_tick"], r["tick_ms"]["max"], sys.argv[2]))
EOF
done
