#!/usr/bin/env bash
# The fan-out figures of issue 16, measured on whatever commit this runs on, server and swarm side
# by side on this machine (a fresh release `steerd` per run, on 127.0.0.1, killed after it):
#   a) 1,000 wandering agents (swarm-10k's scenario with 1,000 agents, same 1000×1000 bounds:
#      ~366 occupied AOI cells), 50 whole-world subscribers joining once the world is past tick
#      251 (3-byte tick numbers, as from 12.5 s to 55 min of a world's life): bytes per moving
#      agent per tick on the wire (WebSocket payload) and bytes per agent at join;
#   b) server CPU-µs per whole-world subscriber per tick: the slope of a least-squares line of
#      server CPU-µs per tick over 1, 100, 250 and 500 subscribers (`steer-swarm --fit`);
#   c) server CPU (% of one core) at 1,000 whole-world subscribers;
#   d) the most whole-world subscribers fed at 20 Hz with p99 delivery < 50 ms: a ladder of 500,
#      1000, 1500, … stopping at the first step that fails (p99 delivery ≥ 50 ms, a missed tick,
#      a disconnect, a bot not connected, or any decode/checksum/chain error);
#   e) issue #6's capacity ladder on swarm-10k (BENCHMARKS.md "Swarm ladder": each bot commands its own
#      agent in a 100×100 area; every tick delivered, p99 lateness < 50 ms, 0 disconnects) from
#      1,000 bots in steps of 500 until the first failure, and a projection of bots per dedicated
#      server core from server CPU per bot (a line through the ladder's server CPU-µs per tick
#      over bots: a core is 50,000 µs per 20 Hz tick).
# Subscribers in a–d are passive bots (`--passive 1`: they receive, decode, verify chains and
# checksums and count, and send nothing but Subscribe and, for 4 of them, pings). With --skim,
# all but those 4 only skim (`steer-swarm --skim`: each message's head is read and its bytes,
# tick and lateness counted, without decoding it), so the swarm's own CPU no longer caps the
# ladder; bytes and join figures then come from the 4 that verify. In e the bots stay active
# (they spawn, command and ping as ever) but all except the first 4 skim too: the server's
# ceiling with a client that costs next to nothing, not the verifying ladder. CPU, bytes and
# subscriber counts come from the report's window (after the ramp and the joins). Every run is
# bounded by `timeout`; correctness failures in a–c are reported in the table, not hidden.
#
# Usage: scripts/fanout-figures.sh [--quick] [--steps abcde] [--window SECS] [--max-subs N]
#                                  [--max-bots N] [--skim] [--out DIR]
#   --quick      a, b and c only (same as --steps abc)
#   --steps      which steps to run (default abcde)
#   --window     seconds measured per run after the ramp and warm-up (default 12)
#   --max-subs   top of ladder d (default 5000); --max-bots: top of ladder e (default 6000)
#   --skim       subscribers of a–d and bots of e skim instead of verifying (all but 4, see above)
#   --out DIR    keep every run's JSON report and server log there (default: a temp dir, removed)
# Needs python3. Raises the open-files limit to its hard limit; both processes need one
# descriptor per connection.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-meta.sh
meta="$(bench_meta "scripts/fanout-figures.sh${*:+ $*}")"

steps="abcde"
window=12
max_subs=5000
max_bots=6000
out=""
skim=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) steps="abc" ;;
        --steps) steps="$2"; shift ;;
        --window) window="$2"; shift ;;
        --max-subs) max_subs="$2"; shift ;;
        --max-bots) max_bots="$2"; shift ;;
        --out) out="$2"; shift ;;
        --skim) skim=(--skim) ;;
        -h|--help) sed -n '2,36p' "$0"; exit 0 ;;
        *) echo "fanout-figures: unknown argument $1 (see --help)" >&2; exit 1 ;;
    esac
    shift
done
case "$steps" in *[!abcde]*|"") echo "fanout-figures: --steps takes letters of abcde" >&2; exit 1 ;; esac
[[ "$window" =~ ^[0-9]+$ ]] && [ "$window" -ge 3 ] || { echo "fanout-figures: --window must be a whole number of seconds, at least 3" >&2; exit 1; }

cargo build --release -p steerd -p steer-swarm >&2
target="${CARGO_TARGET_DIR:-target}"
steerd="$target/release/steerd"
swarm="$target/release/steer-swarm"
keep=1
if [ -z "$out" ]; then
    out="$(mktemp -d)"
    keep=0
