#!/usr/bin/env bash
# Container test (issue 8): builds the runtime image of docker/Dockerfile with podman, with the
# `build` stage substituted by the host's release build staged by docker/stage.sh (no registry
# is reachable, so no base image can be pulled), runs it, checks /health and a WebSocket
# subscribe, sends SIGTERM and checks a clean exit and the autosaved data in the volume; hands a
# durable world with steer-swarm bots on it from one container to another. Also parses
# docker/compose.yaml.
#
# Skips (exit 0, with the reason printed) only where podman cannot be installed.
# `--install-only`: install podman, then stop (scripts/test-all.sh runs this in the background
# while it compiles). The binaries are the release build `cargo test --release` already
# made: the `cargo build` below compiles nothing after it.
set -euo pipefail
cd "$(dirname "$0")/../.."
pass=0; fail=0
ok() { echo "ok   - $*"; pass=$((pass+1)); }
bad() { echo "FAIL - $*"; fail=$((fail+1)); }
finish() { echo "container: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; }

if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (flock /tmp/steerd-apt.lock apt-get update -qq && DEBIAN_FRONTEND=noninteractive flock /tmp/steerd-apt.lock apt-get install -y -qq podman runc podman-compose) >/tmp/steerd-podman-install.log 2>&1 || true
  fi
fi
if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
  echo "SKIP: podman/runc cannot be installed here (see /tmp/steerd-podman-install.log)"
  echo "container: 0 passed, 0 failed"
  exit 0
fi

[ "${1:-}" = "--install-only" ] && { echo "container: podman ready"; exit 0; }
# 1. The release binaries and the libraries they load, staged as the Dockerfile's build stage
#    stages them.
cargo build --release --locked --quiet -p steerd -p steer-swarm
CTX=$(mktemp -d)
trap 'rm -rf "$CTX"' EXIT
sh docker/stage.sh "$CTX/out" target/release/steerd target/release/steer-swarm
libs=$(cd "$CTX/out/root" && find . -type f | sed 's|^\.||' | sort | tr '\n' ' ')
echo "     staged libraries: $libs"

# 2. Build the runtime image with the build stage substituted by the folder.
PODMAN=(podman --runtime runc --storage-driver vfs --cgroup-manager cgroupfs --events-backend none)
IMAGE=localhost/steerd:test
if "${PODMAN[@]}" build -q --build-context build="$CTX" --target runtime -f docker/Dockerfile -t "$IMAGE" . >/tmp/steerd-podman-build.log 2>&1; then
  ok "image builds from docker/Dockerfile (build stage substituted)"
else
  bad "podman build failed: $(tail -5 /tmp/steerd-podman-build.log)"; finish; exit 1
fi
user=$("${PODMAN[@]}" image inspect "$IMAGE" --format '{{.Config.User}}')
[ "$user" = "65532:65532" ] && ok "runs as non-root ($user)" || bad "user is '$user'"
size=$("${PODMAN[@]}" image inspect "$IMAGE" --format '{{.Size}}')
echo "     image size: $size bytes"

# 3. Run it (host network; a free port), with a data volume.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
VOL=$(mktemp -d); chmod 777 "$VOL"
NAME=steerd-test-$$
"${PODMAN[@]}" rm -f "$NAME" >/dev/null 2>&1 || true
# Podman's default rlimits can exceed a sandbox's limits (runc then refuses to start): ask for
# modest ones that fit (16384 files covers the default 4096 connections).
nofile=$(( $(ulimit -Hn) < 16384 ? $(ulimit -Hn) : 16384 ))
ULIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=4096:4096")
# The binaries load only what the image holds (scratch has no other library). No network: the
# default bridge would have podman add NAT rules to the host's firewall, which stay after the
# test and make the kernel track every loopback connection from then on (conntrack: ~10 % more
# server CPU in the swarm ladder).
if v=$("${PODMAN[@]}" run --rm --network none "${ULIMITS[@]}" --entrypoint /steerd "$IMAGE" --version 2>&1) && \
   w=$("${PODMAN[@]}" run --rm --network none "${ULIMITS[@]}" --entrypoint /steer-swarm "$IMAGE" --version 2>&1); then
  ok "both binaries start in the image on its staged libraries ($v; $w)"
else
  bad "a binary does not start in the image: $v ${w:-}"
fi

"${PODMAN[@]}" run -d --name "$NAME" --network host "${ULIMITS[@]}" -v "$VOL:/data" \
  -e STEERD_LISTEN=127.0.0.1:$PORT -e STEERD_ADMIN_TOKEN=secret "$IMAGE" >/dev/null
cleanup() { "${PODMAN[@]}" rm -f "$NAME" >/dev/null 2>&1 || true; rm -rf "$CTX" "$VOL"; }
trap cleanup EXIT
up=0
for _ in $(seq 1 50); do
  if curl -fsS "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then up=1; break; fi
  sleep 0.2
done
[ "$up" = 1 ] && ok "/health answers 200 inside the container" || { bad "server did not come up: $("${PODMAN[@]}" logs "$NAME" 2>&1 | tail -5)"; finish; exit 1; }
"${PODMAN[@]}" exec "$NAME" /steerd healthcheck --url "http://127.0.0.1:$PORT/health" >/dev/null && ok "HEALTHCHECK command (steerd healthcheck) passes" || bad "steerd healthcheck failed"

# 4. A WebSocket subscribe through the real protocol: the swarm binary from the image, 5 bots, 3 s.
if "${PODMAN[@]}" exec "$NAME" /steer-swarm --url "ws://127.0.0.1:$PORT/ws" --world demo --bots 5 --duration 3s --quiet --admin-token secret \
     --fail-if 'decode_errors>0,disconnects>0,frames_received<10' >/tmp/steerd-podman-swarm.log 2>&1; then
  ok "WebSocket subscribe: 5 bots decode frames for 3 s"
else
  bad "WebSocket subscribe failed: $(tail -5 /tmp/steerd-podman-swarm.log)"
fi

# 5. Ask for autosave, SIGTERM, clean exit, data in the volume.
curl -fsS -X PATCH -H 'Authorization: Bearer secret' -H 'content-type: application/json' \
  -d '{"autosave": true}' "http://127.0.0.1:$PORT/worlds/demo" >/dev/null && ok "autosave enabled over REST" || bad "PATCH autosave failed"
"${PODMAN[@]}" kill --signal TERM "$NAME" >/dev/null
code=$(timeout 20 "${PODMAN[@]}" wait "$NAME" 2>/dev/null || echo timeout)
[ "$code" = 0 ] && ok "SIGTERM: exit code 0" || bad "SIGTERM: exit code $code; logs: $("${PODMAN[@]}" logs "$NAME" 2>&1 | tail -3)"
if [ -f "$VOL/scenarios/demo-autosave.json" ] && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['groups']" "$VOL/scenarios/demo-autosave.json"; then
  ok "autosaved world in the data volume ($(stat -c %s "$VOL/scenarios/demo-autosave.json") bytes)"
else
  bad "no autosave in the volume: $(ls -R "$VOL" | head)"
fi

# 6. A live handoff from one container to another (docs/handoff.md): two containers of the
#    image on the host network (distinct ports), durable worlds, one cluster secret. A durable
#    world `arena` on A with 4 steer-swarm bots (run in A, whole-world subscribers owning 2
#    agents each and commanding them) moves to B: it ticks on B with the same agents, A answers
#    its name with 410, and every bot followed it to B and commanded its agents there.
PA=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PB=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
VA=$(mktemp -d); VB=$(mktemp -d); chmod 777 "$VA" "$VB"
NA=steerd-test-a-$$; NB=steerd-test-b-$$
# One name per `podman rm` (podman 4.3 removes none of several when one is already gone).
cleanup() { for n in "$NAME" "$NA" "$NB"; do "${PODMAN[@]}" rm -f "$n" >/dev/null 2>&1 || true; done; rm -rf "$CTX" "$VOL" "$VA" "$VB"; }
CLUSTER=(-e STEERD_PERSISTENCE=true -e STEERD_CLUSTER_SECRET=container-cluster-secret-0123 -e STEERD_ADMIN_TOKEN=secret)
"${PODMAN[@]}" run -d --name "$NA" --network host "${ULIMITS[@]}" -v "$VA:/data" "${CLUSTER[@]}" -e STEERD_LISTEN=127.0.0.1:$PA "$IMAGE" >/dev/null
"${PODMAN[@]}" run -d --name "$NB" --network host "${ULIMITS[@]}" -v "$VB:/data" "${CLUSTER[@]}" -e STEERD_LISTEN=127.0.0.1:$PB "$IMAGE" >/dev/null
up=0
for _ in $(seq 1 50); do
  if curl -fsS "http://127.0.0.1:$PA/health" >/dev/null 2>&1 && curl -fsS "http://127.0.0.1:$PB/health" >/dev/null 2>&1; then up=1; break; fi
  sleep 0.2
done
api() { # api METHOD PORT PATH [BODY]: the admin REST call's body (fails on an HTTP error)
  curl -fsS -X "$1" -H 'Authorization: Bearer secret' -H 'content-type: application/json' ${4:+-d "$4"} "http://127.0.0.1:$2$3"
}
field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
if [ "$up" = 1 ] && api PUT "$PA" /scenarios/arena-base '{"name": "arena-base", "bounds": {"min": {"x": 0, "y": 0}, "max": {"x": 200, "y": 200}}, "edge": "wrap", "tick_rate": 20, "seed": 3,
     "groups": [{"name": "w", "count": 200, "area": {"type": "rect", "min_x": 0, "min_y": 0, "max_x": 200, "max_y": 200},
     "limits": {"max_speed": 5, "max_accel": 10, "radius": 0.5}, "initial_speed": 3, "behaviors": [{"behavior": {"type": "wander"}}]}]}' >/dev/null \
   && api POST "$PA" /worlds '{"name": "arena", "scenario": "arena-base"}' >/dev/null \
   && [ "$(api GET "$PA" /worlds/arena | field '.get("persistence") is not None')" = True ]; then
  ok "two containers with one cluster secret; a durable world on A"
