#!/usr/bin/env bash
# Tests of the zipccl command-line tool: cli_test.sh CASE ZIPCCL WORKDIR PYTHON
set -u
case_name=$1 zipccl=$2 work=$3 py=$4
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail=0
check() { if ! eval "$1"; then echo "FAILED: $1"; fail=1; fi; }

# Seeded near-Gaussian test files: raw bf16/fp16/fp32, and .npy fp16/fp32
"$py" - <<'PY'
import random, struct
random.seed(5)
vals = [random.gauss(0, 0.05) for _ in range(70000)]
f32 = struct.pack('<%df' % len(vals), *vals)
open('x.fp32', 'wb').write(f32)
open('x.bf16', 'wb').write(b''.join(f32[i+2:i+4] for i in range(0, len(f32), 4)))
f16 = struct.pack('<%de' % len(vals), *vals)
open('x.fp16', 'wb').write(f16)
def npy(name, descr, data, n):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (descr, n)
    h += ' ' * ((64 - (10 + len(h) + 1) % 64) % 64) + '\n'
    open(name, 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode() + data)
npy('x16.npy', '<f2', f16, len(vals))
npy('x32.npy', '<f4', f32, len(vals))
npy('bad_shape.npy', '<f4', f32[:-4], len(vals))
npy('int.npy', '<i4', f32, len(vals))
open('odd.bf16', 'wb').write(b'\x01\x02\x03')
# a row-sparse bf16 gradient: 1000 rows of 128, four in five all zero
rows = []
for r in range(1000):
    if random.random() < 0.8:
        rows.append(b'\x00' * 256)
    else:
        row = struct.pack('<128f', *[random.gauss(0, 1e-3) for _ in range(128)])
        rows.append(b''.join(row[i+2:i+4] for i in range(0, len(row), 4)))
open('sparse.bf16', 'wb').write(b''.join(rows))
PY

one_line_error() {  # command must fail (exit 1 or 2) with exactly one line on stderr
  "$@" >out.txt 2>err.txt
  local rc=$?
  if [ $rc -ne 1 ] && [ $rc -ne 2 ]; then echo "FAILED: '$*' exit code $rc"; fail=1; return; fi
  if [ "$(wc -l <err.txt)" -ne 1 ]; then echo "FAILED: '$*' stderr:"; cat err.txt; fail=1; fi
  grep -q '^zipccl: error: ' err.txt || { echo "FAILED: '$*' error line: $(cat err.txt)"; fail=1; }
}

case $case_name in
roundtrip)
  for t in bf16 fp16 fp32; do
    for cb in analytic histogram fixed entropy; do
      for ck in "" --checksum; do
        check "'$zipccl' compress --dtype $t --codebook $cb $ck --chunk 4096 --threads 2 x.$t x.$t.zpc >/dev/null"
        check "'$zipccl' decompress x.$t.zpc back.$t >/dev/null"
        check "cmp -s x.$t back.$t"
      done
    done
  done
  # zero groups: the default leaves the zero rows out; --no-zero-groups keeps them in the body
  check "'$zipccl' compress --dtype bf16 sparse.bf16 s.zpc >/dev/null"
  check "'$zipccl' compress --dtype bf16 --no-zero-groups sparse.bf16 s_dense.zpc >/dev/null"
  check "'$zipccl' decompress s.zpc s.back >/dev/null && cmp -s sparse.bf16 s.back"
  check "'$zipccl' decompress s_dense.zpc s_dense.back >/dev/null && cmp -s sparse.bf16 s_dense.back"
  check "[ \$(stat -c %s s.zpc) -lt \$(( \$(stat -c %s sparse.bf16) / 4 )) ]"
  check "[ \$(stat -c %s s_dense.zpc) -gt \$(( \$(stat -c %s sparse.bf16) / 2 )) ]"
  check "'$zipccl' inspect --dtype bf16 sparse.bf16 | grep -q 'in all-zero 64-element groups: [0-9]* elements ([78][0-9]\\.'"
  one_line_error "$zipccl" decompress --no-zero-groups s.zpc s.back
  check "'$zipccl' compress --dtype bf16 --codebook fixed --window 120 x.bf16 w.zpc >/dev/null"
  check "'$zipccl' decompress --threads 3 w.zpc w.back >/dev/null && cmp -s x.bf16 w.back"
  # --repeat: the same stream and the same elements as one call, the fastest call's time
  check "'$zipccl' compress --dtype fp16 --codebook entropy --repeat 4 --json x.fp16 r.zpc | grep -q '\"seconds\":[0-9]'"
  check "'$zipccl' compress --dtype fp16 --codebook entropy x.fp16 r1.zpc >/dev/null && cmp -s r.zpc r1.zpc"
  check "'$zipccl' decompress --repeat 3 r.zpc r.back >/dev/null && cmp -s x.fp16 r.back"
  ;;
