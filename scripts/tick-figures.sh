#!/usr/bin/env bash
# The simulation-tick figures of BENCHMARKS.md ("Tick cost"), in one run: `steerd simulate` on
# swarm-10k and flock at 1k, 10k and 100k agents, 1 and 2 threads interleaved, ROUNDS rounds
# (default 3). Prints a markdown table of the median (over the rounds) of each run's p50 tick,
# the 2-vs-1-thread speed-up, and per-agent cost at 1k and 100k relative to 10k (2 threads),
# from the p50s and from the mean ticks (which include the occasional re-sort of the agents);
# checks that 1 and 2 threads give the same state_hash. Each row ends with BENCHMARKS.md's date,
# commit, machine and command cells. Usage: scripts/tick-figures.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
. scripts/bench-meta.sh
meta="$(bench_meta "scripts/tick-figures.sh $rounds")"
cargo build --release -p steerd >&2
bin="${CARGO_TARGET_DIR:-target}/release/steerd"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for round in $(seq 1 "$rounds"); do
    for sc in swarm-10k flock; do
        for n in 1000 10000 100000; do
            case $n in 1000) ticks=500 ;; 10000) ticks=200 ;; *) ticks=60 ;; esac
            for t in 1 2; do
                "$bin" simulate "scenarios/$sc.json" --agents "$n" --ticks "$ticks" --threads "$t" --audit-every 0 --json \
                    | python3 -c 'import json,sys; r=json.load(sys.stdin); print(sys.argv[1], r["scenario"], r["agents"], r["threads"], r["tick_ms"]["p50"], r["tick_ms"]["mean"], r["state_hash"])' "$round" >>"$out"
                echo "round $round $sc $n agents $t threads done" >&2
            done
        done
    done
done
python3 - "$out" "$meta" <<'EOF'
import statistics, sys
from collections import defaultdict
runs = defaultdict(list)
means = defaultdict(list)
hashes = defaultdict(set)
for line in open(sys.argv[1]):
    _, sc, n, t, p50, mean, h = line.split()
    runs[(sc, int(n), int(t))].append(float(p50))
    means[(sc, int(n), int(t))].append(float(mean))
    hashes[(sc, int(n))].add(h)
med = {k: statistics.median(v) for k, v in runs.items()}
mmed = {k: statistics.median(v) for k, v in means.items()}
meta = sys.argv[2]
print("| scenario | agents | 1 thread p50 ms | 2 threads p50 ms | 2 vs 1 | per-agent vs 10k (2 threads) | 2 threads mean ms | same hash | date | commit | machine | command |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for sc in sorted({k[0] for k in med}):
    for n in (1000, 10000, 100000):
        one, two = med[(sc, n, 1)], med[(sc, n, 2)]
        per = (two / n) / (med[(sc, 10000, 2)] / 10000)
        rs = ", ".join(f"{x:.2f}" for x in runs[(sc, n, 2)])
        rel = "" if n == 10000 else f"{per:.2f}×"
        mtwo = mmed[(sc, n, 2)]
        mper = (mtwo / n) / (mmed[(sc, 10000, 2)] / 10000)
        mrel = "" if n == 10000 else f"{mper:.2f}×"
        print(f"| `{sc}` | {n:,} | {one:.2f} | {two:.2f} | {one / two:.2f}× | {rel or '—'} | {mtwo:.2f} | {'yes' if len(hashes[(sc, n)]) == 1 else 'NO'} {meta}")
EOF