else
  bad "cluster containers or the durable world: $("${PODMAN[@]}" logs "$NA" 2>&1 | tail -3) $("${PODMAN[@]}" logs "$NB" 2>&1 | tail -3)"
fi
"${PODMAN[@]}" exec "$NA" /steer-swarm --url "ws://127.0.0.1:$PA/ws" --world arena --bots 4 --ramp 300ms --duration 20s --whole-world \
  --spawn-per-bot 2 --commands-per-sec 3 --admin-token secret --seed 2 --report /data/swarm.json >/tmp/steerd-podman-handoff-swarm.log 2>&1 &
swarm=$!
# `podman exec` may take seconds on a loaded host: up to 15 s for the bots' agents (the run
# lasts 20 s, so they command on B for a few seconds after the handoff whatever the start).
agents=0
for _ in $(seq 1 75); do
  agents=$(api GET "$PA" /worlds/arena 2>/dev/null | field '["agents"]' 2>/dev/null || echo 0)
  [ "$agents" = 208 ] && break
  sleep 0.2
done
sleep 1
ids() { api GET "$1" /worlds/arena/agents 2>/dev/null | python3 -c 'import json,sys; print(sorted(a["id"] for a in json.load(sys.stdin)))' 2>/dev/null; }
ids_a=$(ids "$PA")
if [ "$agents" = 208 ] && h=$(api POST "$PA" /worlds/arena/handoff "{\"to\": \"http://127.0.0.1:$PB\"}"); then
  ok "handoff A → B answered (tick $(field '["tick"]' <<<"$h"), $(field '["sessions"]' <<<"$h") sessions, $(field '["bytes"]' <<<"$h") bytes)"
