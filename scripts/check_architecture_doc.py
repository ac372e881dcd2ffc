#!/usr/bin/env python3
"""Checks docs/architecture.md against the code it pictures.

Three things in the document are checked (ctest `check_architecture_doc`):
  * the layer diagram between `<!-- layers:begin -->` and `<!-- layers:end -->`
    is exactly what `diagram()` draws from scripts/check_layers.py's LAYERS and
    ORDER (the table the include check enforces); `--write` redraws it;
  * every layer has a `### \\`name/\\`` section, and no section names a
    layer that does not exist;
  * every row of the request-path table (between `<!-- path:begin -->` and
    `<!-- path:end -->`) names a file that exists and a symbol found in it
    (for `A::B`, both `A` and `B` as words).

Usage:
  scripts/check_architecture_doc.py [--root DIR] [--write]
  scripts/check_architecture_doc.py --self-test
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_layers import LAYERS, ORDER  # noqa: E402

DOC = "docs/architecture.md"
LAYERS_BEGIN, LAYERS_END = "<!-- layers:begin -->", "<!-- layers:end -->"
PATH_BEGIN, PATH_END = "<!-- path:begin -->", "<!-- path:end -->"
HEADING_RE = re.compile(r"^### `([a-z_]+)/`", re.M)
# | step | `file` | `Symbol` | ...
PATH_ROW_RE = re.compile(r"^\|[^|]*\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|", re.M)


def diagram(layers: dict[str, tuple[str, ...]] = LAYERS,
            order: tuple[tuple[str, ...], ...] = ORDER) -> str:
    """The floors, highest first; each layer with the layers it may include directly."""
    width = max(len(name) for name in layers) + 1
    lines = ["```text", "floor  layer        may include directly"]
    for floor in range(len(order) - 1, -1, -1):
        for i, name in enumerate(order[floor]):
            deps = ", ".join(f"{d}/" for d in layers[name]) or "(nothing)"
            label = f"{floor:>5}" if i == 0 else " " * 5
            lines.append(f"{label}  {name + '/':<{width + 1}}  {deps}")
        if floor > 0:
            lines.append("       " + "-" * (width + 24))
    lines.append("```")
    return "\n".join(lines)


def between(text: str, begin: str, end: str) -> str | None:
    if begin not in text or end not in text.split(begin, 1)[1]:
        return None
    return text.split(begin, 1)[1].split(end, 1)[0]


def symbol_in(symbol: str, source: str) -> bool:
    return all(re.search(rf"\b{re.escape(part)}\b", source) for part in symbol.split("::"))


def check(root: Path, layers: dict[str, tuple[str, ...]] = LAYERS,
          order: tuple[tuple[str, ...], ...] = ORDER) -> list[str]:
    doc = root / DOC
    if not doc.is_file():
        return [f"{DOC}: missing"]
    text = doc.read_text(encoding="utf-8")
    problems: list[str] = []
    drawn = between(text, LAYERS_BEGIN, LAYERS_END)
    if drawn is None:
        problems.append(f"{DOC}: no {LAYERS_BEGIN} ... {LAYERS_END} block")
    elif drawn.strip() != diagram(layers, order):
        problems.append(f"{DOC}: the layer diagram differs from scripts/check_layers.py "
                        f"(redraw: scripts/check_architecture_doc.py --write); expected:\n"
                        f"{diagram(layers, order)}")
    sections = HEADING_RE.findall(text)
    for name in layers:
        if name not in sections:
            problems.append(f"{DOC}: no '### `{name}/`' section for layer {name}")
    for name in sections:
        if name not in layers:
            problems.append(f"{DOC}: section '### `{name}/`' names no layer")
    path = between(text, PATH_BEGIN, PATH_END)
    rows = PATH_ROW_RE.findall(path or "")
    if not rows:
        problems.append(f"{DOC}: no request-path table between {PATH_BEGIN} and {PATH_END}")
    for file, symbol in rows:
        source = root / file
        if not source.is_file():
            problems.append(f"{DOC}: request path names {file}, which does not exist")
        elif not symbol_in(symbol, source.read_text(encoding="utf-8", errors="replace")):
            problems.append(f"{DOC}: request path names {symbol} in {file}, which is not there")
    return problems


def write(root: Path) -> None:
    doc = root / DOC
    text = doc.read_text(encoding="utf-8")
    head, rest = text.split(LAYERS_BEGIN, 1)
    tail = rest.split(LAYERS_END, 1)[1]
    doc.write_text(f"{head}{LAYERS_BEGIN}\n{diagram()}\n{LAYERS_END}{tail}", encoding="utf-8")


def self_test() -> int:
    """check() on fake trees; 0 when each tampering is caught and the good tree passes."""
    layers = {"low": (), "mid": ("low",), "top": ("mid",)}
    order = (("low",), ("mid",), ("top",))
    good = (f"# A\n{LAYERS_BEGIN}\n{diagram(layers, order)}\n{LAYERS_END}\n"
            "### `low/`\nx\n### `mid/`\ny\n### `top/`\nz\n"
            f"{PATH_BEGIN}\n| step | file | symbol |\n| --- | --- | --- |\n"
            f"| 1 | `top/a.cc` | `Top::Run` |\n{PATH_END}\n")
    cases = {
        "good": (good, 0),
        "stale diagram": (good.replace("mid/", "middle/", 1), 1),
        "missing section": (good.replace("### `top/`\nz\n", ""), 1),
        "extra section": (good + "### `gone/`\n", 1),
        "missing symbol": (good.replace("Top::Run", "Top::Walk"), 1),
        "missing file": (good.replace("top/a.cc", "top/b.cc"), 1),
    }
    failures = []
    for name, (text, want) in cases.items():
        root = Path(tempfile.mkdtemp(prefix="check_arch_"))
        (root / "docs").mkdir()
        (root / "top").mkdir()
        (root / "top/a.cc").write_text("void Top::Run() {}\n")
        (root / DOC).write_text(text)
        got = len(check(root, layers, order))
        if (got > 0) != (want > 0):
            failures.append(f"{name}: {got} problem(s), wanted {want}")
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    if not failures:
        print("check_architecture_doc self-test: ok")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--write", action="store_true", help="redraw the layer diagram")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if args.write:
        write(args.root)
    problems = check(args.root)
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"check_architecture_doc: ok ({DOC})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