npy)
  check "'$zipccl' compress x16.npy x16.zpc >/dev/null"
  check "'$zipccl' decompress x16.zpc x16.raw >/dev/null && cmp -s x16.raw x.fp16"
  check "'$zipccl' compress --dtype fp32 x32.npy x32.zpc >/dev/null"
  check "'$zipccl' decompress x32.zpc x32.raw >/dev/null && cmp -s x32.raw x.fp32"
  check "'$zipccl' inspect x32.npy | grep -q 'round trip verified'"
  ;;
json)
  "$zipccl" compress --dtype bf16 --codebook histogram --json x.bf16 j.zpc >c.json || fail=1
  "$zipccl" decompress --json j.zpc j.back >d.json || fail=1
  "$zipccl" inspect --dtype bf16 --json x.bf16 >i.json || fail=1
  "$zipccl" plan --op all_gather --ranks 4 --bytes 8000000 --link-gbps 2 --json >p_slow.json || fail=1
  "$zipccl" plan --op reduce_scatter --ranks 4 --bytes 8000000 --link-gbps 400 --json >p_fast.json || fail=1
  "$zipccl" plan --op all_to_all --ranks 8 --bytes 64000000 --link-gbps 1 --json >p_a2a.json || fail=1
  "$zipccl" plan --op all_to_all --ranks 8 --bytes 64000000 --link-gbps 1 --overlap 0 --json >p_a2a0.json || fail=1
  printf '# a speeds file as bench_cuda_collectives --speeds-out writes it\ndevice Some GPU "X"\ndtype bf16\ncompress_gbps 1600\ndecompress_gbps 2400\nwire_ratio 1.38\n' >speeds.txt
  "$zipccl" plan --op all_reduce --ranks 64 --bytes 268435456 --link-gbps 400 \
    --device-speeds speeds.txt --ranks-per-gpu 8 --json >p_dev.json || fail=1
  # which policy pays, each measured on a sample: a slow link (compression pays) and a fast one
  "$zipccl" plan --op all_gather --ranks 8 --bytes 100000000 --link-gbps 0.1 --sample x.bf16 --dtype bf16 --json >p_s1.json || fail=1
  "$zipccl" plan --op all_reduce --ranks 8 --bytes 100000000 --link-gbps 100000 --sample x.bf16 --dtype bf16 --json >p_s2.json || fail=1
  "$zipccl" plan --op send --ranks 2 --bytes 1000000 --link-gbps 1 --sample x.bf16 --dtype bf16 | grep -q '^  pays: ' || fail=1
  "$py" - <<'PY' || fail=1
