#!/usr/bin/env bash
# One command: install what is missing, then run the whole test suite:
#   1. default preset: build everything (device code too when nvcc is present), run all tests
#      (gpu-labelled tests report a skip without a GPU);
#   2. sanitize preset: the host tests under AddressSanitizer and UndefinedBehaviorSanitizer;
#   3. fuzz preset: the libFuzzer decoder target, a short smoke run (ZIPCCL_FUZZ_SECONDS, 60 s).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
. scripts/env.sh
cmake --workflow --preset default
cmake --workflow --preset sanitize
cmake --preset fuzz -DZIPCCL_FUZZ_SECONDS="${ZIPCCL_FUZZ_SECONDS:-60}" >/dev/null
cmake --workflow --preset fuzz
echo "zipccl: all test suites passed"
