#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then a program outside the tree (tests/install/consumer/) built against
# that installed tree only, twice: with find_package(Datavo) (CMAKE_PREFIX_PATH) and with pkg-config (a plain g++
# command line). Both are run and must print the same, right, results. Also checks the installed layout: the CLI
# runs, include/ holds exactly the public headers (include/datavo/), and those compile together with nothing but
# the installed tree on the include path, so that a public header including a private one (src/) fails here.
#
# Env (set by ctest, tests/CMakeLists.txt): DATAVO_BUILD_DIR (a built build tree), DATAVO_SOURCE_DIR, DATAVO_BIN.
# Optional: CXX (default g++).
. "$(dirname "$0")/../e2e/lib.sh"

build=${DATAVO_BUILD_DIR:?DATAVO_BUILD_DIR must name a built build tree}
consumer_src="$DATAVO_SOURCE_DIR/tests/install/consumer"
prefix="$E2E_TMP/prefix"
cxx=${CXX:-g++}
version=$(sed -n 's/^project(datavo VERSION \([0-9.]*\).*/\1/p' "$DATAVO_SOURCE_DIR/CMakeLists.txt")
# The first test vector of docs/content-hash.md: the identity consumer/main.cpp hashes.
expected_hash=61f3427f3e6c250ad3d54035eb97cb636a5301e48e1d56d6c681ee6def32afd5
payload_sha=$(printf 'hello from an installed datavo\n' | sha256sum | cut -d' ' -f1)
payload_size=31

# run_logged WHAT LOG CMD...: runs CMD with its output in LOG; on failure counts WHAT as failed and shows the log.
run_logged() {
  local what=$1 log=$2
  shift 2
  if timeout 300 "$@" >"$log" 2>&1; then
    pass "$what"
  else
    fail "$what" "exit $? from: $*"
    sed 's/^/#   /' "$log" | tail -40
    return 1
  fi
}

# --- install ------------------------------------------------------------------------------------------------------
run_logged "cmake --install into a temporary prefix" "$E2E_TMP/install.log" \
  cmake --install "$build" --prefix "$prefix" || finish

expect_eq "the installed CLI reports the project's version" "datavo $version" \
  "$("$prefix/bin/datavo" --version 2>&1 | head -1)"
expect_eq "the static library is installed" yes "$([ -f "$prefix/lib/libdatavo.a" ] && echo yes || echo no)"
for f in DatavoConfig.cmake DatavoConfigVersion.cmake DatavoTargets.cmake DatavoCppHttplib.cmake; do
  expect_eq "lib/cmake/Datavo/$f is installed" yes "$([ -f "$prefix/lib/cmake/Datavo/$f" ] && echo yes || echo no)"
done
pc_dir="$prefix/lib/pkgconfig"
expect_eq "datavo.pc is installed" yes "$([ -f "$pc_dir/datavo.pc" ] && echo yes || echo no)"

# include/ holds exactly include/datavo/*.hpp of the source tree: no private header (src/), nothing else.
expected_headers=$(cd "$DATAVO_SOURCE_DIR/include" && find . -type f | sort)
installed_headers=$(cd "$prefix/include" && find . -type f | sort)
expect_eq "include/ holds exactly the public headers" "$expected_headers" "$installed_headers"

# Every public header at once, with only the installed tree on the include path: a public header that includes a
# private one (or anything not installed) fails to compile here.
all_headers="$E2E_TMP/all_headers.cpp"
(cd "$prefix/include" && find datavo -name '*.hpp' | sort | sed 's/.*/#include <&>/') >"$all_headers"
run_logged "every installed header compiles against the installed tree alone" "$E2E_TMP/headers.log" \
  "$cxx" -std=c++20 -fsyntax-only -I"$prefix/include" "$all_headers"

# check_output HOW OUTPUT: what the consumer printed (consumer/main.cpp): the documented content hash, a fetch on
# the first pass, a hit on the second, the payload read back whole both times, the fetcher called once.
check_output() {
  local how=$1 out=$2
  expect_eq "$how: the content hash is docs/content-hash.md's vector" "content_hash $expected_hash" \
    "$(grep '^content_hash ' <<<"$out")"
  expect_eq "$how: the first read fetches and installs into the folder tier" \
    "first fetched tier=local size=$payload_size sha256=$payload_sha" "$(grep '^first ' <<<"$out")"
  expect_eq "$how: the second read is a hit with the same bytes" \
    "second hit tier=local size=$payload_size sha256=$payload_sha" "$(grep '^second ' <<<"$out")"
  expect_eq "$how: the fetcher ran once" "fetches 1" "$(grep '^fetches ' <<<"$out")"
}

# --- a consumer through find_package(Datavo) ----------------------------------------------------------------------
cmake_build="$E2E_TMP/consumer-cmake"
if run_logged "find_package(Datavo) consumer configures" "$E2E_TMP/cmake-configure.log" \
  cmake -S "$consumer_src" -B "$cmake_build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF &&
  run_logged "find_package(Datavo) consumer builds" "$E2E_TMP/cmake-build.log" cmake --build "$cmake_build"; then
  expect_eq "find_package found the installed package" "$prefix/lib/cmake/Datavo" \
    "$(sed -n 's/^Datavo_DIR:PATH=//p' "$cmake_build/CMakeCache.txt")"
  cmake_out=$(timeout 60 "$cmake_build/datavo_consumer" 2>&1)
  expect_eq "find_package consumer exits 0" 0 "$?"
  check_output "find_package consumer" "$cmake_out"
fi

# --- a consumer through pkg-config and a plain g++ command line ---------------------------------------------------
export PKG_CONFIG_PATH="$pc_dir"
expect_eq "pkg-config finds the installed datavo.pc at the project's version" "$version" \
  "$(pkg-config --modversion datavo 2>&1)"
expect_eq "datavo.pc's prefix is the install prefix" "$(cd "$prefix" && pwd -P)" \
  "$(cd "$(pkg-config --variable=prefix datavo)" && pwd -P)"
pc_bin="$E2E_TMP/consumer-pkg-config"
# Word splitting of pkg-config's flags is intended: they are a command line.
# shellcheck disable=SC2046
if run_logged "pkg-config consumer builds (g++ ... \$(pkg-config --cflags --libs --static datavo))" \
  "$E2E_TMP/pkg-config-build.log" \
  "$cxx" -std=c++20 -o "$pc_bin" "$consumer_src/main.cpp" $(pkg-config --cflags datavo) \
  $(pkg-config --static --libs datavo); then
  pc_out=$(timeout 60 "$pc_bin" 2>&1)
  expect_eq "pkg-config consumer exits 0" 0 "$?"
  check_output "pkg-config consumer" "$pc_out"
  expect_eq "both consumers print the same" "${cmake_out:-}" "$pc_out"
fi

# The installed CLI agrees with the library on the content hash.
expect_eq "the installed CLI computes the same content hash" "$expected_hash" \
  "$("$prefix/bin/datavo" content-hash --manifest-ref voice_demo_v1/train@m1 --revision 42 --shard-index 3 \
    --key transcript.txt --key audio.wav --sample-id utt_0001 --sample-id utt_0002 --sample-id utt_0003 2>&1)"

finish
