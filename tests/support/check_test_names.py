#!/usr/bin/env python3
"""Fails where a Catch2 test case or section name would crash Catch2 2.13's console reporter.

Catch2 2.13 prints a failing test's name (and its sections') as a header whose continuation lines
are indented to just after the name's first ": ". Where that indent reaches the console's width
(CATCH_CONFIG_CONSOLE_WIDTH, 80 by default) the reporter throws std::out_of_range, and the run
ends in std::terminate without the failure's message. This script finds, in every test source
under the directory given, each TEST_CASE, TEMPLATE_TEST_CASE, TEMPLATE_LIST_TEST_CASE and SECTION
name (adjacent string literals joined) whose first ": " ends past column LIMIT, and exits 1 if
there is one.
"""
import pathlib
import re
import sys

LIMIT = 70  # (the header's indent, plus a section's own indent of 2, stays well inside 79 columns)
MACRO = re.compile(r'\b(TEST_CASE|TEMPLATE_TEST_CASE|TEMPLATE_LIST_TEST_CASE|SECTION)\s*\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)')
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


def names(text):
    for m in MACRO.finditer(text):
        yield m.group(1), "".join(LITERAL.findall(m.group(2))), text.count("\n", 0, m.start()) + 1


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad = 0
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".cpp", ".cu", ".hpp", ".cuh")):
        for macro, name, line in names(path.read_text(encoding="utf-8", errors="replace")):
            at = name.find(": ")
            if at >= 0 and at + 2 > LIMIT:
                print(f"{path}:{line}: {macro} name's first ': ' ends at column {at + 2} (> {LIMIT}): {name!r}")
                bad += 1
    if bad:
        print(f"{bad} name(s) would crash Catch2's reporter when their test fails; move the ': ' earlier")
        return 1
    print("test names: every ': ' within", LIMIT, "columns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