fi
mkdir -p "$out"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    if [ "$keep" = 0 ]; then rm -rf "$out"; fi
}
trap cleanup EXIT

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
fds="$(ulimit -n)"
echo "fanout-figures: open-files limit $fds; reports in $out" >&2

# 1,000 wanderers: swarm-10k with its one group at 1,000 agents, bounds and obstacles unchanged.
python3 - scenarios/swarm-10k.json "$out/wander-1k.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
s["name"] = "wander-1k"
s["description"] = "swarm-10k's wanderers at 1,000 agents in the same 1000x1000 world (fanout-figures.sh)"
assert len(s["groups"]) == 1
s["groups"][0]["count"] = 1000
json.dump(s, open(sys.argv[2], "w"), indent=1)
EOF

# start_server SCENARIO CONNECTIONS: a fresh steerd on a free port; sets $server_pid and $addr.
start_server() {
    local scenario="$1" conns="$2"
    rm -rf "$out/data"
    # Emptied here, not by the redirection below: that happens in the background child, maybe
    # after the loop below has read the previous server's address.
    : >"$out/server.log"
    RUST_LOG=warn "$steerd" --listen 127.0.0.1:0 --data-dir "$out/data" --admin-token t --scenario "$scenario" \
        --max-connections "$conns" --max-http-connections "$((conns + 64))" >"$out/server.log" 2>&1 &
    server_pid=$!
    addr=""
    for _ in $(seq 1 200); do
        addr="$(sed -n 's#^steerd listening on http://##p' "$out/server.log" | head -n1)"
        [ -n "$addr" ] && return 0
        kill -0 "$server_pid" 2>/dev/null || { echo "fanout-figures: steerd exited early:" >&2; cat "$out/server.log" >&2; exit 1; }
        sleep 0.1
    done
    echo "fanout-figures: steerd did not print its address" >&2
    exit 1
}

stop_server() {
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}

# Seconds between a server's start and its swarm's (see step a).
settle=0

# run NAME SCENARIO BOTS RAMP_S DURATION_S SWARM_ARGS...: one bounded run; the report goes to
# $out/NAME.json (absent if the swarm could not produce one).
run() {
    local name="$1" scenario="$2" bots="$3" ramp="$4" duration="$5"
    shift 5
    if [ "$fds" -lt "$((bots + 256))" ]; then
        echo "fanout-figures: $name: $bots connections need an open-files limit of at least $((bots + 256)) (have $fds)" >&2
        return 0
    fi
    start_server "$scenario" "$((bots + 64))"
    sleep "$settle"
    echo "fanout-figures: $name: $bots bots, ramp ${ramp}s, ${duration}s ($(uptime | sed 's/.*load average/load average/'))" >&2
    timeout --kill-after=10 "$((duration + 60))" "$swarm" --url "ws://$addr/ws" --world demo --bots "$bots" \
        --ramp "${ramp}s" --duration "${duration}s" --admin-token t --server-pid "$server_pid" --quiet \
        --max-handshakes 64 --report "$out/$name.json" "$@" || echo "fanout-figures: $name: steer-swarm exited $?" >&2
    cp "$out/server.log" "$out/$name.server.log"
    stop_server
}

# whole-world passive subscribers of the 1,000 wanderers
ww() {
    local name="$1" bots="$2"
    local ramp=$(( bots / 150 + 1 ))
    [ "$ramp" -gt 15 ] && ramp=15
    run "$name" "$out/wander-1k.json" "$bots" "$ramp" "$((ramp + 3 + window))" \
        --whole-world --passive 1 "${skim[@]}" --spawn-per-bot 0 --commands-per-sec 0 --warmup "$((ramp + 3))s"
}

# a ladder step passes?  pass NAME KIND (KIND: delivery | lateness)
pass() {
    python3 - "$out/$1.json" "$2" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit(1)
p99 = (r["frame_delivery_ms"] if sys.argv[2] == "delivery" else r["frame_lateness_ms"])["p99"]
ok = (p99 is not None and p99 < 50 and r["bots_connected"] == r["bots"] and r["disconnects"] == 0
      and r["tick_gaps"] == 0 and r["decode_errors"] == 0 and r["checksum_errors"] == 0 and r["chain_breaks"] == 0)
sys.exit(0 if ok else 1)
EOF
}

