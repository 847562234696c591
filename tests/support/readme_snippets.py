#!/usr/bin/env python3
"""Writes each C++ code block of a Markdown file to a translation unit of its own.

Usage: readme_snippets.py README.md OUTDIR. A block fenced with ```cpp becomes OUTDIR/snippet_N.cpp,
or OUTDIR/snippet_N.cu where its first line says it is a .cu file. A file is rewritten only when its
text changes (the build then recompiles only what changed); files of blocks that no longer exist
are removed. Prints the paths written, one per line, for CMake.
"""
import pathlib
import re
import sys

FENCE = re.compile(r"^```cpp\n(.*?)^```", re.M | re.S)


def main() -> int:
    source, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    wanted = []
    for n, block in enumerate(FENCE.findall(source.read_text())):
        first = block.splitlines()[0] if block else ""
        path = out / f"snippet_{n}{'.cu' if '.cu file' in first else '.cpp'}"
        if not path.exists() or path.read_text() != block:
            path.write_text(block)
        wanted.append(path)
    for old in out.glob("snippet_*"):
        if old not in wanted:
            old.unlink()
    print(";".join(str(p) for p in wanted), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
