#!/usr/bin/env bash
# The documentation's tests (a step of scripts/test-all.sh):
#
#  1. Runs every shell block of README.md and docs/*.md marked runnable, against a real server:
#       <!-- run -->              the next ```sh block runs against a dev-mode steerd this script
#                                 starts on a free loopback port (every block, in document order,
#                                 talks to the same server: later blocks may use what earlier
#                                 ones made);
#       <!-- run: own-server -->  the block starts its own server: STEERD_LISTEN is set to a
#                                 free loopback port and STEERD_DATA_DIR to a fresh directory.
#     In a block, `localhost:8080` and `127.0.0.1:8080` mean that server's address; `steerd` and
#     `steer-swarm` are the release binaries; `curl` fails on an HTTP error (--fail-with-body);
#     the working directory is a scratch directory holding `scenarios/` (the shipped ones). A
#     block fails on the first failing command (bash -e -o pipefail), or after 120 s.
#  2. Checks the mdBook table of contents and the links: every docs/*.md is in docs/SUMMARY.md,
#     every SUMMARY entry exists, and every relative link of README.md and docs/*.md points to a
#     file that exists.
#
# Usage: scripts/doc-tests.sh [--list]   (--list: print the runnable blocks, run nothing)
# Needs the release binaries (builds them if missing), curl and jq (installs jq with apt-get
# when missing and root). Honours CARGO_TARGET_DIR. Ends with `N passed, N failed`.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
docs=(README.md docs/*.md)

# --- extract the runnable blocks: one file per block, named by document and line
work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/blocks" "$work/cwd"
n=0
for doc in "${docs[@]}"; do
  # Prints "LINE MODE" for each marked block, then the block's lines prefixed by "| ".
  awk -v doc="$doc" '
    /^<!-- run(: own-server)? -->$/ { mode = ($0 ~ /own-server/) ? "own" : "shared"; marked = NR; next }
    marked && NR == marked + 1 {
      if ($0 !~ /^```(sh|bash|shell)$/) { printf "ERROR %s:%d: a run marker must be followed by a ```sh block\n", doc, marked; marked = 0; next }
      printf "BLOCK %d %s\n", NR, mode; inblock = 1; marked = 0; next
    }
    inblock && /^```$/ { inblock = 0; print "END"; next }
    inblock { print "| " $0 }
  ' "$doc" >"$work/extract"
  if grep -q '^ERROR' "$work/extract"; then grep '^ERROR' "$work/extract" >&2; echo "0 passed, 1 failed"; exit 1; fi
  while IFS= read -r line; do
    case "$line" in
      "BLOCK "*)
        n=$((n + 1))
        set -- $line
        f="$work/blocks/$(printf '%03d' "$n")"
        echo "$doc:$2" >"$f.where"; echo "$3" >"$f.mode"; : >"$f.sh" ;;
      "END") ;;
      *) printf '%s\n' "${line#| }" >>"$f.sh" ;;
    esac
  done <"$work/extract"
done
if [ "${1:-}" = "--list" ]; then
  for f in "$work"/blocks/*.sh; do echo "== $(cat "${f%.sh}.where") ($(cat "${f%.sh}.mode"))"; cat "$f"; done
  exit 0
fi

# --- tools
if ! command -v jq >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { flock /tmp/steerd-apt.lock apt-get update -qq && DEBIAN_FRONTEND=noninteractive flock /tmp/steerd-apt.lock apt-get install -y -qq jq; } >/dev/null \
      || { echo "doc tests: could not install jq"; echo "0 passed, 1 failed"; exit 1; }
  else
    echo "doc tests: jq is missing"; echo "0 passed, 1 failed"; exit 1
  fi
fi
if [ ! -x "$target/release/steerd" ] || [ ! -x "$target/release/steer-swarm" ]; then
  cargo build --release -p steerd -p steer-swarm || { echo "0 passed, 1 failed"; exit 1; }
fi
ln -s "$root/scenarios" "$work/cwd/scenarios"

# A free loopback port: one nothing answers on.
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

# --- the shared server
: >"$work/server.out"
RUST_LOG=warn "$target/release/steerd" --listen 127.0.0.1:0 --data-dir "$work/data" \
  --scenarios-dir "$root/scenarios" >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
addr=""
for _ in $(seq 1 100); do
  addr="$(sed -n 's#^steerd listening on http://##p' "$work/server.out" | head -n1)"
  [ -n "$addr" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$addr" ]; then
  echo "doc tests: steerd did not start:"; cat "$work/server.err"; echo "0 passed, 1 failed"; exit 1
fi
echo "== doc tests: $n runnable blocks against steerd at $addr"

# Every block runs in a fresh bash with this prelude.
cat >"$work/prelude.sh" <<EOF
set -euo pipefail
export PATH="$target/release:\$PATH"
curl() { command curl --fail-with-body -sS --max-time 60 "\$@"; }
trap 'j=\$(jobs -p); if [ -n "\$j" ]; then kill \$j 2>/dev/null || true; wait 2>/dev/null || true; fi' EXIT
EOF

passed=0
failed=0
for f in "$work"/blocks/*.sh; do
  where="$(cat "${f%.sh}.where")"
  mode="$(cat "${f%.sh}.mode")"
  env_extra=()
  if [ "$mode" = own ]; then
    port="$(free_port)"
    there="127.0.0.1:$port"
    mkdir -p "$work/own-data-$port"
    env_extra=(STEERD_LISTEN="$there" STEERD_DATA_DIR="$work/own-data-$port" STEERD_SCENARIOS_DIR="$root/scenarios")
  else
    there="$addr"
  fi
  { cat "$work/prelude.sh"; sed -e "s#localhost:8080#$there#g" -e "s#127\.0\.0\.1:8080#$there#g" "$f"; } >"$f.run"
  if (cd "$work/cwd" && env "${env_extra[@]}" timeout 120 bash "$f.run") >"$f.out" 2>&1; then
    passed=$((passed + 1))
    echo "ok   $where"
  else
    failed=$((failed + 1))
    echo "FAIL $where:"
    sed 's/^/    | /' "$f"
    echo "    output:"
    tail -n 30 "$f.out" | sed 's/^/    > /'
  fi
done

# --- the book's table of contents and the relative links
links_ok=1
for d in docs/*.md; do
  b="$(basename "$d")"
  [ "$b" = SUMMARY.md ] && continue
  grep -q "]($b)" docs/SUMMARY.md || { echo "FAIL docs/SUMMARY.md does not list $b"; links_ok=0; }
done
for doc in "${docs[@]}"; do
  dir="$(dirname "$doc")"
  # Markdown links [text](target), relative ones only (no scheme, no pure #anchor).
  while IFS= read -r link; do
    t="${link%%#*}"
    [ -z "$t" ] && continue
    case "$t" in *://*|mailto:*) continue ;; esac
    [ -e "$dir/$t" ] || { echo "FAIL $doc: link to $t, which does not exist"; links_ok=0; }
  done < <(grep -o '\](\([^)]*\))' "$doc" | sed 's/^](\(.*\))$/\1/' | sed 's/ .*//')
done
if [ "$links_ok" = 1 ]; then passed=$((passed + 1)); echo "ok   SUMMARY.md and relative links"; else failed=$((failed + 1)); fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