else
  bad "handoff A → B (agents on A: $agents): ${h:-} $("${PODMAN[@]}" logs "$NA" 2>&1 | tail -3)"
fi
t1=$(api GET "$PB" /worlds/arena 2>/dev/null | field '["tick"]' 2>/dev/null || echo none)
# The world ticks on B: poll for a later tick (up to 20 s, a bound against a stopped world only).
for _ in $(seq 1 100); do
  b=$(api GET "$PB" /worlds/arena 2>/dev/null || echo '{}')
  t2=$(field '.get("tick")' <<<"$b"); nb=$(field '.get("agents")' <<<"$b")
  [ "$t1" != none ] && [ "$t2" -gt "$t1" ] 2>/dev/null && break
  sleep 0.2
done
[ "$t1" != none ] && [ "$t2" -gt "$t1" ] 2>/dev/null && [ "$nb" = 208 ] && [ -n "$ids_a" ] && [ "$(ids "$PB")" = "$ids_a" ] \
  && ok "the world ticks on B with the same agents (tick $t1 → $t2, the same $nb agent ids)" \
  || bad "the world on B: tick $t1 → $t2, agents $nb: $("${PODMAN[@]}" logs "$NB" 2>&1 | tail -3)"
gone=$(curl -s -o /tmp/steerd-podman-gone.json -w '%{http_code}' -H 'Authorization: Bearer secret' "http://127.0.0.1:$PA/worlds/arena")
[ "$gone" = 410 ] && grep -q "127.0.0.1:$PB" /tmp/steerd-podman-gone.json && ok "A answers the world's name with 410 naming B" \
  || bad "A answers $gone for the moved world: $(cat /tmp/steerd-podman-gone.json)"
