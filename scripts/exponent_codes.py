#!/usr/bin/env python3
"""Which entropy code for the exponent (issue 13)? Sizes each candidate would give, per 8,192-element
chunk with every per-chunk cost counted, on ../shared/data and on synthetic row-sparse gradients.

    python3 scripts/exponent_codes.py [--data DIR] [--markdown]

Symbols: bf16 and fp32 code the 8-bit exponent field and keep the rest raw (bf16: sign and 7
mantissa bits; fp32: sign and 23 bits), or (bf16, exp+m1) the exponent with the top mantissa bit
as one 9-bit symbol; fp16 codes its high byte (sign, 5 exponent bits, the top 2 mantissa bits) and
keeps the low byte raw, or only its exponent. Zero-aware variants give +0 and -0 symbols of their
own, with no raw bits, and (group mask) one bit per 64-element group that is all zeros, which then
costs nothing else.

Candidates (per chunk; every one also pays a 64-bit chunk header):
  entropy     the chunk's empirical entropy: the bound of any static per-chunk code (no table)
  window3     a model of today's 3-bit window code (7 exponents in 3 bits, an escape 3 + 8 + 13
              bits, the best window): pessimistic, the real format measures higher (zipccl inspect)
  huffman     canonical Huffman, lengths <= 12; table: 4 bits per symbol over the used range;
              32 interleaved bit streams (a 16-bit offset each) so 32 lanes decode side by side
  rans        interleaved rANS, 32 states: 12-bit frequencies (table 12 bits per symbol over the
              used range), cross-entropy of the quantised model, 32 x 32 bits of final states
  *-shared    the same codes with one table per tensor (paid once), the chunks carrying only their
              32 lane offsets (Huffman) or final states (rANS)
  twolen      two lengths: the 2^a most frequent symbols in 1 + a bits, the rest 1 + 8 bits (a flag
              plane, an index plane, an escape list: all fixed-width, decodable by popcount)
The ratio is raw bits / coded bits over the whole tensor set of a dtype (and kind).
"""
import argparse
import collections
import heapq
import math
import os
import sys

import numpy as np

CHUNK = int(os.environ.get("ZIPCCL_STUDY_CHUNK", "8192"))
HEADER_BITS = 64


def fields(raw, dtype, mode):
    """(symbols, raw bits per element) for one tensor's elements, mode 'exp' or 'high' (fp16)."""
    if dtype == "bf16":
        b = raw.view(np.uint16)
        if mode == "exp+m1":  # the exponent and the top mantissa bit as one 9-bit symbol
            return ((b >> 6) & 0x1FF).astype(np.int32), 7, b & 0x7FFF == 0, b >> 15
        return ((b >> 7) & 0xFF).astype(np.int32), 8, b & 0x7FFF == 0, b >> 15
    if dtype == "fp32":
        b = raw.view(np.uint32)
        return ((b >> 23) & 0xFF).astype(np.int32), 24, b & 0x7FFFFFFF == 0, (b >> 31).astype(np.uint16)
    b = raw.view(np.uint16)
    if mode == "high":
        return (b >> 8).astype(np.int32), 8, b & 0x7FFF == 0, b >> 15
    return ((b >> 10) & 0x1F).astype(np.int32), 11, b & 0x7FFF == 0, b >> 15


def huffman_lengths(counts, limit=12):
    items = [(c, i) for i, c in enumerate(counts) if c > 0]
    if len(items) == 1:
        return {items[0][1]: 1}
    heap = [(c, n, [s]) for n, (c, s) in enumerate(items)]
    heapq.heapify(heap)
    depth = collections.Counter()
    n = len(heap)
    while len(heap) > 1:
        c1, _, a = heapq.heappop(heap)
        c2, _, b = heapq.heappop(heap)
        for s in a + b:
            depth[s] += 1
        n += 1
        heapq.heappush(heap, (c1 + c2, n, a + b))
    L = {s: min(depth[s], limit) for _, s in items}
    # restore Kraft after clipping: lengthen the shortest codes until sum 2^-L <= 1
    while sum(2.0 ** -l for l in L.values()) > 1.0 + 1e-12:
        s = min((x for x in L if L[x] < limit), key=lambda x: (L[x], -counts[x]))
        L[s] += 1
    return L


def chunk_bits(sym, nraw_total, method, alphabet, shared=None):
    """Coded bits of one chunk's symbols (the raw bits are added by the caller). shared: the
    tensor's (lengths or probabilities) for the *-shared methods, whose table is paid once."""
    counts = np.bincount(sym, minlength=alphabet)
    if method == "huffman-shared":
        return float(sum(counts[s] * l for s, l in shared.items() if counts[s]) + 32 * 16)
    if method == "rans-shared":
        used = np.nonzero(counts)[0]
        return float(-(counts[used] * np.log2(shared[used])).sum() + 32 * 32)
    m = len(sym)
    used = np.nonzero(counts)[0]
    span = int(used[-1] - used[0] + 1)
    if method == "entropy":
        p = counts[used] / m
        return float(-(counts[used] * np.log2(p)).sum())
    if method == "window3":
        best = None
        for lo in range(0, alphabet):
            inside = counts[lo:lo + 7].sum()
            bits = 3 * m + (m - inside) * (8 + 13)
            best = bits if best is None or bits < best else best
        return float(best + 8)
    if method == "huffman":
        L = huffman_lengths(counts)
        return float(sum(counts[s] * l for s, l in L.items()) + 16 + 4 * span + 32 * 16)
    if method == "rans":
        M = 1 << 12
        f = np.maximum(1, np.floor(counts[used] / m * M)).astype(np.int64)
        while f.sum() > M:
            f[np.argmax(f)] -= 1
        q = f / f.sum()
        return float(-(counts[used] * np.log2(q)).sum() + 16 + 12 * span + 32 * 32)
    if method.startswith("twolen"):
        best = None
        order = np.argsort(-counts)
        for a in (1, 2, 3, 4):
            k = 1 << a
            top = counts[order[:k]].sum()
            bits = m + a * top + (m - top) * math.ceil(math.log2(alphabet)) + 8 * k
            best = bits if best is None or bits < best else best
        return float(best)
    raise ValueError(method)