uptime_before="$(uptime)"
# Whether the kernel tracks loopback connections (conntrack, e.g. once a NAT table exists): it
# costs the server ~10 % more CPU in ladder e, so the summary says which way the runs were made.
conntrack_file=/proc/sys/net/netfilter/nf_conntrack_count
conntrack_before="$(cat "$conntrack_file" 2>/dev/null || echo -)"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo '+dirty')"

# Step a waits until the world is past tick 251: bincode writes a tick (and a base tick) below
# 251 in 1 byte and up to 65,535 in 3, in every cell's header, so a fresh server's first 12.5 s
# read ~0.7 B per moving agent lighter than the next 55 minutes (and from tick 65,536, 5 bytes).
case "$steps" in *a*) settle=14; ww a-50 50; settle=0 ;; esac
case "$steps" in *b*) for n in 1 100 250 500; do ww "b-$n" "$n"; done ;; esac
case "$steps" in *c*) ww c-1000 1000 ;; esac
case "$steps" in *d*)
    n=500
    while [ "$n" -le "$max_subs" ]; do
        ww "d-$n" "$n"
        pass "d-$n" delivery || break
        n=$((n + 500))
    done ;;
esac
case "$steps" in *e*)
    n=1000
    while [ "$n" -le "$max_bots" ]; do
        # The swarm-ladder command of BENCHMARKS.md (issue #6), with the window figures on top.
        run "e-$n" scenarios/swarm-10k.json "$n" 10 20 --commands-per-sec 1 --aoi 100x100 --format binary --seed 3 "${skim[@]}"
        pass "e-$n" lateness || break
        n=$((n + 500))
    done ;;
esac

uptime_after="$(uptime)"
conntrack_after="$(cat "$conntrack_file" 2>/dev/null || echo -)"
fit_b=""
if [[ "$steps" == *b* ]]; then
    fit_b="$("$swarm" --fit "$out"/b-*.json 2>&1 || true)"
fi
e_reports=("$out"/e-*.json)
fit_e=""
if [[ "$steps" == *e* ]] && [ -e "${e_reports[0]}" ]; then
    fit_e="$("$swarm" --fit "${e_reports[@]}" 2>&1 || true)"
fi

SKIM="${skim[*]}" python3 - "$out" "$commit" "$uptime_before" "$uptime_after" "$fit_b" "$fit_e" "$max_subs" "$max_bots" "$conntrack_before" "$conntrack_after" "$meta" <<'EOF'
import glob, json, os, sys
out, commit, up0, up1, fit_b, fit_e, max_subs, max_bots, ct0, ct1, meta = sys.argv[1:12]
def row(text):
    # A BENCHMARKS.md row: the figure's cells, then date, commit, machine and command.
    print(text.rstrip().removesuffix("|").rstrip() + " " + meta)
def load(name):
    try:
        return json.load(open(os.path.join(out, name + ".json")))
    except (OSError, ValueError):
        return None
def f(v, d=2):
    return "-" if v is None else f"{v:,.{d}f}"
def errors(r):
    return r["decode_errors"] + r["checksum_errors"] + r["chain_breaks"]
def health(r):
    return (f"{r['bots_connected']}/{r['bots']} connected, {r['disconnects']} disconnects, "
            f"{r['tick_gaps']} missed ticks, {errors(r)} decode/checksum/chain errors")
def fit(text):
    try:
        return json.loads(text)
    except ValueError:
        return None
print(f"\nfan-out figures at {commit}" + (" (subscribers of a-d and bots of e skimming but 4)" if os.environ.get("SKIM") else ""))
print(f"load before: {up0.strip()}")
print(f"load after:  {up1.strip()}")
print(f"conntrack entries before/after: {ct0}/{ct1} (a rise: the kernel tracked the runs' loopback connections)\n")
print("| figure | value | run | date | commit | machine | command |")
print("|---|---|---|---|---|---|---|")
r = load("a-50")
if r:
    row(f"| a) bytes per moving agent per tick (1,000 agents, whole world) | {f(r['bytes_per_moving_agent'])} | 50 subscribers: {f(r['bytes_per_subscriber_tick'], 0)} B per subscriber per tick, {health(r)} |")
    row(f"| a) bytes per agent at join | {f(r['join_bytes_per_agent'])} | {r['joins']} joins, {f(r['join_bytes_per_bot'], 0)} B each |")
