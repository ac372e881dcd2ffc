#!/usr/bin/env python3
"""Writes automaton/unicode_tables.cc: the General_Category and Script codepoint
sets behind \\p{...} and the simple case folding orbits behind (?i), read from
the Unicode Character Database files that Debian's `unicode-data` package
installs in /usr/share/unicode/. The build does not run this: the generated
file is committed. To regenerate:

  apt-get install unicode-data
  python3 automaton/gen_unicode_tables.py > automaton/unicode_tables.cc
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

MAX = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)

Ranges = list[tuple[int, int]]


def to_ranges(cps: set[int]) -> Ranges:
    out: list[list[int]] = []
    for c in sorted(cps):
        if out and out[-1][1] + 1 == c:
            out[-1][1] = c
        else:
            out.append([c, c])
    return [(lo, hi) for lo, hi in out]


def loose_key(name: str) -> str:
    """UAX44-LM3 without the "is" prefix rule: case, spaces, '_' and '-' ignored."""
    return re.sub(r"[ _\-]", "", name).lower()


def data_lines(path: Path) -> list[list[str]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            rows.append([f.strip() for f in line.split(";")])
    return rows


def parse_cps(field: str) -> range:
    if ".." in field:
        lo, hi = field.split("..")
        return range(int(lo, 16), int(hi, 16) + 1)
    return range(int(field, 16), int(field, 16) + 1)


def ucd_version(directory: Path) -> str:
    first = (directory / "Scripts.txt").read_text(encoding="utf-8").splitlines()[0]
    m = re.match(r"# Scripts-(\d+\.\d+\.\d+)\.txt", first)
    if not m:
        sys.exit(f"cannot read the UCD version from {directory / 'Scripts.txt'}")
    return m.group(1)


def general_categories(directory: Path) -> dict[str, set[int]]:
    """Codepoint sets of the 30 two-letter categories, Cn included."""
    cats: dict[str, set[int]] = {}
    first: int | None = None
    for fields in data_lines(directory / "UnicodeData.txt"):
        cp, name, gc = int(fields[0], 16), fields[1], fields[2]
        if name.endswith(", First>"):
            first = cp
            continue
        lo = first if name.endswith(", Last>") else cp
        first = None
        cats.setdefault(gc, set()).update(range(lo, cp + 1))
    assigned = set().union(*cats.values())
    cats["Cn"] = set(range(MAX + 1)) - assigned
    return cats


def property_value_aliases(directory: Path, prop: str) -> list[list[str]]:
    """Each value of `prop` as [short, long, other aliases...]."""
    out = []
    for fields in data_lines(directory / "PropertyValueAliases.txt"):
        if fields[0] == prop:
            out.append(fields[1:])
    return out


def scripts(directory: Path) -> dict[str, set[int]]:
    by_long: dict[str, set[int]] = {}
    for fields in data_lines(directory / "Scripts.txt"):
        by_long.setdefault(fields[1], set()).update(parse_cps(fields[0]))
    return by_long


def case_orbits(directory: Path) -> list[list[int]]:
    """Classes of codepoints with the same simple case folding (statuses C, S)."""
    fold: dict[int, int] = {}
    for fields in data_lines(directory / "CaseFolding.txt"):
        if fields[1] in ("C", "S"):
            fold[int(fields[0], 16)] = int(fields[2], 16)
    classes: dict[int, set[int]] = {}
    for cp, target in fold.items():
        classes.setdefault(target, {target}).add(cp)
    return sorted(sorted(c) for c in classes.values())


def without_surrogates(cps: set[int]) -> set[int]:
    return {c for c in cps if not SURROGATES[0] <= c <= SURROGATES[1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ucd", default="/usr/share/unicode", type=Path)
    args = ap.parse_args()
    ucd: Path = args.ucd
    version = ucd_version(ucd)

    cats = general_categories(ucd)
    groups = {
        "C": ["Cc", "Cf", "Cn", "Co", "Cs"],
        "L": ["Ll", "Lm", "Lo", "Lt", "Lu"],
        "LC": ["Ll", "Lt", "Lu"],
        "M": ["Mc", "Me", "Mn"],
        "N": ["Nd", "Nl", "No"],
        "P": ["Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps"],
        "S": ["Sc", "Sk", "Sm", "So"],
        "Z": ["Zl", "Zp", "Zs"],
    }
    for g, members in groups.items():
        cats[g] = set().union(*(cats.get(m, set()) for m in members))

    # (key, display name, codepoints) per property value, one entry per alias.
    gc_entries: list[tuple[str, str, set[int]]] = []
    for aliases in property_value_aliases(ucd, "gc"):
        cps = without_surrogates(cats[aliases[0]])
        names = aliases + (["L&"] if aliases[0] == "LC" else [])
        for n in names:
            gc_entries.append((loose_key(n), aliases[0], cps))

    sc_sets = scripts(ucd)
    in_some_script = set().union(*sc_sets.values())
    sc_entries: list[tuple[str, str, set[int]]] = []
    for aliases in property_value_aliases(ucd, "sc"):
        short, long = aliases[0], aliases[1]
        if long == "Unknown":
            cps = set(range(MAX + 1)) - in_some_script
        else:
            cps = sc_sets.get(long, set())  # Katakana_Or_Hiragana has none
        cps = without_surrogates(cps)
        for n in aliases:
            sc_entries.append((loose_key(n), long, cps))

    # Pool identical range lists (aliases share theirs).
    pool: list[tuple[int, int]] = []
    offsets: dict[tuple[tuple[int, int], ...], int] = {}

    def place(cps: set[int]) -> tuple[int, int]:
        rs = tuple(to_ranges(cps))
        if rs not in offsets:
            offsets[rs] = len(pool)
            pool.extend(rs)
        return offsets[rs], len(rs)

    def table(entries: list[tuple[str, str, set[int]]]) -> list[tuple[str, str, int, int]]:
        seen: dict[str, str] = {}
        rows = []
        for key, display, cps in entries:
            if key in seen:
                if seen[key] != display:
                    sys.exit(f"loose key {key!r} names both {seen[key]} and {display}")
                continue
            seen[key] = display
            begin, size = place(cps)
            rows.append((key, display, begin, size))
        return sorted(rows)

    gc_rows = table(gc_entries)
    sc_rows = table(sc_entries)
    clash = {k for k, *_ in gc_rows} & {k for k, *_ in sc_rows}
    if clash:
        sys.exit(f"names both a General_Category and a Script value: {sorted(clash)}")

    orbits = case_orbits(ucd)
    links = []
    for orbit in orbits:
        for i, cp in enumerate(orbit):
            links.append((cp, orbit[(i + 1) % len(orbit)]))
    links.sort()

    w = sys.stdout.write
    w(f"// Generated by automaton/gen_unicode_tables.py from the Unicode Character Database\n")
    w(f"// {version} (Debian package unicode-data: UnicodeData.txt, Scripts.txt,\n")
    w(f"// PropertyValueAliases.txt, CaseFolding.txt): do not edit.\n")
    w('#include "automaton/unicode_tables.h"\n\nnamespace maskd::unicode {\n\n')
    w(f'const char kUcdVersion[] = "{version}";\n\n')
    w("const Range kRanges[] = {\n")
    line = "  "
    for lo, hi in pool:
        item = f"{{0x{lo:X}, 0x{hi:X}}}, "
        if len(line) + len(item) > 100:
            w(line.rstrip() + "\n")
            line = "  "
        line += item
    w(line.rstrip() + "\n};\n")
    w(f"const size_t kRangesSize = {len(pool)};\n\n")
    for name, rows in (("kGeneralCategory", gc_rows), ("kScript", sc_rows)):
        w(f"const PropertyValue {name}[] = {{\n")
        for key, display, begin, size in rows:
            w(f'  {{"{key}", "{display}", {begin}, {size}}},\n')
        w(f"}};\nconst size_t {name}Size = {len(rows)};\n\n")
    w("const OrbitLink kCaseOrbit[] = {\n")
    line = "  "
    for cp, nxt in links:
        item = f"{{0x{cp:X}, 0x{nxt:X}}}, "
        if len(line) + len(item) > 100:
            w(line.rstrip() + "\n")
            line = "  "
        line += item
    w(line.rstrip() + "\n};\n")
    w(f"const size_t kCaseOrbitSize = {len(links)};\n\n}}  // namespace maskd::unicode\n")


if __name__ == "__main__":
    main()
