# Sourced by the scripts that print BENCHMARKS.md rows: `bench_meta COMMAND` prints the last
# cells of a row, "| date | commit | machine | `command` |": the UTC date, the commit measured
# (with -dirty when the tree differs from it), the machine (cores, CPU model, memory, and the
# 1-minute load average when the run started: a shared host's load inflates timings), and the
# command that reproduces the row.
bench_meta() {
    local commit cpu mem load
    commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    git diff --quiet HEAD -- 2>/dev/null || commit="$commit-dirty"
    cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n1)"
    mem="$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null)"
    load="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null)"
    printf '| %s | %s | %s-core %s, %s, load %s | `%s` |' "$(date -u +%F)" "$commit" "$(nproc)" "${cpu:-unknown CPU}" "${mem:-?}" "${load:-?}" "$1"
}