wait "$swarm" && sw=0 || sw=$?
# B's first tick waited for the moved sessions to resume: how many it still waited for.
held=$("${PODMAN[@]}" logs "$NB" 2>&1 | grep -o '"waited_for":[0-9]*' | head -1 || true)
if [ "$sw" = 0 ] && check=$(python3 - "$VA/swarm.json" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
# Ticks missed across the move are printed, not gated here: under a loaded host's podman exec
# they were seen (2 runs of ~25: one tick per bot); the e2e (server/tests/it/handoff.rs) gates
# them and the figures script measures them.
bad = {k: r[k] for k in ("disconnects", "connect_failures", "decode_errors", "checksum_errors", "chain_breaks", "command_timeouts", "server_errors") if r[k]}
# The one refusal a handoff gives: `busy` to a command sent during the freeze (docs/handoff.md).
busy = r["command_error_codes"].get("busy", 0)
if r["command_errors"] != busy or busy > 4:
    bad["command_error_codes"] = r["command_error_codes"]
assert r["bots_connected"] == 4 and r["follows"] == 4 and r["commanded_after_follow"] == 4 and not bad, (r["follows"], r["commanded_after_follow"], bad, "longest tick interval", r["tick_interval_ms"]["max"])
print(f"{r['follows']} of {r['bots_connected']} bots followed, {r['commanded_after_follow']} commanded on B, {busy} commands refused `busy` in the freeze, {r['tick_gaps']} ticks missed, longest tick interval {r['tick_interval_ms']['max']} ms")
PY
); then
  ok "every steer-swarm bot followed the world to B and commanded its agents there ($check)"
else
  bad "the bots did not all follow (exit $sw, B's first tick ${held:-?}): ${check:-} $(tail -5 /tmp/steerd-podman-handoff-swarm.log)"
fi
for n in "$NA" "$NB"; do "${PODMAN[@]}" rm -f "$n" >/dev/null 2>&1 || true; done

# 7. compose.yaml parses and has the services and profile it promises.
if command -v podman-compose >/dev/null 2>&1 && (cd docker && STEERD_ADMIN_TOKEN=x podman-compose config >/tmp/steerd-compose.txt 2>&1); then
  grep -q "steerd" /tmp/steerd-compose.txt && grep -q "swarm" /tmp/steerd-compose.txt && ok "podman-compose config parses docker/compose.yaml" || bad "compose config lacks services: $(head -5 /tmp/steerd-compose.txt)"
else
  python3 - <<'PY' && ok "docker/compose.yaml parses (python yaml)" || bad "docker/compose.yaml does not parse"
import yaml
d = yaml.safe_load(open("docker/compose.yaml"))
assert set(d["services"]) == {"steerd", "swarm"}
assert d["services"]["swarm"]["profiles"] == ["swarm"]
PY
fi
finish