import json
c = json.load(open('c.json')); d = json.load(open('d.json')); i = json.load(open('i.json'))
assert c['command'] == 'compress' and c['dtype'] == 'bf16' and c['elements'] == 70000, c
assert 1.3 < c['ratio'] < 1.6, c
assert d['elements'] == 70000 and d['output_bytes'] == 140000 and d['codebook'] == 'histogram', d
assert i['round_trip_verified'] is True, i
assert 2.0 < i['exponent_entropy_bits'] < 3.2, i
assert i['ratios']['histogram'] >= i['ratios']['analytic'] - 0.01, i
assert i['ratios']['histogram'] <= i['entropy_bound_ratio'], i
# rANS codes the exponent close to its entropy: above the 3-bit code, at or below the bound
assert i['ratios']['entropy'] > i['ratios']['histogram'], i
assert 0.98 * i['entropy_bound_ratio'] < i['ratios']['entropy'] <= i['entropy_bound_ratio'], i
assert sum(i['exponent_histogram'].values()) == 70000, i
slow = json.load(open('p_slow.json')); fast = json.load(open('p_fast.json'))
assert slow['adaptive_path'] == 'compressed' and slow['compressed_seconds'] < slow['plain_seconds'], slow
assert fast['adaptive_path'] == 'plain' and fast['adaptive_seconds'] == fast['plain_seconds'], fast
a2a = json.load(open('p_a2a.json')); a2a0 = json.load(open('p_a2a0.json'))
assert a2a['op'] == 'all_to_all' and a2a['adaptive_path'] == 'compressed', a2a
assert a2a0['compressed_seconds'] > a2a['compressed_seconds'], (a2a, a2a0)  # no overlap: slower
dev = json.load(open('p_dev.json'))
assert abs(dev['compress_bytes_per_second'] - 200e9) < 1 and abs(dev['decompress_bytes_per_second'] - 300e9) < 1, dev
assert dev['ratio'] == 1.38 and dev['overlap'] == 1 and 'Some GPU' in dev['codec'], dev  # the file's speeds, pipelined
s1 = json.load(open('p_s1.json')); s2 = json.load(open('p_s2.json'))
assert [p['codebook'] for p in s1['policies']] == ['analytic', 'histogram', 'fixed', 'entropy'], s1
assert s1['sample_elements'] == 70000 and s1['dtype'] == 'bf16', s1
assert all(1.3 < p['ratio'] < 1.6 and p['compress_bytes_per_second'] > 0 for p in s1['policies']), s1
# the device collectives' spill budget: escapes only for the 3-bit policies, the rANS bodies for entropy
assert all(0 < p['device_spill_permille'] < 300 for p in s1['policies'][:3]), s1
assert 1000 < s1['policies'][3]['device_spill_permille'] < 2000, s1
assert s1['pays'] == min(s1['policies'], key=lambda p: p['adaptive_seconds'])['codebook'], s1
assert all(p['adaptive_seconds'] < s1['plain_seconds'] for p in s1['policies']), s1
assert s2['pays'] == 'plain' and all(p['adaptive_path'] == 'plain' for p in s2['policies']), s2
PY
  ;;
