#!/usr/bin/env bash
# The GPU check: one call on a lent machine with one NVIDIA GPU (an H100 or an H200; a task is lent
# 15 minutes of device time in all, the machine's start and the transfers included). The steps run
# from what matters most to what matters least, each cut at what the budget leaves:
#
#   core: issue 13's device figures, and the rANS decoder by warps, which has never run on a GPU
#     1. the device binaries: prebuilt by --prepare on the development machine (.gpu-prebuilt,
#        used where its stamp matches this tree's sources and the GPU's architecture and the
#        binaries load here), else built here, the codec's test and benchmark first; then the
#        bf16 rows of every policy (3-bit and entropy, compress and decompress, 4 and 256 MiB)
#        beside the device-to-device copy (bench_first.json), before any test;
#     2. test_cuda_codec with the decoder by warps off (ZIPCCL_TEST_RANS_WARPS=0: those cases
#        decode by blocks instead), so that a fault in that kernel, which ends the process's CUDA
#        context, cannot hide the other results;
#     3. the rANS benchmarks by blocks (bench_entropy.json), beside a device-to-device copy;
#     4. test_cuda_codec's rANS, by-warps and tuning cases with the decoder by warps on;
#     5. the decoder by warps' benchmarks (bench_warps.json);
#     6. compute-sanitizer memcheck and racecheck on the small [sanitize] cases (a decoder by blocks
#        that stops early; the decoder by warps with warps that take a second chunk);
#     7. one launch each of the rANS decoders and encoder under Nsight Compute;
#   the rest, while the budget lasts
#     8. the other codec tests (chunk codec, block codec, context) and the 3-bit policies'
#        benchmarks (bench_other.json);
#     9. built here: the subspace codec's tests, the NCCL test, transport::cuda_local's and the
#        device collectives' tests, one binary at a time; their [hostile] cases again under
#        CUDA_MODULE_LOADING=LAZY, CUDA_DEVICE_MAX_CONNECTIONS=1, CUDA_LAUNCH_BLOCKING=1 and
#        compute-sanitizer (memcheck, racecheck, synccheck), where a transport whose kernels wait
#        for each other would stall; the examples, and the collectives' and the subspace codec's
#        benchmarks; last, the collectives' [large] case for one codec (64 MiB per rank;
#        GPU_CHECK_LARGE=all: every codec, as the budget allows);
#    10. the host AVX-512 tests where this CPU has AVX-512.
#
# GPU_CHECK_BUDGET: seconds for the whole script (default 360). Every step is cut at what the budget
# leaves and skipped where less than its useful minimum is left, so nothing runs past it; give the
# call a timeout_s of the budget + 60. Each result is printed as it comes. $OUT (or build-gpu/out)
# gets at most 8 files, rewritten after every step so that a call cut short keeps what was done:
# summary.txt, all-logs.tgz (every log) and the benchmarks' JSON files.
#
# The lent machine cannot install packages, and building there costs device time. Before the call,
# on the development machine (with the CUDA toolkit), run
#   scripts/gpu-check.sh --prepare
# which copies Catch2, Google Benchmark and OpenBLAS (the host reference of the device subspace
# tests) into .gpu-deps/ and builds the codec's device tests and benchmark for sm_90 (the H100's
# and the H200's architecture; GPU_CHECK_ARCH=NN for another) into .gpu-prebuilt/ (both
# git-ignored; 5 minutes on 2 cores); carry both folders (59 MiB with the tree in 2026-12, of the 64
# MiB a call may carry: OpenBLAS is 35 of it). Then on the GPU
# machine: GPU_CHECK_BUDGET=360 bash scripts/gpu-check.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

# what --prepare builds, and the codec's test and benchmark that steps 2-8 run
prebuilt_targets=(test_cuda_codec bench_cuda_codec test_cuda_chunk_codec test_cuda_block_codec test_cuda_context)
# A digest of the sources the device binaries are built from (the same on both machines: the
# tree travels without its ignored files, and this counts only source and build files).
source_stamp() {
  find include tests benchmarks examples cmake CMakeLists.txt -type f \
    \( -name '*.hpp' -o -name '*.cuh' -o -name '*.cu' -o -name '*.cpp' -o -name '*.h' -o -name '*.txt' \
    -o -name '*.cmake' -o -name '*.in' \) -print0 2>/dev/null | LC_ALL=C sort -z | xargs -0 sha256sum |
    sha256sum | cut -c1-16
}

