#!/usr/bin/env python3
"""zipccl's codebook policies (analytic, histogram, entropy) beside ZipNN, zstd -1 / -3 and memcpy, in one run, single thread.

    pip install zipnn zstandard numpy        # the peers (ZipNN pulls in torch)
    python3 scripts/compare_peers.py [--zipccl build/bin/zipccl] [--data ../shared/data] [--reps 3] [--rounds 1]

Sets: every dtype of ../shared/data, all kinds together and each kind (the tensors of a set
concatenated into one buffer), Gaussian bf16 (4 Mi elements, sigma 0.02), row-sparse bf16
gradients (4096 x 128, 70 / 80 / 95% of the rows exactly zero), and element-sparse bf16
gradients (4 Mi elements, 50 / 90% of them zero, +0 or -0 as the masked value's sign says). Every codec gets the same bytes.
zipccl runs through its command-line tool (`--threads 1 --repeat REPS`; the time is its own
`seconds`, the fastest codec call, without file I/O or allocation); ZipNN through its Python API (threads=1; its compress overwrites
its input buffer, so each repetition gets a fresh copy, made outside the timed region); zstd
through the zstandard module; memcpy is a numpy copy of the buffer. Speeds are input bytes per
second of the best of `--reps` runs (and of `--rounds` passes over every set and codec); every
round trip is checked byte for byte. The last column is entropy's speed over ZipNN's.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    import zipnn
    import zstandard
except ImportError as e:  # the peers are optional for the project, required for this script
    sys.exit(f"compare_peers: {e.name} is missing: pip install zipnn zstandard numpy")

HERE = os.path.dirname(os.path.abspath(__file__))
ZIPNN_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def best(fn, reps):
    t = []
    out = None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        t.append(time.perf_counter() - t0)
    return min(t), out


def run_zipccl(tool, dtype, raw, policy, reps, tmp):
    src, packed, back = (os.path.join(tmp, n) for n in ("in.bin", "out.zpc", "back.bin"))
    with open(src, "wb") as f:
        f.write(raw)
    c = json.loads(subprocess.run([tool, "compress", "--dtype", dtype, "--codebook", policy, "--threads", "1",
                                   "--repeat", str(reps), "--json", src, packed], check=True, capture_output=True,
                                  text=True).stdout)
    d = json.loads(subprocess.run([tool, "decompress", "--threads", "1", "--repeat", str(reps), "--json", packed, back],
                                  check=True, capture_output=True, text=True).stdout)
    c_best, d_best = c["seconds"], d["seconds"]
    with open(back, "rb") as f:
        if f.read() != raw:
            sys.exit(f"compare_peers: zipccl {policy} round trip differs")
    return len(raw) / c["output_bytes"], c_best, d_best


def run_zipnn(dtype, raw, reps):
    z = zipnn.ZipNN(input_format="byte", bytearray_dtype=ZIPNN_DTYPE[dtype], threads=1)
    c_times = []
    packed = None
    for _ in range(reps):
        buf = bytearray(raw)  # (compress overwrites it: a fresh copy, untimed)
        t0 = time.perf_counter()
        packed = z.compress(buf)
        c_times.append(time.perf_counter() - t0)
    d_time, back = best(lambda: z.decompress(packed), reps)
    if bytes(back) != raw:
        sys.exit("compare_peers: ZipNN round trip differs")
    return len(raw) / len(packed), min(c_times), d_time


def run_zstd(raw, level, reps):
    cctx, dctx = zstandard.ZstdCompressor(level=level, threads=0), zstandard.ZstdDecompressor()
    c_time, packed = best(lambda: cctx.compress(raw), reps)
    d_time, back = best(lambda: dctx.decompress(packed), reps)
    if back != raw:
        sys.exit("compare_peers: zstd round trip differs")
    return len(raw) / len(packed), c_time, d_time


def run_memcpy(raw, reps):
    a = np.frombuffer(raw, dtype=np.uint8)
    t, _ = best(lambda: a.copy(), reps)
    return t


def shared_sets(data):
    sets = []
    rows = []
    with open(os.path.join(data, "manifest.tsv")) as f:
        next(f)
        for line in f:
            rows.append(line.rstrip("\n").split("\t"))
    for dtype in ("bf16", "fp16", "fp32"):
        for kind in ("all kinds", "weight", "gradient", "adam_m", "activation"):
            files = [r[4] for r in rows if r[1] == dtype and (kind == "all kinds" or r[2] == kind)]
            if files:
                raw = b"".join(open(os.path.join(data, f), "rb").read() for f in files)
                sets.append((dtype, kind, raw))
    return sets


def to_bf16(x):
    b = x.astype(np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def synthetic_sets():
    rng = np.random.default_rng(7)
    sets = [("bf16", "Gaussian (sigma 0.02)", to_bf16(rng.normal(0, 0.02, 4 << 20)).tobytes())]
    for frac in (0.7, 0.8, 0.95):
        g = rng.normal(0, 1e-3, (4096, 128)).astype(np.float32)
        g[rng.random(4096) < frac] = 0
        sets.append(("bf16", f"row-sparse gradient, {int(frac * 100)}% zero rows", to_bf16(g).tobytes()))
    for frac in (0.5, 0.9):
        # a gradient through a ReLU or a top-k mask: the masked elements are +0 or, where the
        # gradient was negative, -0 (a negative value times a zero)
        g = rng.normal(0, 1e-3, 4 << 20).astype(np.float32)
        g *= (rng.random(g.size) >= frac).astype(np.float32)
        sets.append(("bf16", f"element-sparse gradient, {int(frac * 100)}% zeros (+0 and -0)", to_bf16(g).tobytes()))
    return sets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zipccl", default=os.path.join(HERE, "..", "build", "bin", "zipccl"))
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure every set with every codec this many times over, round after round, and keep "
                         "each codec's best: a slow spell of the machine then falls on every codec alike")
    args = ap.parse_args()
    if not os.access(args.zipccl, os.X_OK):
        sys.exit(f"compare_peers: no zipccl tool at {args.zipccl} (build it, or pass --zipccl)")
    gb = 1e9
    sets = shared_sets(args.data) + synthetic_sets()
    names = ("analytic", "histogram", "entropy", "zipnn", "zstd1", "zstd3", "memcpy")
    found = [dict() for _ in sets]  # per set and codec: (ratio, compress seconds, decompress seconds)

    def keep(i, name, r):
        old = found[i].get(name)
        found[i][name] = r if old is None else (r[0], min(old[1], r[1]), min(old[2], r[2]))

    with tempfile.TemporaryDirectory() as tmp:
        for k in range(max(1, args.rounds)):
            print(f"compare_peers: round {k + 1} of {max(1, args.rounds)}", file=sys.stderr, flush=True)
            for i, (dtype, label, raw) in enumerate(sets):
                for policy in ("analytic", "histogram", "entropy"):
                    keep(i, policy, run_zipccl(args.zipccl, dtype, raw, policy, args.reps, tmp))
                keep(i, "zipnn", run_zipnn(dtype, raw, args.reps))
                keep(i, "zstd1", run_zstd(raw, 1, args.reps))
                keep(i, "zstd3", run_zstd(raw, 3, args.reps))
                t = run_memcpy(raw, args.reps)
                keep(i, "memcpy", (1.0, t, t))
    print("| type | tensors | MB | zipccl analytic | zipccl histogram | zipccl entropy | ZipNN | zstd -1 | zstd -3 | "
          "compress GB/s: zipccl hist. / entropy / ZipNN / zstd -1 / memcpy | "
          "decompress GB/s: zipccl hist. / entropy / ZipNN / zstd -1 | entropy / ZipNN speed: compress, decompress |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
    for (dtype, label, raw), f in zip(sets, found):
        za, zh, ze, zn, z1, z3, mc = (f[k] for k in names)
        n = len(raw)
        print(f"| {dtype} | {label} | {n / 1e6:.1f} | {za[0]:.3f} | {zh[0]:.3f} | {ze[0]:.3f} | {zn[0]:.3f} | "
              f"{z1[0]:.3f} | {z3[0]:.3f} | {n / zh[1] / gb:.2f} / {n / ze[1] / gb:.2f} / {n / zn[1] / gb:.2f} / "
              f"{n / z1[1] / gb:.2f} / {n / mc[1] / gb:.1f} | {n / zh[2] / gb:.2f} / {n / ze[2] / gb:.2f} / "
              f"{n / zn[2] / gb:.2f} / {n / z1[2] / gb:.2f} | {zn[1] / ze[1]:.2f}x, {zn[2] / ze[2]:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