errors)
  one_line_error "$zipccl"
  one_line_error "$zipccl" frobnicate
  one_line_error "$zipccl" compress x.bf16 out.zpc                   # raw input needs --dtype
  one_line_error "$zipccl" compress --dtype bf17 x.bf16 out.zpc
  one_line_error "$zipccl" compress --dtype bf16 --codebook magic x.bf16 out.zpc
  one_line_error "$zipccl" compress --dtype bf16 --chunk 1000 x.bf16 out.zpc
  one_line_error "$zipccl" compress --dtype bf16 --threads 0 x.bf16 out.zpc
  one_line_error "$zipccl" compress --dtype bf16 --threads many x.bf16 out.zpc
  one_line_error "$zipccl" compress --dtype bf16 --repeat 0 x.bf16 out.zpc
  one_line_error "$zipccl" compress --dtype bf16 --repeat 1001 x.bf16 out.zpc
  one_line_error "$zipccl" decompress --repeat twice x.bf16 out.raw
  one_line_error "$zipccl" compress --dtype bf16 --sample x.bf16 x.bf16 out.zpc
  one_line_error "$zipccl" inspect --dtype bf16 --repeat 2 x.bf16
  one_line_error "$zipccl" plan --op send --ranks 2 --bytes 100 --link-gbps 1 --repeat 2
  one_line_error "$zipccl" compress --dtype bf16 x.bf16                # missing OUT
  one_line_error "$zipccl" compress --dtype bf16 --window 3 x.bf16 out.zpc
  one_line_error "$zipccl" compress --dtype bf16 odd.bf16 out.zpc      # 3 bytes
  one_line_error "$zipccl" compress --dtype bf16 missing.bin out.zpc
  one_line_error "$zipccl" compress --dtype bf16 x.bf16 /nonexistent/dir/out.zpc
  one_line_error "$zipccl" compress --dtype bf16 x16.npy out.zpc      # npy says fp16
  one_line_error "$zipccl" compress bad_shape.npy out.zpc
  one_line_error "$zipccl" compress int.npy out.zpc
  one_line_error "$zipccl" decompress --dtype bf16 x.bf16 out.raw
  one_line_error "$zipccl" decompress x.bf16 out.raw                  # not a stream
  one_line_error "$zipccl" inspect --dtype fp32 odd.bf16
  one_line_error "$zipccl" plan --op all_gather --ranks 4 --bytes 100
  one_line_error "$zipccl" plan --op all_gather --ranks 4 --bytes 100 --link-gbps -3
  one_line_error "$zipccl" plan --op broadcast --ranks 4 --bytes 100 --link-gbps 3
  one_line_error "$zipccl" plan --op all_to_all --ranks 4 --bytes 100 --link-gbps 3 --overlap 1.5
  printf 'device G\ndtype fp16\ncompress_gbps 10\ndecompress_gbps 10\n' >speeds16.txt
  printf 'device G\ndtype bf16\ncompress_gbps fast\ndecompress_gbps 10\n' >speeds_bad.txt
  printf 'device G\ndtype bf16\ncompress_gbps 10\n' >speeds_short.txt
  printf 'device G\ndtype bf16\ncompress_gbps 10\ndecompress_gbps 10\ncolour blue\n' >speeds_key.txt
  one_line_error "$zipccl" plan --op all_gather --ranks 4 --bytes 100 --link-gbps 3 --device-speeds missing.txt
  one_line_error "$zipccl" plan --op all_gather --ranks 4 --bytes 100 --link-gbps 3 --device-speeds speeds16.txt
  one_line_error "$zipccl" plan --op all_gather --ranks 4 --bytes 100 --link-gbps 3 --device-speeds speeds_bad.txt
  one_line_error "$zipccl" plan --op all_gather --ranks 4 --bytes 100 --link-gbps 3 --device-speeds speeds_short.txt
  one_line_error "$zipccl" plan --op all_gather --ranks 4 --bytes 100 --link-gbps 3 --device-speeds speeds_key.txt
  one_line_error "$zipccl" plan --op all_gather --ranks 4 --bytes 100 --link-gbps 3 --ranks-per-gpu 8
  one_line_error "$zipccl" plan --op all_gather --ranks 4 --bytes 100 --link-gbps 3 --sample x.bf16 --dtype bf16 --ratio 2
  one_line_error "$zipccl" plan --op all_gather --ranks 4 --bytes 100 --link-gbps 3 --sample missing.bin --dtype bf16
  : >empty.bf16
  one_line_error "$zipccl" plan --op all_gather --ranks 4 --bytes 100 --link-gbps 3 --sample empty.bf16 --dtype bf16
  one_line_error "$zipccl" plan --op all_gather --ranks 4 --bytes 100 --link-gbps 3 --sample odd.bf16 --dtype bf16
  one_line_error "$zipccl" plan --op all_gather --ranks 4 --bytes 100 --link-gbps 3 --device-speeds speeds16.txt --dtype fp16 --ranks-per-gpu 0
  "$zipccl" compress --dtype fp32 --checksum x.fp32 ok.zpc >/dev/null || fail=1
  head -c 1000 ok.zpc >trunc.zpc
  one_line_error "$zipccl" decompress trunc.zpc out.raw
  "$py" -c "
d = bytearray(open('ok.zpc','rb').read()); d[len(d)//2] ^= 0x10; open('flip.zpc','wb').write(d)"
  one_line_error "$zipccl" decompress flip.zpc out.raw
  grep -q 'checksum mismatch' err.txt || { echo "FAILED: flipped byte not reported as checksum mismatch"; fail=1; }
  ;;
hostile)
  # Defects an adversarial campaign found (issue 10); each check failed before its fix.
  # a stream header with its hash (docs/format.md "Header", "Hash"), for the forged streams below
  cat >forge.py <<'PY'