if [ "${1:-}" = "--prepare" ]; then
  rm -rf .gpu-deps && mkdir -p .gpu-deps/include .gpu-deps/lib/cmake .gpu-deps/lib/x86_64-linux-gnu/cmake
  cp -r /usr/include/catch2 /usr/include/benchmark .gpu-deps/include/
  cp -r /usr/lib/cmake/Catch2 .gpu-deps/lib/cmake/
  cp -r /usr/lib/x86_64-linux-gnu/cmake/benchmark .gpu-deps/lib/x86_64-linux-gnu/cmake/
  cp -a /usr/lib/libCatch2WithMain.a .gpu-deps/lib/
  cp -a /usr/lib/x86_64-linux-gnu/libbenchmark.so* /usr/lib/x86_64-linux-gnu/libbenchmark_main.a \
    .gpu-deps/lib/x86_64-linux-gnu/
  # OpenBLAS with the Fortran runtime it needs (the files behind Debian's alternatives links)
  cp -L /usr/include/x86_64-linux-gnu/cblas.h /usr/include/x86_64-linux-gnu/openblas_config.h .gpu-deps/include/
  cp -L /usr/lib/x86_64-linux-gnu/libopenblas.so.0 /usr/lib/x86_64-linux-gnu/libgfortran.so.5 \
    /usr/lib/x86_64-linux-gnu/libquadmath.so.0 .gpu-deps/lib/x86_64-linux-gnu/
  ln -s libopenblas.so.0 .gpu-deps/lib/x86_64-linux-gnu/libopenblas.so
  # the codec's device binaries for the lent GPU's architecture (host code for any x86-64), with
  # the shared libraries they need beside them
  rm -rf .gpu-prebuilt
  parch=${GPU_CHECK_ARCH:-90}
  export PATH="$PATH:/usr/local/cuda/bin"
  stamp=$(source_stamp)  # (before the build: an edit made during it must not match these binaries)
  mkdir -p build-gpu-prebuilt
  plog=build-gpu-prebuilt/prepare.log
  if ! command -v nvcc >/dev/null; then
    echo "gpu-check --prepare: no nvcc: nothing prebuilt (the GPU machine will build)"
  elif cmake -S . -B build-gpu-prebuilt -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$parch" \
         -DZIPCCL_NATIVE=OFF -DZIPCCL_BUILD_EXAMPLES=OFF >"$plog" 2>&1 &&
       cmake --build build-gpu-prebuilt -j "$(nproc)" --target "${prebuilt_targets[@]}" >>"$plog" 2>&1; then
    mkdir -p .gpu-prebuilt/bin .gpu-prebuilt/lib
    for t in "${prebuilt_targets[@]}"; do
      cp build-gpu-prebuilt/bin/"$t" .gpu-prebuilt/bin/ && strip .gpu-prebuilt/bin/"$t"
    done
    # (libcudart and libbenchmark: the files the binaries name, copied under those names)
    ldd .gpu-prebuilt/bin/* | awk '/libcudart|libbenchmark/ {print $1, $3}' | sort -u |
      while read -r name path; do cp -L "$path" ".gpu-prebuilt/lib/$name"; done
    echo "$stamp $parch" >.gpu-prebuilt/stamp
    echo "gpu-check --prepare: prebuilt for sm_$parch: ${prebuilt_targets[*]}"
  else
    tail -20 "$plog"
    echo "gpu-check --prepare: the prebuilt binaries failed to build ($plog); the GPU machine will build"
  fi
  du -sh .gpu-deps .gpu-prebuilt 2>/dev/null
  echo "carry: .gpu-deps .gpu-prebuilt"
  exit 0
fi

out=${OUT:-build-gpu/out}
mkdir -p "$out" build-gpu/logs
out=$(cd "$out" && pwd)  # (absolute: some steps run inside build-gpu)
logs=$(cd build-gpu/logs && pwd)
rm -f "$logs"/*
# (CUDA's own defaults otherwise: lazy module loading, 8 hardware queues; step 9 also runs the
# transport's and the collectives' [hostile] cases under the settings that serialise streams)
start=$(date +%s)
budget=${GPU_CHECK_BUDGET:-360}
case $budget in '' | *[!0-9]*) echo "gpu-check: GPU_CHECK_BUDGET must be a number of seconds"; exit 1 ;; esac
budget=$((10#$budget))  # (a leading zero is not octal)
elapsed() { echo $(( $(date +%s) - start ))s; }
left() { echo $(( budget - ($(date +%s) - start) )); }
# a step's time limit: its own cap, or what the budget leaves if less (at least 1 s: `timeout 0`
# would mean no limit)
cap() { local l; l=$(left); [ "$l" -ge 1 ] || l=1; echo $(( l < $1 ? l : $1 )); }
# whether at least N seconds of the budget are left
have() { [ "$(left)" -ge "$1" ]; }
summary=()
# Saves what this run has so far to $OUT: the summary and every log (rewritten each time, so that
# a call cut short still brings back everything up to its last step).
save() {
  printf '%s\n' "GPU: ${gpu:-?}   $(elapsed) of ${budget}s" >"$out/summary.txt"
  printf '%-40s %-6s %s\n' "check" "result" "detail" >>"$out/summary.txt"
  local row a b c
  for row in "${summary[@]}"; do IFS='|' read -r a b c <<<"$row"; printf '%-40s %-6s %s\n' "$a" "$b" "$c"; done >>"$out/summary.txt"
  (cd "$logs" && tar czf "$out/all-logs.tgz.part" -- * 2>/dev/null) && mv -f "$out/all-logs.tgz.part" "$out/all-logs.tgz"
}
note() { summary+=("$1"); echo "gpu-check [$(elapsed)] $1"; save; }
# the outcome of a step run under `timeout`: pass, cut (at its limit) or FAIL
outcome() {
  case $1 in 0) echo pass ;; 124 | 137) echo cut ;; *) echo FAIL ;; esac
}
catch_tail() {  # the line Catch2 ends with, or the last failure
  grep -E 'All tests passed|test cases' "$1" | tail -1 | cut -c1-140
}

gpu=$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null | head -1)
arch=$(echo "$gpu" | awk -F', ' '{print $2}' | tr -d .)
[ -n "$arch" ] || { echo "gpu-check: no NVIDIA GPU found"; exit 1; }
echo "gpu-check: $gpu; budget ${budget}s"

prefix=()
if [ -d .gpu-deps ]; then
  prefix=(-DCMAKE_PREFIX_PATH="$PWD/.gpu-deps")
  export LD_LIBRARY_PATH="$PWD/.gpu-deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# the library path of the binaries run from $bin: the prebuilt ones' own libcudart and
# libbenchmark first (only for them: what is built here takes this machine's)
bin_libs=${LD_LIBRARY_PATH:-}
configured=0
configure() {  # build-gpu, once (a failure too); 0 where it is configured
  [ $configured = 1 ] && return 0
  [ $configured = 2 ] && return 1
  if timeout "$(cap 120)" cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
      -DZIPCCL_BUILD_EXAMPLES=ON -DZIPCCL_NATIVE=OFF "${prefix[@]}" >>"$logs/configure.log" 2>&1; then
    configured=1
    return 0
  fi
  configured=2
  note "configure|FAIL|see configure.log"
  return 1
}
# builds targets in build-gpu, going on past failures (-k 0); 0 where all of them were built
build() {
  configure || return 1
  timeout "$(cap 600)" cmake --build build-gpu -j "$(nproc)" --target "$@" -- -k 0 >>"$logs/build.log" 2>&1
}

# 1. the binaries
bin=""
if [ -f .gpu-prebuilt/stamp ]; then
  read -r want_stamp want_arch <.gpu-prebuilt/stamp
  have_stamp=$(source_stamp)
  if [ "$want_arch" != "$arch" ]; then
    note "prebuilt binaries|skip|built for sm_$want_arch, this GPU is sm_$arch"
  elif [ "$want_stamp" != "$have_stamp" ]; then
    note "prebuilt binaries|skip|built from other sources ($want_stamp, here $have_stamp)"
  # (Catch2 exits with the number of tests it lists: a spec that matches none makes 0 mean "it loads")
  elif ! timeout 60 env LD_LIBRARY_PATH="$PWD/.gpu-prebuilt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        .gpu-prebuilt/bin/test_cuda_codec --list-test-names-only "[gpu-check-probe]" >"$logs/prebuilt-probe.log" 2>&1; then
    note "prebuilt binaries|skip|do not load here: $(tail -1 "$logs/prebuilt-probe.log" | cut -c1-120)"
  else
    bin=$PWD/.gpu-prebuilt/bin
    bin_libs="$PWD/.gpu-prebuilt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    note "prebuilt binaries|ok|sm_$arch, sources $have_stamp"
  fi
fi
if [ -z "$bin" ]; then
  bin=$PWD/build-gpu/bin
  if ! build test_cuda_codec bench_cuda_codec; then
    # (which one failed: a binary an earlier call left on this machine must not stand in for it)
    for t in test_cuda_codec bench_cuda_codec; do build "$t" || rm -f "$bin/$t"; done
  fi
  note "build test_cuda_codec bench_cuda_codec|$([ -x "$bin/test_cuda_codec" ] && echo ok || echo FAIL)|sm_$arch, $(elapsed)"
  [ -x "$bin/test_cuda_codec" ] || grep -hE "error|Error" "$logs/configure.log" "$logs/build.log" 2>/dev/null | head -20
fi
tcc=$bin/test_cuda_codec
bcc=$bin/bench_cuda_codec

# 2-8: test_cuda_codec and bench_cuda_codec in turns; Catch2 prints each case's time (--durations)
run_bin() {  # run_bin NAME CAP CMD...: a test binary or example, killed with what it started at its cap
  local name=$1 c=$2
  shift 2
  if ! have 30; then note "$name|skip|out of time"; return 1; fi
  timeout -k 5 "$(cap "$c")" "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  pkill -KILL -f "^[^ ]*build-gpu/bin/" 2>/dev/null
  note "$name|$(outcome $rc)|$(catch_tail "$logs/$name.log")"
  [ $rc = 0 ] || grep -E "FAILED|failed|with expansion|watchdog|pending|side by side" "$logs/$name.log" | cut -c1-300 | head -10
  return $rc
}
codec_tests() {  # codec_tests NAME WARPS CAP [TEST SPEC]: test_cuda_codec with the decoder by warps on or off
  local name=$1 warps=$2 c=$3
  shift 3
  if [ ! -x "$tcc" ]; then note "$name|skip|not built"; return; fi
  ZIPCCL_TEST_RANS_WARPS=$warps run_bin "$name" "$c" env LD_LIBRARY_PATH="$bin_libs" "$tcc" --durations yes "$@"
}
bench() {  # bench NAME CAP FILTER: bench_cuda_codec's rows matching FILTER into $OUT/NAME.json
  local name=$1 c=$2 filter=$3
  if [ ! -x "$bcc" ]; then note "$name|skip|not built"; return; fi
  if ! have 30; then note "$name|skip|out of time"; return; fi
  timeout -k 5 "$(cap "$c")" env LD_LIBRARY_PATH="$bin_libs" "$bcc" --benchmark_filter="$filter" --benchmark_out="$out/$name.json" \
    --benchmark_out_format=json >"$logs/$name.log" 2>&1
  local rc=$?
  note "$name|$(outcome $rc)|$name.json"
  [ $rc = 0 ] || tail -5 "$logs/$name.log"
}

# first of all, before any test: the figures no run has had yet, every bf16 policy's compress and
# decompress at 4 and 256 MiB beside the copy of the same bytes (a fault here costs only this step)
bench bench_first 150 '^(copy/(4|256)/|bf16/(analytic|histogram|fixed|entropy)/(compress|decompress)/(4|256)/)'
codec_tests codec-tests-blocks 0 170
bench bench_entropy 120 '^(copy/(4|256)/|(bf16|fp16|fp32)/entropy/(compress|decompress)(_threads(64|128))?/)'
codec_tests codec-tests-warps 1 120 '[rans],[rans-warps],[tuning]'
bench bench_warps 90 '^copy/(4|256)/|entropy/decompress_warps'

# 6. compute-sanitizer on the small cases (the [sanitize] tag: nothing uninitialised in a decoder
# by blocks that stops early; the decoder by warps with warps that decode a second chunk in the
# same shared memory, and damaged chunks): memcheck and racecheck first, then initcheck (global
# memory: no tool checks shared memory read before it is written) and synccheck (the warps'
# shuffles and ballots) where time is left. Kernels load lazily here, so that only those the
# cases run are instrumented.
for tool in memcheck racecheck initcheck synccheck; do
  if [ ! -x "$tcc" ]; then break; fi
  if ! have 40; then note "sanitizer $tool|skip|out of time"; continue; fi
  CUDA_MODULE_LOADING=LAZY timeout -k 5 "$(cap 100)" env LD_LIBRARY_PATH="$bin_libs" compute-sanitizer --tool "$tool" \
    --error-exitcode 3 "$tcc" "[sanitize]" >"$logs/sanitizer-$tool.log" 2>&1
  rc=$?
  res=$(outcome $rc)
  grep -q "No test cases matched" "$logs/sanitizer-$tool.log" && res=FAIL
  note "sanitizer $tool|$res|$(grep -Eo '(ERROR|RACECHECK) SUMMARY: .*' "$logs/sanitizer-$tool.log" | tail -2 | tr '\n' ' ')"
done

# 7. what bounds the device rANS kernels (74 GB/s of bf16 decode by blocks on an H200 on
# 2026-12-04, against a 500 GB/s goal): one launch of each under Nsight Compute (clocks left as
# they are), from bench_cuda_codec's bf16/entropy/ROW/256 row
profile() {  # profile ROW KERNEL
  local row=$1 kernel=$2
  if [ ! -x "$bcc" ]; then return; fi
  if ! command -v ncu >/dev/null; then note "ncu bf16 entropy $row|skip|ncu not found"; return; fi
  if ! have 45; then note "ncu bf16 entropy $row|skip|out of time"; return; fi
  timeout -k 5 "$(cap 75)" env LD_LIBRARY_PATH="$bin_libs" ncu --clock-control none --kernel-name "regex:$kernel" \
    --launch-skip 1 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    "$bcc" --benchmark_filter="^bf16/entropy/$row/256" >"$logs/ncu-$row.txt" 2>&1
  local rc=$?
  if [ $rc = 0 ] && ! grep -qE '==ERROR==|No kernels were profiled' "$logs/ncu-$row.txt"; then
    note "ncu bf16 entropy $row|ran|$(grep -E 'Achieved Occupancy|Duration' "$logs/ncu-$row.txt" | tr -s ' ' | head -2 | tr '\n' ';')"
  else
    note "ncu bf16 entropy $row|$(outcome $rc | sed 's/pass/FAIL/')|$(grep -m1 -E '==ERROR==|No kernels' "$logs/ncu-$row.txt" | cut -c1-160)"
  fi
}
profile decompress_warps4 rans_warps_kernel
profile decompress decode_kernel
profile compress encode_kernel

# 8. the other codec tests and the 3-bit policies' benchmarks
for t in test_cuda_chunk_codec test_cuda_block_codec test_cuda_context; do
  exe=$bin/$t
  if [ "$bin" != "$PWD/.gpu-prebuilt/bin" ]; then  # (built here, now: a binary of an earlier call may be stale)
    if ! have 120; then note "$t|skip|out of time"; continue; fi
    build "$t" || { note "$t|FAIL|did not build (build.log)"; continue; }
  fi
  if [ ! -x "$exe" ]; then note "$t|skip|not built"; continue; fi
  run_bin "$t" 120 env LD_LIBRARY_PATH="$bin_libs" "$exe" --durations yes
done
bench bench_other 120 '^(copy/|bf16/(analytic|histogram|fixed)/|fp16/(analytic|histogram)/|fp32/(analytic|histogram)/|bucket)'

# 9. built here: the subspace codec's, NCCL's, cuda_local's and the collectives' tests, the
# examples and benchmarks (each target on its own, so that one that fails to build costs no other)
b9=$PWD/build-gpu/bin
built=" "  # (the targets this call built: a binary left by an earlier call on this machine is not run)
for t in test_cuda_subspace test_nccl test_cuda_local test_cuda_collectives test_cuda_collective_codecs \
    test_cuda_collective_entropy zipccl_custom_device_transport zipccl_nccl_all_reduce zipccl_cuda_fused_sum \
    bench_cuda_collectives bench_cuda_subspace; do
  have 150 || break
  if build "$t"; then built+="$t "; else echo "gpu-check: $t did not build (build.log)"; fi
done
have 150 || note "build of collectives, subspace, examples|cut|out of time"
ok9() { [[ $built == *" $1 "* ]] && [ -x "$b9/$1" ]; }  # built by this call
if ok9 test_cuda_subspace && run_bin test_cuda_subspace 90 "$b9/test_cuda_subspace" && have 40; then
  # its small error case: bad token ids must not reach outside the buffers
  timeout -k 5 "$(cap 60)" compute-sanitizer --tool memcheck --error-exitcode 3 "$b9/test_cuda_subspace" "[sanitize]" \
    >"$logs/sanitizer-subspace.log" 2>&1
  note "sanitizer memcheck (subspace)|$(outcome $?)|$(grep -Eo 'ERROR SUMMARY: [0-9]+ errors' "$logs/sanitizer-subspace.log" | tail -1)"
fi
ok9 test_nccl && run_bin test_nccl 60 "$b9/test_nccl"
# (a stalled case reports itself: ranks_on_gpu::finish after 30 s, testing::watchdog after 30-60 s)
local_passed=0
if ok9 test_cuda_local && run_bin test_cuda_local 120 "$b9/test_cuda_local"; then local_passed=1; fi
for t in test_cuda_collectives test_cuda_collective_codecs test_cuda_collective_entropy; do
  ok9 "$t" && run_bin "$t" 150 "$b9/$t" "~[large]"
done
# the [hostile] cases under each setting that serialises streams or kernels: host submission
# order must be a valid order of all device work (docs/design.md, "The device transport")
for t in test_cuda_local test_cuda_collectives; do
  ok9 "$t" || continue
  CUDA_MODULE_LOADING=LAZY run_bin "$t-lazy" 60 "$b9/$t" "[hostile]"
  CUDA_DEVICE_MAX_CONNECTIONS=1 run_bin "$t-1-queue" 60 "$b9/$t" "[hostile]"
  CUDA_LAUNCH_BLOCKING=1 run_bin "$t-launch-blocking" 60 "$b9/$t" "[hostile]"
  for tool in memcheck racecheck synccheck; do
    have 40 || { note "sanitizer $tool ($t)|skip|out of time"; continue; }
    timeout -k 5 "$(cap 90)" compute-sanitizer --tool "$tool" --error-exitcode 3 "$b9/$t" "[hostile]" \
      >"$logs/sanitizer-$tool-$t.log" 2>&1
    note "sanitizer $tool ($t)|$(outcome $?)|$(grep -Eo '(ERROR|RACECHECK|SYNCCHECK) SUMMARY: .*' "$logs/sanitizer-$tool-$t.log" | tail -1)"
  done
done
[ $local_passed = 1 ] && ok9 zipccl_custom_device_transport &&
  run_bin example-custom-device-transport 60 "$b9/zipccl_custom_device_transport"
ok9 zipccl_nccl_all_reduce && run_bin example-nccl-all-reduce 60 "$b9/zipccl_nccl_all_reduce"
ok9 zipccl_cuda_fused_sum && run_bin example-fused-sum 60 "$b9/zipccl_cuda_fused_sum"
if ok9 bench_cuda_collectives && have 60; then
  timeout -k 5 "$(cap 150)" "$b9/bench_cuda_collectives" --benchmark_counters_tabular=true \
    --speeds-out="$logs/device-speeds.txt" --benchmark_out="$out/bench_collectives.json" \
    --benchmark_out_format=json >"$logs/bench_collectives.log" 2>&1
  note "bench_collectives|$(outcome $?)|bench_collectives.json"
fi
if ok9 bench_cuda_subspace && have 60; then
  timeout -k 5 "$(cap 100)" "$b9/bench_cuda_subspace" --benchmark_counters_tabular=true \
    --benchmark_out="$out/bench_subspace.json" --benchmark_out_format=json >"$logs/bench_subspace.log" 2>&1
  note "bench_subspace|$(outcome $?)|bench_subspace.json"
fi
# 64 MiB per rank: after the benchmarks, as the cases least likely to find what the small ones
# did not. By default one codec (bf16, analytic Gaussian: every collective, ranks 1-8; its time
# is not measured yet: the log's --durations says it); GPU_CHECK_LARGE=all runs all twelve codecs
# instead, each binary cut at what the budget leaves (the steps before still run first, so only
# a task with device time to spare gets through them). (Catch2's spec: `\,` is a comma of the
# name, not a separator.)
large_one="64 MiB per rank: every collective equals the host's\\, on one stream and pipelined - device_codecs - 0"
if [ "${GPU_CHECK_LARGE:-one}" = all ]; then
  for t in test_cuda_collectives test_cuda_collective_codecs test_cuda_collective_entropy; do
    ok9 "$t" && have 90 && run_bin "$t-large" 300 "$b9/$t" "[large]" --durations yes
  done
elif ok9 test_cuda_collectives && have 45; then
  run_bin test_cuda_collectives-large-bf16 120 "$b9/test_cuda_collectives" "$large_one" --warn NoTests --durations yes
fi

# 10. the host AVX-512 paths against the reference, where this CPU has them
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
if ! grep -q avx512_vbmi2 /proc/cpuinfo; then
  note "host AVX-512 tests|skip|$cpu has no AVX-512 VBMI2"
elif ! have 120; then
  note "host AVX-512 tests|skip|out of time"
elif build test_host_simd_avx512 && have 30; then
  timeout "$(cap 200)" "$b9/test_host_simd_avx512" >"$logs/host-avx512.log" 2>&1
  rc=$?
  note "host AVX-512 tests|$(outcome $rc)|$cpu: $(catch_tail "$logs/host-avx512.log")"
else
  note "host AVX-512 tests|FAIL|not built or out of time (build.log)"
fi

echo
cat "$out/summary.txt"
for f in "$out"/bench_*.json; do
  [ -f "$f" ] || continue
  python3 - "$f" <<'PY'
import json, sys
try:
    rows = json.load(open(sys.argv[1]))["benchmarks"]
except (ValueError, KeyError) as e:  # (a benchmark cut at its limit leaves the JSON unfinished)
    print("\n%s unreadable (%s)" % (sys.argv[1], e))
    sys.exit(0)
print("\n%-40s %8s %8s %8s" % (sys.argv[1].split("/")[-1] + " (MiB)", "TB/s", "of copy", "ratio"))
for r in rows:
    if r.get("error_occurred"):
        print("%-40s %s" % (r["name"], r.get("error_message", "error"))); continue
    tb = r.get("TBps", r.get("read_plus_write_TBps", 0))
    print("%-40s %8.3f %8s %8s" % (r["name"].replace("/manual_time", "").replace("/iterations:3", ""), tb,
          "%.2f" % r["of_copy"] if "of_copy" in r else "", "%.3f" % r["ratio"] if "ratio" in r else ""))
PY
done
save
echo "logs: $out/all-logs.tgz"
