#!/usr/bin/env bash
# Installs every Debian package Datavo needs to build, test and benchmark, skipping those already present.
# Runs apt-get as root (directly, or through sudo when not root). Idempotent.
set -euo pipefail

packages=(
  build-essential cmake g++ pkg-config git
  libyaml-cpp-dev libcurl4-openssl-dev libssl-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libexpat1-dev
  zlib1g-dev libzstd-dev zstd         # `datavo pack` reads .tar.gz and .tar.zst shards; zstd: GNU tar --zstd in tests
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev            # libFuzzer target of the tar reader
  python3-dev pybind11-dev python3-pytest python3-setuptools python3-pip python3-wheel  # the Python SDK (python/)
  python3-torch                       # the SDK's PyTorch tests (DataLoader workers, ranks); large
  mypy                                # the SDK's typing test (python/tests/test_typing.py): mypy --strict on a user script
  python3-tqdm                        # the SDK's progress bars (warm(progress=...)), tested in python/tests/test_ops.py
  python3-numpy                       # the SDK's batch arrays (stream.batches(n)), tested in python/tests/test_batches.py
  python3 python3-fsspec curl gdb tar libarchive-tools xz-utils util-linux procps iproute2 hyperfine
  faketime                            # libfaketime, for the clock-skew suite (tests/e2e/test_clock_skew.sh)
  strace                              # test_cloud_spec_yaml.sh: cache info opens no socket
  universal-ctags                     # scripts/function_lengths.py: where each function starts and ends
  dpkg-dev                            # dpkg-shlibdeps: the .deb's Depends (cmake/Package.cmake, tests/install/)
  debootstrap                         # scripts/deb-fresh-machine.sh: the .deb on a fresh Debian 12
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