import struct
M = 2**64 - 1
def mix(x):
    x ^= x >> 32; x = (x * 0xD6E8FEB86659FD93) & M; x ^= x >> 32
    x = (x * 0xD6E8FEB86659FD93) & M; return x ^ (x >> 32)
def hsum(words, first):
    return sum(mix((w + (first + j + 1) * 0x9E3779B97F4A7C15) & M) for j, w in enumerate(words)) & M
def data_offset(chunks):
    return (48 + 8 * chunks + 15) // 16 * 16
def stream_head(version, dtype, chunk, count, total, directory):
    """The header, its hash and the directory (padded to data_offset)."""
    chunks = len(directory)
    head = struct.pack('<4sHBBIIQQII', b'ZPCL', version, dtype, 1, 0, chunk, count, total, chunks, 0)
    h = mix(((hsum(struct.unpack('<5Q', head), 0) + hsum(directory, 5)) & M) ^ (5 + chunks))
    out = head + struct.pack('<Q', h) + struct.pack('<%dQ' % chunks, *directory)
    return out + bytes(data_offset(chunks) - len(out))
PY
  # 1. a 1,584-byte stream whose (valid) header claims 3 * 2^30 bf16: rejected at once, in little memory
  "$py" - <<'PY'
from forge import *
chunk, count = 1 << 24, 3 << 30
chunks = count // chunk
total = data_offset(chunks)
open('bomb.zpc', 'wb').write(stream_head(1, 1, chunk, count, total, [0] * chunks))
PY
  "$py" - "$zipccl" <<'PY' || fail=1
import resource, subprocess, sys, time
t0 = time.time()
r = subprocess.run([sys.argv[1], 'decompress', 'bomb.zpc', 'bomb.out'], capture_output=True)
secs = time.time() - t0
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
assert r.returncode == 1 and b'corrupt stream' in r.stderr, r
assert secs < 1.0, secs
assert peak_kib < 100 * 1024, peak_kib
PY
  # 2. a stream whose header and directory are valid but whose chunks are garbage,
  #    claiming 8 chunks of 2^24 fp32 (512 MiB of output) in 262 KiB: corrupt at the first chunk,
  #    in far less memory than the claim (the output buffer is not zero-filled before decoding)
  "$py" - <<'PY'
from forge import *
chunk, chunks = 1 << 24, 8
span = 16 + chunk // 64 // 8          # header and zero mask: the smallest chunk version 2 allows
total = data_offset(chunks) + chunks * span
head = stream_head(2, 3, chunk, chunk * chunks, total, [data_offset(chunks) + i * span for i in range(chunks)])
open('garbage.zpc', 'wb').write(head + bytes(total - len(head)))
PY
  "$py" - "$zipccl" <<'PY' || fail=1
