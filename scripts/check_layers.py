#!/usr/bin/env python3
"""Checks that maskd's layers include one another in one direction only.

Every `#include "x/..."` (or `<x/...>`) in the C++ and CUDA sources of a
layer folder must name the layer itself or a layer it may depend on
(LAYERS below, transitively). Run from the default test suite (ctest
`check_layers`, label unit); `--self-test` checks the checker on fake trees.

Usage:
  scripts/check_layers.py [--root DIR]   # exit 1 and one line per violation
  scripts/check_layers.py --self-test
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Layer -> the layers its sources may include directly (lowest first). A
# layer may also include whatever those may, transitively. Sibling layers
# (kernels and shm; json and automaton; index and grammar) know nothing of
# each other.
LAYERS: dict[str, tuple[str, ...]] = {
    # Checks on untrusted JSON text before any parse (schema/ and the
    # tokenizer loader in tokenizer/ both use them).
    "json": (),
    # Regex parsing, Unicode tables, NFA/DFA construction and minimisation;
    # the Interrupt that long work polls.
    "automaton": (),
    # JSON Schema -> regex.
    "schema": ("automaton", "json"),
    # Tokenizer loading (vocabulary data: token bytes, specials, EOS ids) and
    # what every index over a vocabulary shares: the tokenizer context (token
    # trie, loop-mask memo keyed by DFA loops) and the mask budget.
    "tokenizer": ("automaton", "json"),
    # Regular constraints over a vocabulary: token index, guide.
    "index": ("tokenizer",),
    # Context-free grammars over a vocabulary and automata. A sibling of
    # index: it never includes it.
    "grammar": ("tokenizer",),
    # Every kind of constraint behind one compile entry point.
    "constraint": ("grammar", "index", "schema"),
    # Applying masks to logits: knows nothing of tokens or constraints.
    "kernels": (),
    # Shared-memory regions: knows nothing of tokens or constraints.
    "shm": (),
    # Generated protobuf/gRPC code, included as "maskd/v1/...".
    "proto": (),
    # The gRPC services.
    "service": ("constraint", "kernels", "shm", "proto"),
    # The client library (C++): the wire and the shared-memory helpers.
    "client": ("shm", "proto"),
    # maskctl.
    "tools": ("constraint", "kernels", "client"),
}

# Layers reachable through LAYERS that a layer must still not include
# directly: the service knows how a constraint is compiled only through
# constraint/ (it includes tokenizer/ for vocabularies and automaton/ for
# interrupt.h, nothing of the routes).
NOT_DIRECTLY: dict[str, tuple[str, ...]] = {
    "service": ("schema", "index", "grammar"),
}

# The order the edges above must respect, lowest first; layers in one group
# are peers. check() refuses a LAYERS edge that does not point downwards.
ORDER: tuple[tuple[str, ...], ...] = (
    ("json", "automaton"),
    ("schema", "tokenizer"),
    ("index", "grammar"),
    ("constraint",),
    ("kernels", "shm"),
    ("proto",),
    ("service",),
    ("client",),
    ("tools",),
)

# The include prefix of each layer when it is not the layer's folder name.
PREFIX_LAYER: dict[str, str] = {"maskd": "proto"}

# The folders scanned, one per layer (proto/ holds .proto files only).
SCANNED: tuple[str, ...] = tuple(name for name in LAYERS if name != "proto")

# Includes that break the order and are allowed for now, as
# (including file, included path) with the reason. Empty: none today.
EXCEPTIONS: dict[tuple[str, str], str] = {}

SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".cuh", ".inc")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*["<]([^">]+)[">]')


@dataclass(frozen=True)
class Violation:
    path: str  # relative to the root
    line: int  # 1-based
    included: str
    message: str

    def __str__(self) -> str:
        return f'{self.path}:{self.line}: #include "{self.included}": {self.message}'


def check_order(layers: dict[str, tuple[str, ...]], order: tuple[tuple[str, ...], ...]) -> None:
    """ValueError unless every layer is ranked once and every edge points to a lower rank."""
    rank = {name: i for i, group in enumerate(order) for name in group}
    if sorted(rank) != sorted(layers) or sum(len(g) for g in order) != len(rank):
        raise ValueError(f"ORDER ranks {sorted(rank)}, LAYERS names {sorted(layers)}")
    for name, deps in layers.items():
        for dep in deps:
            if rank[dep] >= rank[name]:
                raise ValueError(f"edge {name} -> {dep} does not point to a lower layer")


def allowed_layers(layers: dict[str, tuple[str, ...]]) -> dict[str, set[str]]:
    """Each layer's reachable set (itself included); ValueError on a cycle or an unknown name."""
    closure: dict[str, set[str]] = {}
    visiting: set[str] = set()

    def visit(name: str) -> set[str]:
        if name not in layers:
            raise ValueError(f"unknown layer {name!r}")
        if name in closure:
            return closure[name]
        if name in visiting:
            raise ValueError(f"layer cycle through {name!r}")
        visiting.add(name)
        reach = {name}
        for dep in layers[name]:
            reach |= visit(dep)
        visiting.discard(name)
        closure[name] = reach
        return reach

    for name in layers:
        visit(name)
    return closure


