#!/usr/bin/env bash
# C# SDK tests under mono: installs Debian's mono-devel + NUnit 2.6 (nunit-console,
# libnunit-cil-dev) when missing, compiles Runtime/ (the Unity package's code, C# 7.2 — what
# Debian's mcs accepts, a subset of Unity's C#) with warnings as errors, compiles Tests/Editor/
# (the tests as Unity's Test Runner runs them: NUnit 3 attributes, their asmdef) with
# Tests~/NUnit2.cs (NUnit 3's attribute names over NUnit 2.6) and runs them — the build goes to
# target/csharp-sdk/ of the repository, never inside the package: golden vectors, frame chain,
# schema, view/clock unit tests, and the end-to-end tests against a real steerd (STEERD_BIN,
# default target/release/steerd — clients/run-tests.sh builds it). A test that cannot find the
# repository fails here (STEERD_TESTS_REQUIRE_ALL); in a Unity project without it, it is ignored.
# Extra arguments go to nunit-console (e.g. -run=Steerd.Client.Tests.E2eTests).
# `--install-only`: mono and NUnit, then stop.
set -uo pipefail
pkg="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$pkg/../.." && pwd)"

nunit_dll() { ls /usr/lib/cli/nunit.framework-2.6*/nunit.framework.dll 2>/dev/null | head -1; }

if ! command -v mcs >/dev/null || ! command -v nunit-console >/dev/null || [ -z "$(nunit_dll)" ]; then
  echo "== installing mono-devel, nunit-console, libnunit-cil-dev (apt)"
  sudo=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo="sudo"; fi
  { $sudo flock /tmp/steerd-apt.lock apt-get update && DEBIAN_FRONTEND=noninteractive $sudo flock /tmp/steerd-apt.lock apt-get install -y --no-install-recommends mono-devel nunit-console libnunit-cil-dev; } \
    || { echo "csharp: apt-get install failed"; exit 1; }
fi
NUNIT="$(nunit_dll)"
[ -n "$NUNIT" ] || { echo "csharp: nunit.framework.dll not found"; exit 1; }
[ "${1:-}" = "--install-only" ] && { echo "csharp: mono and NUnit installed"; exit 0; }

export STEERD_BIN="${STEERD_BIN:-$root/target/release/steerd}"
export STEERD_ROOT="$root" STEERD_TESTS_REQUIRE_ALL=1
[ -x "$STEERD_BIN" ] || { echo "csharp: no steerd binary at $STEERD_BIN"; exit 1; }

build="$root/target/csharp-sdk"
rm -rf "$build" && mkdir -p "$build"
echo "== mcs: Steerd.Client.dll"
mcs -langversion:7.2 -target:library -optimize+ -warnaserror+ -out:"$build/Steerd.Client.dll" -recurse:"$pkg/Runtime/*.cs" || exit 1
echo "== mcs: Steerd.Client.Tests.dll"
cp "$NUNIT" "$build/"
mcs -langversion:7.2 -target:library -warnaserror+ -out:"$build/Steerd.Client.Tests.dll" -r:"$build/Steerd.Client.dll" -r:"$NUNIT" -r:System.Net.Http "$pkg"/Tests/Editor/*.cs "$pkg"/'Tests~'/NUnit2.cs || exit 1
echo "== nunit-console"
cd "$build"
# nunit-console's exit code is the number of failed tests (negative on a runner error).
timeout 600 nunit-console -nologo -labels Steerd.Client.Tests.dll "$@"