import resource, subprocess, sys
r = subprocess.run([sys.argv[1], 'decompress', 'garbage.zpc', 'garbage.out'], capture_output=True)
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
assert r.returncode == 1 and b'corrupt stream' in r.stderr, r
assert peak_kib < 256 * 1024, peak_kib  # zero-filled: over 512 MiB; ASan shadow: 64 MiB
PY
  # --max-output: an output larger than it is refused before anything is allocated (by default
  # the limit is this machine's memory); an input that gives more than such a stream can hold
  # (/dev/zero) is refused once read that far; the other commands do not take it
  "$zipccl" compress --dtype bf16 --chunk 4096 x.bf16 mo.zpc >/dev/null || fail=1
  one_line_error "$zipccl" decompress --max-output 139999 mo.zpc mo.back
  grep -q 'more than --max-output 139999' err.txt || { echo "FAILED: --max-output message: $(cat err.txt)"; fail=1; }
  check "'$zipccl' decompress --max-output 140000 mo.zpc mo.back >/dev/null && cmp -s x.bf16 mo.back"
  one_line_error "$zipccl" decompress --max-output 1000 /dev/zero mo.back
  grep -q '/dev/zero holds more than' err.txt || { echo "FAILED: /dev/zero message: $(cat err.txt)"; fail=1; }
  one_line_error "$zipccl" decompress --max-output many mo.zpc mo.back
  # a --max-output whose input limit (itself + 1/16 + 1 MiB) would wrap to 5 bytes: saturates
  check "'$zipccl' decompress --max-output 17361641481137414631 mo.zpc mo.back >/dev/null && cmp -s x.bf16 mo.back"
  # without --max-output the limits are half the memory, or half of ulimit -v: /dev/zero is refused
  # once read that far (under a 3 GB address space, 1.5 GB: about a second), for every command
  # (skipped where the tool cannot start under that limit, as with AddressSanitizer's shadow)
  if bash -c "ulimit -v 3000000 && exec '$zipccl' --help" >/dev/null 2>&1; then
    for cmd in "decompress /dev/zero z.back" "compress --dtype bf16 /dev/zero z.zpc" "inspect --dtype bf16 /dev/zero"; do
      bash -c "ulimit -v 3000000 && exec '$zipccl' $cmd" >out.txt 2>err.txt
      rc=$?
      if [ $rc -ne 1 ] || ! grep -q '/dev/zero holds more than' err.txt; then
        echo "FAILED: $cmd under ulimit -v: exit $rc, $(cat err.txt)"; fail=1
      fi
    done
  fi
  one_line_error "$zipccl" compress --dtype bf16 --max-output 10 x.bf16 mo2.zpc
  # 3. no thread can be started (a process limit of 1 for an unprivileged user): the work is done
  #    on the calling thread instead of std::terminate
  "$zipccl" compress --dtype bf16 --chunk 4096 x.bf16 th.zpc >/dev/null || fail=1
  if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    mkdir -p lim && chmod 777 lim && chmod 644 th.zpc
    # (OpenBLAS, linked for subspace-fit, starts its own threads when loaded unless told not to)
    OPENBLAS_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=0 setpriv --reuid=65534 --regid=65534 --clear-groups \
      bash -c "ulimit -u 1 && exec '$zipccl' decompress --threads 8 th.zpc lim/th.back" >/dev/null 2>lim.err
    rc=$?
    if [ $rc -ne 0 ] || ! cmp -s x.bf16 lim/th.back; then echo "FAILED: decompress --threads 8 under ulimit -u 1 (exit $rc)"; cat lim.err; fail=1; fi
  else
    echo "cli.hostile: skipped the thread-limit check (needs root and setpriv)"
  fi
  # 4. writes that fail are errors: the output (small ones too, which failed only at close), and
  #    the summary on standard output
  head -c 200 x.bf16 >small.bf16 && "$zipccl" compress --dtype bf16 small.bf16 small.zpc >/dev/null || fail=1
  one_line_error "$zipccl" compress --dtype bf16 small.bf16 /dev/full
  one_line_error "$zipccl" decompress small.zpc /dev/full
  one_line_error "$zipccl" compress --dtype bf16 x.bf16 /dev/full
  one_line_error "$zipccl" decompress th.zpc /dev/full
  "$zipccl" compress --dtype bf16 --json x.bf16 j.zpc >/dev/full 2>err.txt
  rc=$?; [ $rc -eq 1 ] && [ "$(wc -l <err.txt)" -eq 1 ] || { echo "FAILED: --json to a full stdout (exit $rc)"; fail=1; }
  "$zipccl" decompress th.zpc t.out >/dev/full 2>err.txt
  rc=$?; [ $rc -eq 1 ] || { echo "FAILED: summary to a full stdout (exit $rc)"; fail=1; }
  check "'$zipccl' decompress th.zpc /dev/null >/dev/null"   # a device that takes the bytes is fine
  "$zipccl" decompress th.zpc /dev/stdout >via_stdout.raw 2>err.txt || { echo "FAILED: /dev/stdout: $(cat err.txt)"; fail=1; }
  check "[ -L /dev/stdout ] && head -c 140000 via_stdout.raw | cmp -s - x.bf16"
  printf old >real.raw && ln -sf real.raw link.raw   # a link to a regular file: the file is replaced, the link kept
  check "'$zipccl' decompress th.zpc link.raw >/dev/null && [ -L link.raw ] && cmp -s real.raw x.bf16"
  printf ro >ro.raw && chmod 444 ro.raw
  if [ "$(id -u)" -ne 0 ]; then one_line_error "$zipccl" decompress th.zpc ro.raw; fi  # root may write anyway
  # 5. a failed write never destroys data; the output may not be the input
  cp th.zpc keep.zpc
  one_line_error "$zipccl" decompress th.zpc th.zpc
  ln -f th.zpc hard.zpc && ln -sf th.zpc soft.zpc
  one_line_error "$zipccl" decompress th.zpc hard.zpc
  one_line_error "$zipccl" decompress soft.zpc th.zpc
  one_line_error "$zipccl" compress --dtype bf16 x.bf16 x.bf16
  check "cmp -s th.zpc keep.zpc"
  printf precious >old.raw
  (trap '' XFSZ; ulimit -f 16; exec "$zipccl" decompress th.zpc old.raw) >/dev/null 2>err.txt
  rc=$?; [ $rc -eq 1 ] || { echo "FAILED: a write over the file size limit (exit $rc)"; fail=1; }
  check "[ \"\$(cat old.raw)\" = precious ]"
  check "! ls -a | grep -q zipccl-"                 # no temporary file left behind
  (trap '' XFSZ; ulimit -f 16; exec "$zipccl" decompress th.zpc new.raw) >/dev/null 2>&1
  check "[ ! -e new.raw ]"
  if mkdir -p small && mount -t tmpfs -o size=64k tmpfs small 2>/dev/null; then  # a real full disk
    printf precious >small/old.raw
    "$zipccl" decompress th.zpc small/old.raw >/dev/null 2>err.txt
    rc=$?
    [ $rc -eq 1 ] && grep -q 'No space left' err.txt || { echo "FAILED: ENOSPC (exit $rc): $(cat err.txt)"; fail=1; }
    [ "$(cat small/old.raw)" = precious ] && [ "$(ls -a small | wc -l)" -eq 3 ] || { echo "FAILED: ENOSPC left damage: $(ls -a small)"; fail=1; }
    umount small
  else
    echo "cli.hostile: skipped the tmpfs ENOSPC check (mount not permitted)"
  fi
  # 7. bad option values and odd inputs get one clear line each
  one_line_error "$zipccl" compress --dtype bf16 --codebook fixed --window 300 x.bf16 w.zpc
  one_line_error "$zipccl" compress --dtype bf16 --codebook fixed --window 18446744073709551615 x.bf16 w.zpc
  one_line_error "$zipccl" compress --dtype fp16 --codebook fixed --window 40 x.fp16 w.zpc
  grep -q 'between 0 and 25' err.txt || { echo "FAILED: --window range not named: $(cat err.txt)"; fail=1; }
  check "'$zipccl' compress --dtype fp16 --codebook fixed --window 25 x.fp16 w.zpc >/dev/null"
  "$py" - <<'PY'
