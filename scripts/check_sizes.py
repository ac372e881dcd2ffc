#!/usr/bin/env python3
"""Checks that maskd's code stays in pieces a reader can hold (issue #25).

  * functions (product code: every layer folder, i.e. not tests/, bench/,
    fuzz/): none longer than MAX_FUNCTION_LINES, at most MAX_LONG_FUNCTIONS
    longer than LONG_FUNCTION_LINES. Length is lizard's: the lines from the
    signature to the closing brace, comments and blank lines included.
  * files (every hand-written C++, CUDA and Python source under git, tests
    and benchmarks included): none longer than MAX_FILE_LINES. A file whose
    first lines say it is generated ("Generated ... do not edit") is exempt.

lizard (PyPI, a well-kept analyzer for C/C++ and a dozen other languages)
parses the functions; it is in tests/python/requirements.txt and this check
runs from the Python tests (test_code_sizes.py).

Usage:
  scripts/check_sizes.py [--root DIR]    # exit 1 and one line per excess
  scripts/check_sizes.py --report N      # also list functions longer than N
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

MAX_FUNCTION_LINES = 200
LONG_FUNCTION_LINES = 120
MAX_LONG_FUNCTIONS = 5
MAX_FILE_LINES = 800

CPP_SUFFIXES = (".cc", ".h", ".cu", ".cuh", ".inc")
SOURCE_SUFFIXES = CPP_SUFFIXES + (".py",)
NOT_PRODUCT = ("tests/", "bench/", "fuzz/")
GENERATED_MARKS = ("generated", "do not edit")


@dataclass(frozen=True)
class Function:
    path: str
    line: int
    name: str
    length: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name}: {self.length} lines"


def tracked_sources(root: Path) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True)
    names = [n for n in out.stdout.decode().split("\0") if n.endswith(SOURCE_SUFFIXES)]
    return sorted(n for n in names if (root / n).is_file())


def is_generated(text: str) -> bool:
    head = "\n".join(text.split("\n", 5)[:5]).lower()
    return all(mark in head for mark in GENERATED_MARKS)


def long_files(root: Path, names: list[str]) -> list[str]:
    problems = []
    for name in names:
        text = (root / name).read_text(encoding="utf-8", errors="replace")
        lines = text.count("\n")
        if lines > MAX_FILE_LINES and not is_generated(text):
            problems.append(f"{name}: {lines} lines (at most {MAX_FILE_LINES} per hand-written file)")
    return problems


def product_functions(root: Path, names: list[str]) -> list[Function]:
    import lizard  # type: ignore[import-untyped]

    functions = []
    for name in names:
        if not name.endswith(CPP_SUFFIXES) or name.startswith(NOT_PRODUCT):
            continue
        text = (root / name).read_text(encoding="utf-8", errors="replace")
        if is_generated(text):
            continue
        info = lizard.analyze_file.analyze_source_code(name, text)
        for f in info.function_list:
            functions.append(Function(name, f.start_line, f.name, f.length))
    return functions


def function_problems(functions: list[Function]) -> list[str]:
    problems = [f"{f}: longer than {MAX_FUNCTION_LINES}"
                for f in functions if f.length > MAX_FUNCTION_LINES]
    long = sorted((f for f in functions if f.length > LONG_FUNCTION_LINES),
                  key=lambda f: -f.length)
    if len(long) > MAX_LONG_FUNCTIONS:
        problems.append(f"{len(long)} functions longer than {LONG_FUNCTION_LINES} lines "
                        f"(at most {MAX_LONG_FUNCTIONS}):")
        problems += [f"  {f}" for f in long]
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--report", type=int, metavar="N",
                        help="also list product functions longer than N lines")
    args = parser.parse_args()
    names = tracked_sources(args.root)
    functions = product_functions(args.root, names)
    problems = long_files(args.root, names) + function_problems(functions)
    if args.report is not None:
        for f in sorted(functions, key=lambda f: -f.length):
            if f.length > args.report:
                print(f)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    long = sum(1 for f in functions if f.length > LONG_FUNCTION_LINES)
    longest = max(functions, key=lambda f: f.length)
    print(f"check_sizes: ok ({len(functions)} functions, {long} over {LONG_FUNCTION_LINES} lines, "
          f"the longest {longest}; {len(names)} files at most {MAX_FILE_LINES} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
