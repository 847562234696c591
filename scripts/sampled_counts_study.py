#!/usr/bin/env python3
"""What fp16's sampled rANS counts cost in ratio: each chunk's high bytes coded with a 12-bit table
normalised (as rans::normalize does) from counts over every k-th group of 32 elements, scaled up,
with the symbols the sample misses counted 1 (codec_detail::rans::counts_from_sample), against
the table from the exact counts. Model only: rests at 8 bits an element, no headers or tables
(docs/design.md, "fp16's sampled counts").

    python3 scripts/sampled_counts_study.py [--data ../shared/data] [--chunk 65536] [--strides 2,3,4,5,7,8]
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def normalize(counts, b):
    f = np.where(counts == 0, 0, np.maximum(1, (counts.astype(np.int64) * 4096) // b))
    total = int(f.sum())
    if total < 4096:
        f[int(np.argmax(counts))] += 4096 - total
    while f.sum() > 4096:  # (the format's rule, one at a time from the largest)
        f[int(np.argmax(f))] -= 1
    return f


def coded_bits(sym, freq):
    h = np.bincount(sym, minlength=256)
    used = h > 0
    return float(-(h[used] * np.log2(freq[used] / 4096.0)).sum()) + 8.0 * len(sym)


def sampled_counts(sym, exact, stride):
    groups = np.arange(len(sym)) // 32
    take = groups % stride == 0
    sample = np.bincount(sym[take], minlength=256).astype(np.int64)
    zero = np.zeros(256, dtype=bool)
    zero[[0x00, 0x80]] = True
    full = len(sym) - int(exact[zero].sum())
    n = int(sample[~zero].sum())
    out = np.where(sample > 0, (sample * full) // max(n, 1), np.where(exact > 0, 1, 0))
    out[zero] = exact[zero]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data"))
    ap.add_argument("--chunk", type=int, default=65536)
    ap.add_argument("--strides", default="2,3,4,5,7,8")
    args = ap.parse_args()
    strides = [int(s) for s in args.strides.split(",")]
    manifest = os.path.join(args.data, "manifest.tsv")
    if not os.path.exists(manifest):
        sys.exit(f"sampled_counts_study: no manifest at {manifest}")
    rows = [line.rstrip("\n").split("\t") for line in open(manifest)][1:]
    print("| fp16 tensors | exact | " + " | ".join(f"every {k} groups" for k in strides) + " |")
    print("|---|---:|" + "---:|" * len(strides))
    for kind in ("all kinds", "weight", "gradient", "adam_m", "activation"):
        files = [r[4] for r in rows if r[1] == "fp16" and (kind == "all kinds" or r[2] == kind)]
        if not files:
            continue
        a = np.concatenate([np.fromfile(os.path.join(args.data, f), dtype=np.uint16) for f in files])
        bits = {"exact": 0.0, **{k: 0.0 for k in strides}}
        for c in range(0, len(a), args.chunk):
            sym = (a[c:c + args.chunk] >> 8).astype(np.int64)
            exact = np.bincount(sym, minlength=256).astype(np.int64)
            bits["exact"] += coded_bits(sym, normalize(exact, len(sym)))
            for k in strides:
                bits[k] += coded_bits(sym, normalize(sampled_counts(sym, exact, k), len(sym)))
        raw = 16.0 * len(a)
        ex = raw / bits["exact"]
        cells = [f"{raw / bits[k]:.5f} ({100 * (raw / bits[k] / ex - 1):+.3f}%)" for k in strides]
        print(f"| {kind} | {ex:.5f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
