#!/bin/sh
# Stages what the runtime image holds into OUT, for docker/Dockerfile's build stage and for
# tests/container/run.sh (which substitutes that stage with the host's release build):
#   OUT/steerd, OUT/steer-swarm   the release binaries, symbols stripped
#   OUT/root/                     the shared libraries they load (the C library, libgcc_s,
#                                 the dynamic loader), at the paths the binaries name
#   OUT/data/                     an empty data dir (scratch has no shell to make one)
# Usage: docker/stage.sh OUT BINARY...
# The binaries are the same release build the tests run (jemalloc and all); a static
# (`crt-static`) build would be a second full build of every crate for the image alone.
set -eu
out=$1; shift
mkdir -p "$out/root" "$out/data"
for bin in "$@"; do
  name=$(basename "$bin")
  cp "$bin" "$out/$name"
  strip "$out/$name"
  # ldd prints "name => /path (addr)" for a library and "/path (addr)" for the loader; the
  # vDSO has no path. Copies each library under its path (symlinks resolved: scratch has no
  # ld.so.cache, the loader finds them by the standard directories).
  ldd "$out/$name" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' | while read -r lib; do
    mkdir -p "$out/root$(dirname "$lib")"
    cp -L "$lib" "$out/root$lib"
  done
done
