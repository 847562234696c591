#!/usr/bin/env python3
"""Turns nvcc's -Xptxas=-v output (a build log) into a kernel resource table
(docs/design.md, "Kernel resources"): registers, shared memory, stack frame and spills per kernel
and architecture.

usage: touch tests/cuda/test_cuda_codec.cu
       cmake --build --preset default --target test_cuda_codec > build.log 2>&1
       scripts/kernel_resources.py build.log
"""
import re
import subprocess
import sys


def main(path):
    rows, cur, frame = [], None, None
    for line in open(path):
        m = re.search(r"Compiling entry function '(\w+)' for '(sm_\d+)'", line)
        if m:
            cur, frame = m.groups(), None
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur:
            frame = tuple(int(x) for x in m.groups())
            continue
        m = re.search(r"Used (\d+) registers.*?(\d+) bytes smem", line)
        if m and cur:
            rows.append((cur[1], cur[0], int(m.group(1)), int(m.group(2)), frame or (0, 0, 0)))
            cur = None
    names = subprocess.run(["c++filt"], input="\n".join(r[1] for r in rows), capture_output=True,
                           text=True).stdout.splitlines()
    out = set()
    for (arch, _, reg, smem, frame), name in zip(rows, names):
        if "zipccl::cuda::detail" not in name:
            continue
        name = re.sub(r"zipccl::(cuda::detail::|codebook::|)", "", name)
        name = re.sub(r"\(.*\)$", "", name).replace("void ", "").replace("cuda::tuning<256, 32>", "tuning<256,32>")
        out.add(f"| {arch} | `{name.strip()}` | {reg} | {smem} | {frame[0]} | {frame[1]} |")
    print("| arch | kernel | registers | static smem (B) | stack frame (B) | spill stores (B) |")
    print("|---|---|---:|---:|---:|---:|")
    print("\n".join(sorted(out)))


if __name__ == "__main__":
    main(sys.argv[1])