GROUP = 64  # zero_aware == 2: one bit per 64-element group says "all zero"; such groups cost nothing else


def tensor_bits(raw, dtype, mode, method, zero_aware):
    sym, nraw, is_zero, sign = fields(raw, dtype, mode)
    alphabet = 512 if mode == "exp+m1" else 256
    if zero_aware:
        sym = sym.copy()
        sym[is_zero & (sign == 0)] = alphabet
        sym[is_zero & (sign == 1)] = alphabet + 1
        alphabet += 2
    total = 0.0
    shared = None
    if method.endswith("-shared"):  # one model per tensor, its table paid once
        tc = np.bincount(sym, minlength=alphabet)
        used = np.nonzero(tc)[0]
        span = int(used[-1] - used[0] + 1)
        if method == "huffman-shared":
            shared = huffman_lengths(tc)
            total += 16 + 4 * span
        else:
            M = 1 << 12
            f = np.zeros(alphabet)
            f[used] = np.maximum(1, np.floor(tc[used] / tc.sum() * M))
            while f.sum() > M:
                f[np.argmax(f)] -= 1
            shared = f / f.sum()
            total += 16 + 12 * span
    for c0 in range(0, len(sym), CHUNK):
        s = sym[c0:c0 + CHUNK]
        zeros = is_zero[c0:c0 + CHUNK]
        if zero_aware == 2:
            n = len(s) // GROUP * GROUP
            dead = np.zeros(len(s), dtype=bool)
            if n:
                dead[:n] = np.repeat(zeros[:n].reshape(-1, GROUP).all(axis=1), GROUP)
            total += (len(s) + GROUP - 1) // GROUP
            s, zeros = s[~dead], zeros[~dead]
        z = zeros.sum() if zero_aware else 0
        total += HEADER_BITS + (chunk_bits(s, nraw, method, alphabet, shared) if len(s) else 0) + nraw * (len(s) - z)
    return total


def load(data, dtype):
    out = []
    with open(os.path.join(data, "manifest.tsv")) as f:
        next(f)
        for line in f:
            name, dt, kind, shape, fname = line.rstrip("\n").split("\t")
            if dt != dtype:
                continue
            np_type = {"bf16": np.uint16, "fp16": np.uint16, "fp32": np.uint32}[dt]
            out.append((name, kind, np.fromfile(os.path.join(data, fname), dtype=np_type)))
    return out


def to_bf16(x):
    b = x.astype(np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def sparse_gradient(rows=4096, cols=128, zero_rows=0.8, seed=1):
    """A row-sparse bf16 gradient (an embedding's): zero_rows of its rows exactly zero."""
    rng = np.random.default_rng(seed)
    g = rng.normal(0, 1e-3, (rows, cols)).astype(np.float32)
    g[rng.random(rows) < zero_rows] = 0
    return to_bf16(g).reshape(-1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    methods = ["entropy", "huffman", "rans", "huffman-shared", "rans-shared", "twolen", "window3"]
    rows = []
    for dtype, mode in (("bf16", "exp"), ("bf16", "exp+m1"), ("fp16", "exp"), ("fp16", "high"), ("fp32", "exp")):
        tensors = load(args.data, dtype)
        width = 32 if dtype == "fp32" else 16
        groups = [("all kinds", tensors)] + [
            (k, [t for t in tensors if t[1] == k]) for k in ("weight", "gradient", "adam_m", "activation")]
        for label, ts in groups:
            if not ts:
                continue
            raw_bits = sum(len(t[2]) for t in ts) * width
            for za in (0, 1):
                r = [raw_bits / sum(tensor_bits(t[2], dtype, mode, m, za) for t in ts) for m in methods]
                rows.append((f"{dtype} ({mode})", label, "zero symbols" if za else "", r))
    for frac in (0.7, 0.8, 0.95):
        g = sparse_gradient(zero_rows=frac)
        for za in (0, 1, 2):
            r = [len(g) * 16 / tensor_bits(g, "bf16", "exp", m, za) for m in methods]
            rows.append(("bf16 (exp)", f"row-sparse gradient, {int(frac * 100)}% zero rows",
                         ["", "zero symbols", "zero symbols + group mask"][za], r))
    if args.markdown:
        print("| dtype (symbol) | tensors | zeros | " + " | ".join(methods) + " |")
        print("|---|---|---|" + "---:|" * len(methods))
        for d, l, z, r in rows:
            print(f"| {d} | {l} | {z} | " + " | ".join(f"{x:.3f}" for x in r) + " |")
    else:
        for d, l, z, r in rows:
            print(f"{d:11s} {l:38s} {z:10s} " + " ".join(f"{m}={x:.3f}" for m, x in zip(methods, r)))


if __name__ == "__main__":
    sys.exit(main())
