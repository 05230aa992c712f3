#!/usr/bin/env bash
# The Debian packages of cmake/Package.cmake, built by cpack from the build tree, then installed on this machine:
#   - their fields (name, the project's version, architecture, maintainer, description) and contents (the CLI
#     package holds usr/bin/datavo only; the -dev package the public headers, libdatavo.a, the CMake package and
#     datavo.pc, nothing from src/);
#   - every shared library the CLI needs (its ELF NEEDED entries) belongs to a package named in its Depends, so that
#     dpkg on a fresh machine pulls in all of them;
#   - dpkg -i of both, /usr/bin/datavo --version, a consumer (tests/install/consumer/) built against /usr through
#     pkg-config and run, then dpkg -r of both, leaving nothing behind.
# scripts/deb-fresh-machine.sh does the install in a debootstrapped Debian 12 instead (it downloads from a mirror,
# so it is not a test).
#
# Needs root (CI runs as root) or passwordless sudo, and dpkg-dev (dpkg-shlibdeps). Refuses to run when a package
# named datavo or libdatavo-dev is installed already, rather than replace it. Runs of this test on one machine take
# turns (a lock file), since they install the same packages.
# Env (set by ctest): DATAVO_BUILD_DIR (a built build tree), DATAVO_SOURCE_DIR, DATAVO_BIN. Optional: CXX.
. "$(dirname "$0")/../e2e/lib.sh"

build=${DATAVO_BUILD_DIR:?DATAVO_BUILD_DIR must name a built build tree}
cxx=${CXX:-g++}
version=$(sed -n 's/^project(datavo VERSION \([0-9.]*\).*/\1/p' "$DATAVO_SOURCE_DIR/CMakeLists.txt")
packages=(libdatavo-dev datavo)

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  sudo -n true 2>/dev/null || die "setup" "needs root (CI runs as root) or passwordless sudo, for dpkg -i and dpkg -r"
  sudo_cmd=(sudo -n)
fi
command -v dpkg-shlibdeps >/dev/null || die "setup" "dpkg-shlibdeps is missing: apt-get install dpkg-dev"

exec 9>"${TMPDIR:-/tmp}/datavo-test-deb.lock"
flock -w 600 9 || die "setup" "another run of this test held ${TMPDIR:-/tmp}/datavo-test-deb.lock for 10 minutes"

# status PACKAGE: dpkg's state of PACKAGE (installed, not-installed, config-files, half-installed, ...).
status() {
  local s
  s=$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) || s=not-installed
  echo "${s:-not-installed}"
}
for p in "${packages[@]}"; do
  case $(status "$p") in
    not-installed | config-files) ;;
    *) die "setup" "the package $p is installed already; this test would replace it (dpkg -r $p first)" ;;
  esac
done

# run_logged WHAT LOG CMD...: runs CMD (a program, bounded in time, or a function of this file) with its output in
# LOG; on failure counts WHAT as failed and shows the log.
run_logged() {
  local what=$1 log=$2 bound=(timeout 300)
  shift 2
  declare -F "$1" >/dev/null && bound=()
  if "${bound[@]}" "$@" >"$log" 2>&1; then
    pass "$what"
  else
    fail "$what" "exit $? from: $*"
    sed 's/^/#   /' "$log" | tail -40
    return 1
  fi
}

# dpkg_as_root ARGS...: dpkg as root, waiting (bounded) while another dpkg or apt holds dpkg's lock.
dpkg_as_root() {
  local out _
  for _ in $(seq 1 60); do
    if out=$(timeout 120 "${sudo_cmd[@]}" dpkg "$@" 2>&1); then
      echo "$out"
      return 0
    fi
    grep -qi 'lock' <<<"$out" || break
    sleep 2
  done
  echo "$out"
  return 1
}

# --- build and inspect the packages -------------------------------------------------------------------------------
debs="$E2E_TMP/debs"
run_logged "cpack -G DEB builds the packages" "$E2E_TMP/cpack.log" \
  cpack -G DEB --config "$build/CPackConfig.cmake" -B "$debs" || finish
arch=$(dpkg --print-architecture)
cli_deb="$debs/datavo_${version}_${arch}.deb"
dev_deb="$debs/libdatavo-dev_${version}_${arch}.deb"
for deb in "$cli_deb" "$dev_deb"; do
  [ -f "$deb" ] || die "$(basename "$deb")" "not built; $debs holds: $(ls "$debs")"
done

for deb in "$cli_deb" "$dev_deb"; do
  name=$(basename "$deb")
  expect_eq "$name: Version is the project's" "$version" "$(dpkg-deb -f "$deb" Version)"
  expect_eq "$name: Architecture" "$arch" "$(dpkg-deb -f "$deb" Architecture)"
  expect_match "$name: a Maintainer with an address" '^.+ <.+@.+>$' "$(dpkg-deb -f "$deb" Maintainer)"
  expect_match "$name: a Description" '[a-z]' "$(dpkg-deb -f "$deb" Description)"