fb = fit(fit_b) if fit_b else None
pts = []
for n in (1, 100, 250, 500):
    r = load(f"b-{n}")
    if r:
        pts.append(f"{n} ({f(r['window_subscribers'], 0)} subscribed in the window): {f(r['server_cpu_us_per_tick'], 0)} µs/tick ({f(r['server_cpu_us_per_subscriber_tick'])} per sub·tick, p99 delivery {f(r['frame_delivery_ms']['p99'])} ms, {errors(r) + r['tick_gaps'] + r['disconnects']} errors/gaps/disconnects)")
if fb:
    row(f"| b) server CPU-µs per whole-world subscriber per tick (linear fit) | {f(fb['cpu_us_per_subscriber_tick'])} | intercept {f(fb['cpu_us_per_tick_at_zero'], 0)} µs/tick, r² {f(fb['r2'], 3)}; " + "; ".join(pts) + " |")
elif fit_b:
    row(f"| b) server CPU-µs per whole-world subscriber per tick (linear fit) | - | no fit: {fit_b.strip()} |")
r = load("c-1000")
if r:
    row(f"| c) server CPU at 1,000 whole-world subscribers | {f(r['window_server_cpu_pct'], 1)} % of a core | {f(r['window_subscribers'], 0)} subscribed in the window (mean), {f(r['server_cpu_us_per_subscriber_tick'])} µs per sub·tick, p99 delivery {f(r['frame_delivery_ms']['p99'])} ms, swarm CPU {f(r['swarm_cpu_pct'], 0)} %, {health(r)} |")
def ladder(prefix, kind, step_field):
    runs = sorted((int(p.rsplit("-", 1)[1][:-5]), json.load(open(p))) for p in glob.glob(os.path.join(out, prefix + "-*.json")))
    best, failed, cells = None, None, []
    for n, r in runs:
        p99 = r[step_field]["p99"]
        ok = (p99 is not None and p99 < 50 and r["bots_connected"] == r["bots"] and r["disconnects"] == 0
              and r["tick_gaps"] == 0 and errors(r) == 0)
        cells.append(f"{n}: p99 {f(p99, 1)} ms, server {f(r['window_server_cpu_pct'], 0)} %, swarm {f(r['swarm_cpu_pct'], 0)} %" + ("" if ok else f" FAIL ({health(r)})"))
        if ok and failed is None:
            best = n
        elif not ok and failed is None:
            failed = n
    return best, failed, cells, runs
if os.path.exists(os.path.join(out, "d-500.json")):
    best, failed, cells, _ = ladder("d", "delivery", "frame_delivery_ms")
    top = "" if failed else f" (ladder top {max_subs} reached)"
    row(f"| d) whole-world subscribers fed at 20 Hz, p99 delivery < 50 ms | {best if best else '< 500'} | fails at {failed if failed else '-'}{top}; " + "; ".join(cells) + " |")
if os.path.exists(os.path.join(out, "e-1000.json")):
    best, failed, cells, runs = ladder("e", "lateness", "frame_lateness_ms")
    top = "" if failed else f" (ladder top {max_bots} reached)"
    row(f"| e) swarm-10k capacity: bots, every tick, p99 lateness < 50 ms, 0 disconnects | {best if best else '< 1000'} | fails at {failed if failed else '-'}{top}; " + "; ".join(cells) + " |")
    fe = fit(fit_e) if fit_e else None
    if fe and fe["cpu_us_per_subscriber_tick"] > 0:
        per_core = (50_000 - fe["cpu_us_per_tick_at_zero"]) / fe["cpu_us_per_subscriber_tick"]
        row(f"| e) projected bots per dedicated server core (fit over the ladder) | {per_core:,.0f} | {f(fe['cpu_us_per_subscriber_tick'])} µs per bot per tick + {f(fe['cpu_us_per_tick_at_zero'], 0)} µs per tick (the world), r² {f(fe['r2'], 3)}; a core = 50,000 µs per 20 Hz tick |")
    ok_runs = [(n, r) for n, r in runs if n == best]
    if ok_runs and ok_runs[0][1]["window_server_cpu_pct"]:
        n, r = ok_runs[0]
        row(f"| e) bots per core from the largest passing step alone | {n * 100 / r['window_server_cpu_pct']:,.0f} | {n} bots at {f(r['window_server_cpu_pct'], 1)} % of a core (world tick included) |")
EOF