def strip_block_comments(text: str) -> str:
    """`text` with /* ... */ comments blanked, line breaks kept."""
    return re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)


def check(
    root: Path,
    layers: dict[str, tuple[str, ...]] = LAYERS,
    scanned: tuple[str, ...] = SCANNED,
    exceptions: dict[tuple[str, str], str] = EXCEPTIONS,
    prefix_layer: dict[str, str] = PREFIX_LAYER,
    not_directly: dict[str, tuple[str, ...]] = NOT_DIRECTLY,
) -> list[Violation]:
    reach = allowed_layers(layers)
    root_dirs = {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")}
    violations: list[Violation] = []
    for layer in scanned:
        folder = root / layer
        if not folder.is_dir():
            violations.append(Violation(layer, 0, "", f"layer folder {layer}/ is missing"))
            continue
        for path in sorted(folder.rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            text = strip_block_comments(path.read_text(encoding="utf-8", errors="replace"))
            for lineno, line in enumerate(text.split("\n"), start=1):
                m = INCLUDE_RE.match(line)
                if m is None or "/" not in m.group(1):
                    continue
                included = m.group(1)
                prefix = included.split("/", 1)[0]
                target = prefix_layer.get(prefix, prefix)
                if (rel, included) in exceptions:
                    continue
                if target in layers:
                    if target in not_directly.get(layer, ()):
                        violations.append(Violation(
                            rel, lineno, included,
                            f"layer {layer} may reach layer {target} only through "
                            f"{', '.join(layers[layer])}"))
                    elif target not in reach[layer]:
                        below = ", ".join(sorted(reach[layer] - {layer})) or "no other layer"
                        violations.append(Violation(
                            rel, lineno, included,
                            f"layer {layer} may not include layer {target} "
                            f"({layer} may include: {below})"))
                elif prefix in root_dirs:
                    violations.append(Violation(
                        rel, lineno, included, f"{prefix}/ is not a layer that {layer} may include"))
    return violations


def self_test() -> int:
    """Runs check() on fake trees; 0 when every expectation holds."""
    failures: list[str] = []

    def tree(files: dict[str, str]) -> Path:
        base = Path(tempfile.mkdtemp(prefix="check_layers_"))
        for layer in SCANNED:
            (base / layer).mkdir()
        (base / "tests").mkdir()
        for rel, body in files.items():
            p = base / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(body)
        return base

    def expect(name: str, files: dict[str, str], want: list[tuple[str, int, str]],
               exceptions: dict[tuple[str, str], str] | None = None) -> None:
        got = check(tree(files), exceptions=exceptions if exceptions is not None else {})
        got_keys = [(v.path, v.line, v.included) for v in got]
        if got_keys != want:
            failures.append(f"{name}: want {want}, got {[str(v) for v in got]}")

    clean = {
        "automaton/dfa.h": '#include "absl/status/status.h"\n#include "automaton/regex.h"\n',
        "schema/s.cc": '#include "schema/s.h"\n#include "automaton/dfa.h"\n#include "json/json_scan.h"\n',
        "tokenizer/v.cc": '#include "tokenizer/v.h"\n#include "json/json_scan.h"\n',
        "tokenizer/t.h": '#include "automaton/dfa.h"\n#include "tokenizer/v.h"\n',
        "index/i.h": '#include <vector>\n#include "automaton/dfa.h"\n#include "tokenizer/v.h"\n',
        "grammar/g.cc": '#include "grammar/g.h"\n#include "tokenizer/t.h"\n#include "automaton/dfa.h"\n',
        "constraint/c.cc": '#include "schema/s.h"\n#include "index/i.h"\n#include "automaton/dfa.h"\n',
        "service/v.cc": '#include "maskd/v1/maskd.pb.h"\n#include "constraint/c.h"\n#include "shm/r.h"\n',
        "kernels/k.cu": '#include "kernels/k.h"\n',
    }
    expect("clean tree", clean, [])
    expect("lower includes higher",
           {**clean, "automaton/nfa.cc": '#include "automaton/dfa.h"\n\n#include "tokenizer/token_trie.h"\n'},
           [("automaton/nfa.cc", 3, "tokenizer/token_trie.h")])
    expect("tokenizer includes index", {"tokenizer/v.cc": '#include "index/token_index.h"\n'},
           [("tokenizer/v.cc", 1, "index/token_index.h")])
    expect("sibling: automaton includes json", {"automaton/a.cc": '#include "json/json_scan.h"\n'},
           [("automaton/a.cc", 1, "json/json_scan.h")])
    expect("sibling: grammar includes index", {"grammar/g.h": '#include "index/token_index.h"\n'},
           [("grammar/g.h", 1, "index/token_index.h")])
    expect("sibling: index includes grammar", {"index/i.cc": '#include "grammar/grammar.h"\n'},
           [("index/i.cc", 1, "grammar/grammar.h")])
    expect("tokenizer includes schema", {"tokenizer/v.cc": '#include "schema/json_schema.h"\n'},
           [("tokenizer/v.cc", 1, "schema/json_schema.h")])
    expect("sibling: schema includes tokenizer", {"schema/s.cc": '#include "tokenizer/vocabulary.h"\n'},
           [("schema/s.cc", 1, "tokenizer/vocabulary.h")])
    expect("schema includes index", {"schema/x.h": '// x\n#include "index/token_index.h"\n'},
           [("schema/x.h", 2, "index/token_index.h")])
    expect("sibling: kernels includes shm", {"kernels/a.cc": '#include "shm/region.h"\n'},
           [("kernels/a.cc", 1, "shm/region.h")])
    expect("client includes service", {"client/c.cc": '#include "service/log.h"\n'},
           [("client/c.cc", 1, "service/log.h")])
    expect("generated proto from index", {"index/p.cc": '#include "maskd/v1/maskd.pb.h"\n'},
           [("index/p.cc", 1, "maskd/v1/maskd.pb.h")])
    expect("a non-layer folder of the tree", {"index/t.cc": '#include "tests/index/test_util.h"\n'},
           [("index/t.cc", 1, "tests/index/test_util.h")])
    expect("angle brackets and spaces", {"grammar/g.h": '#  include <constraint/compile.h>\n'},
           [("grammar/g.h", 1, "constraint/compile.h")])
    expect("service reaches index only through constraint",
           {"service/s.cc": '#include "constraint/compile.h"\n#include "index/token_index.h"\n'},
           [("service/s.cc", 2, "index/token_index.h")])
    expect("commented out", {"automaton/a.cc": '// #include "index/x.h"\n/*\n#include "index/y.h"\n*/\n'},
           [])
    expect("explicit exception",
           {"grammar/g.cc": '#include "constraint/compile.h"\n#include "service/log.h"\n'},
           [("grammar/g.cc", 2, "service/log.h")],
           exceptions={("grammar/g.cc", "constraint/compile.h"): "self-test"})
    try:
        allowed_layers({"a": ("b",), "b": ("a",)})
        failures.append("cycle: no error")
    except ValueError:
        pass
    try:
        check_order({"a": (), "b": ("a",), "c": ("b",)}, (("a",), ("b", "c")))
        failures.append("edge between peers: no error")
    except ValueError:
        pass
    try:
        check_order(LAYERS, ORDER)
    except ValueError as e:
        failures.append(f"LAYERS against ORDER: {e}")
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    if not failures:
        print("check_layers self-test: ok")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--self-test", action="store_true", help="check the checker on fake trees")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    check_order(LAYERS, ORDER)
    violations = check(args.root)
    for v in violations:
        print(v, file=sys.stderr)
    if violations:
        print(f"check_layers: {len(violations)} include(s) against the layer order", file=sys.stderr)
        return 1
    order = " < ".join("{" + ", ".join(g) + "}" if len(g) > 1 else g[0] for g in ORDER)
    print(f"check_layers: ok ({order}; {len(EXCEPTIONS)} exceptions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