done
expect_eq "datavo.deb: Package" datavo "$(dpkg-deb -f "$cli_deb" Package)"
expect_eq "libdatavo-dev.deb: Package" libdatavo-dev "$(dpkg-deb -f "$dev_deb" Package)"

# files DEB: the regular files and symlinks a package installs, one per line, without the leading "./".
files() { dpkg-deb -c "$1" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\./||' | sort; }
expect_eq "datavo.deb holds usr/bin/datavo only" "usr/bin/datavo" "$(files "$cli_deb")"
expected_headers=$(cd "$DATAVO_SOURCE_DIR/include" && find datavo -type f | sed 's|^|usr/include/|' | sort)
expect_eq "libdatavo-dev.deb holds exactly the public headers" "$expected_headers" \
  "$(files "$dev_deb" | grep '^usr/include/')"
lib='usr/lib(/[a-z0-9_]+-linux-gnu[a-z0-9_]*)?'
expect_eq "libdatavo-dev.deb holds nothing but headers, libdatavo.a, the CMake package and datavo.pc" "" \
  "$(files "$dev_deb" | grep -vE "^(usr/include/datavo/[^/]+\.hpp|$lib/libdatavo\.a|$lib/cmake/Datavo/[^/]+\.cmake|$lib/pkgconfig/datavo\.pc)$")"

dev_root="$E2E_TMP/dev-root"
dpkg-deb -x "$dev_deb" "$dev_root"
packaged_lib=$(find "$dev_root" -name libdatavo.a)
expect_eq "libdatavo-dev.deb: libdatavo.a is stripped of debug sections" 0 \
  "$(objdump -h "$packaged_lib" | grep -c '\.debug_info')"

# owner SONAME PATH: the installed package (without :arch) that holds PATH, the resolved location of SONAME. dpkg
# records /lib or /usr/lib, whichever the package ships (merged /usr makes both reach the same file).
owner() {
  local p
  for p in "$2" "/usr$2" "${2#/usr}" "$(readlink -f "$2")"; do
    dpkg-query -S "$p" 2>/dev/null | head -1 | cut -d: -f1 && return 0
  done
  return 1
}
cli_root="$E2E_TMP/cli-root"
dpkg-deb -x "$cli_deb" "$cli_root"
depends=$(dpkg-deb -f "$cli_deb" Depends)
depends_names=" $(sed 's/(.*)//; s/:.*//; s/ //g' <<<"${depends//[,|]/$'\n'}" | grep . | tr '\n' ' ')"
needed=$(objdump -p "$cli_root/usr/bin/datavo" | awk '$1 == "NEEDED" {print $2}')
expect_match "datavo needs libcurl (an objdump sanity check)" 'libcurl' "$needed"
while read -r soname path; do
  pkg=$(owner "$soname" "$path") || pkg="(no package holds $path)"
  if [[ "$depends_names" == *" $pkg "* ]]; then
    pass "datavo.deb: Depends names $pkg, which provides $soname"
  else
    fail "datavo.deb: Depends names the package of $soname" "$pkg is not in: $depends"
  fi
done < <(ldd "$cli_root/usr/bin/datavo" | awk -v needed=" $(tr '\n' ' ' <<<"$needed")" \
  '$2 == "=>" && index(needed, " " $1 " ") {print $1, $3}')

# --- install, use, remove -----------------------------------------------------------------------------------------
remove_packages() { dpkg_as_root -r "${packages[@]}" >/dev/null; }
on_exit remove_packages
run_logged "dpkg -i installs both packages" "$E2E_TMP/dpkg-install.log" dpkg_as_root -i "$cli_deb" "$dev_deb" || finish
for p in "${packages[@]}"; do expect_eq "$p is installed" installed "$(status "$p")"; done
expect_eq "/usr/bin/datavo --version" "datavo $version" "$(/usr/bin/datavo --version 2>&1 | head -1)"

unset PKG_CONFIG_PATH
expect_eq "pkg-config finds datavo under /usr" "$version" "$(pkg-config --modversion datavo 2>&1)"
consumer="$E2E_TMP/consumer"
# shellcheck disable=SC2046  # pkg-config's flags are a command line
if run_logged "a consumer builds against /usr through pkg-config" "$E2E_TMP/consumer-build.log" \
  "$cxx" -std=c++20 -o "$consumer" "$DATAVO_SOURCE_DIR/tests/install/consumer/main.cpp" \
  $(pkg-config --cflags datavo) $(pkg-config --static --libs datavo); then
  out=$(timeout 60 "$consumer" 2>&1)
  expect_match "the consumer fetches once, then hits" $'second hit tier=local.*\nfetches 1$' "$out"
fi

run_logged "dpkg -r removes both packages" "$E2E_TMP/dpkg-remove.log" dpkg_as_root -r "${packages[@]}"
for p in "${packages[@]}"; do expect_eq "$p is gone" not-installed "$(status "$p")"; done
expect_eq "/usr/bin/datavo and /usr/include/datavo are gone" "" \
  "$(ls -d /usr/bin/datavo /usr/include/datavo 2>/dev/null)"

finish
