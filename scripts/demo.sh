#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: install what is missing, build, run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
. scripts/env.sh
cmake --preset default
cmake --build --preset default --target zipccl_demo zipccl_tool
build/bin/zipccl_demo