import struct
def npy(name, header, data=b''):
    h = header + ' ' * ((64 - (10 + len(header) + 1) % 64) % 64) + '\n'
    open(name, 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode() + data)
npy('long.npy', "{'descr': '<f4', 'fortran_order': False, 'shape': (123456789012345678901234567890,), }")
npy('fortran.npy', "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", bytes(24))
npy('fortran1d.npy', "{'descr': '<f4', 'fortran_order': True, 'shape': (6,), }", bytes(24))
npy('bare.npy', "{'descr': f4, 'fortran_order': False, 'shape': (6,), }", bytes(24))
PY
  for f in long.npy fortran.npy bare.npy; do
    one_line_error "$zipccl" compress $f out.zpc
    grep -q "$f" err.txt || { echo "FAILED: the error for $f does not name it: $(cat err.txt)"; fail=1; }
  done
  grep -q 'quoted' err.txt || { echo "FAILED: unquoted descr: $(cat err.txt)"; fail=1; }
  check "'$zipccl' compress fortran1d.npy f1.zpc >/dev/null"   # a vector is the same in either order
  mkdir -p adir
  one_line_error "$zipccl" compress --dtype bf16 adir out.zpc
  grep -q 'is a directory' err.txt || { echo "FAILED: directory input: $(cat err.txt)"; fail=1; }
  one_line_error "$zipccl" decompress adir out.raw
  one_line_error "$zipccl" compress --dtype bf16 x.bf16 adir
  ;;
