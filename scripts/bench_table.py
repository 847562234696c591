#!/usr/bin/env python3
"""Turns bench_host_codec's JSON output into the markdown tables of docs/benchmarks.md.

usage: scripts/bench_table.py bench.json
"""
import json
import sys
from collections import OrderedDict


def main(path):
    runs = json.load(open(path))["benchmarks"]
    rows = OrderedDict()
    for b in runs:
        if b.get("error_occurred"):
            continue
        parts = b["name"].replace("/real_time", "").split("/")
        dtype, data, what = parts[0], parts[1], "/".join(parts[2:])
        key = (dtype, data)
        r = rows.setdefault(key, OrderedDict())
        r[what] = b
    for (dtype, data), r in rows.items():
        memcpy = r.get("memcpy", {}).get("bytes_per_second", 0)
        any_b = next(iter(r.values()))
        print(f"\n**{dtype}, {data}** (entropy bound {any_b['bound']:.4f})\n")
        print("| codec | ratio | of ideal 3-bit | compress GB/s | of memcpy | decompress GB/s | of memcpy |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        names = [("zipccl analytic", "compress/analytic", "decompress/analytic"),
                 ("zipccl histogram", "compress/histogram", "decompress/histogram"),
                 ("zipccl fixed", "compress/fixed", "decompress/fixed"),
                 ("zstd level 1", "zstd1/compress", "zstd1/decompress"),
                 ("zstd level 3", "zstd3/compress", "zstd3/decompress")]
        for label, c, d in names:
            if c not in r or d not in r:
                continue
            cb, db = r[c], r[d]
            print(f"| {label} | {cb['ratio']:.4f} | {cb['of_ideal']:.3f} | {cb['bytes_per_second'] / 1e9:.2f} | "
                  f"{cb['bytes_per_second'] / memcpy:.2f} | {db['bytes_per_second'] / 1e9:.2f} | "
                  f"{db['bytes_per_second'] / memcpy:.2f} |")
        if memcpy:
            print(f"| memcpy | 1 | | {memcpy / 1e9:.2f} | 1.00 | | |")


if __name__ == "__main__":
    main(sys.argv[1])
