#!/usr/bin/env bash
# Installs the Debian 12 packages zipccl's build, tests, benchmarks and tools need, when missing.
# The CUDA toolkit is expected at /usr/local/cuda (optional: without it, host code only).
set -euo pipefail
packages=(cmake ninja-build g++ make pkg-config catch2 libbenchmark-dev libzstd-dev clang
          libclang-rt-dev ccache python3 libopenmpi-dev openmpi-bin libopenblas-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