subspace)
  # activations near a rank-6 subspace in 32 dimensions, plus a per-token offset and some noise
  "$py" - <<'PY'
import random, struct
random.seed(9)
d, n, k, vocab = 32, 600, 6, 10
basis = [[random.gauss(0, 1) for _ in range(d)] for _ in range(k)]
offset = [[random.gauss(0, 0.3) for _ in range(d)] for _ in range(vocab)]
rows, toks = [], []
for i in range(n):
    t = random.randrange(vocab)
    c = [random.gauss(0, 1) for _ in range(k)]
    rows += [sum(c[j] * basis[j][m] for j in range(k)) + offset[t][m] + random.gauss(0, 0.05) for m in range(d)]
    toks.append(t)
open('act.fp32', 'wb').write(struct.pack('<%df' % len(rows), *rows))
open('tok.i32', 'wb').write(struct.pack('<%di' % n, *toks))
open('tok_bad.i32', 'wb').write(struct.pack('<%di' % n, *[t if i != 7 else vocab for i, t in enumerate(toks)]))
open('tok_short.i32', 'wb').write(struct.pack('<%di' % (n - 1), *toks[:-1]))
PY
  "$zipccl" subspace-fit --dim 32 --rank 6 --tokens tok.i32 --vocab 10 --steps 1500 --json act.fp32 >fit.json || fail=1
  "$zipccl" subspace-fit --dim 32 --rank 6 --steps 300 act.fp32 | grep -q 'learned projector' || fail=1
  "$zipccl" subspace-fit --dim 32 --rank 6 --tokens tok.i32 --vocab 10 --vq 2,2,16 --steps 800 --json act.fp32 >vq.json || fail=1
  "$py" - <<'PY' || fail=1
import json
j = json.load(open('fit.json'))
e = j['energy']
assert j['rows'] == 600 and j['dim'] == 32 and j['rank'] == 6, j
assert e['learned'] >= 0.98 * e['pca'], e              # the learned projector reaches the PCA optimum
assert e['fixed'] < e['learned'], e                     # and beats a fixed random projection
assert e['learned_anchor'] >= e['learned'] - 1e-3, e    # the anchor takes the per-token offsets
assert 0 < e['pca'] <= 1, e
v = json.load(open('vq.json'))
q = v['energy']
assert 0.5 < q['learned_anchor_vq'] <= q['learned_anchor'] + 1e-3, q   # VQ costs some energy, not most
assert v['vq_sync_bytes'] > 0, v
PY
  one_line_error "$zipccl" subspace-fit --dim 29 --rank 6 act.fp32                    # not rows of 29
  one_line_error "$zipccl" subspace-fit --dim 32 --rank 40 act.fp32                   # rank > dim
  one_line_error "$zipccl" subspace-fit --dim 32 --rank 6 --tokens tok.i32 act.fp32   # no --vocab
  one_line_error "$zipccl" subspace-fit --dim 32 --rank 6 --tokens tok_bad.i32 --vocab 10 act.fp32
  grep -q 'outside' err.txt || { echo "FAILED: token out of range not named"; fail=1; }
  one_line_error "$zipccl" subspace-fit --dim 32 --rank 6 --tokens tok_short.i32 --vocab 10 act.fp32
  one_line_error "$zipccl" subspace-fit --dim 32 --rank 6 --tokens tok.i32 --vocab 10 --vq 4,2,16 act.fp32  # 4 does not divide 6
  one_line_error "$zipccl" subspace-fit --dim 32 --rank 6 --tokens tok.i32 --vocab 10 --vq 2,2 act.fp32
  one_line_error "$zipccl" subspace-fit --dim 32 --rank 6 --vq 2,2,16 act.fp32                             # no tokens
  ;;
*) echo "unknown case $case_name"; exit 2 ;;
esac
[ $fail -eq 0 ] && echo "cli.$case_name: all checks passed"
exit $fail
