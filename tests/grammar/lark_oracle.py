#!/usr/bin/env python3
"""Differential test of maskd's Lark front end against the Python lark library.

lark.Lark(g, parser="earley", lexer="dynamic_complete") is the oracle; maskd's
side is build/bin/lark_accepts (ParseLark + the reference Earley recognizer,
and the engine's incremental parser, which must agree with it: a "D" line).
Four parts (docs/grammars.md, "Lark", "Tests"):
  1. texts: for each grammar below, texts sampled from maskd's side, seed
     texts, their mutations and splices, random strings; acceptance compared;
  2. --regexes N: random Python regexes as `start: /P/flags` against
     re.fullmatch of the pattern lark compiles;
  3. --grammars N: mutated grammars: both load or both refuse, and agree on
     texts where both load;
  4. --common N: each of lark's common terminals alone;
  5. --engine-samples N: texts the token-mask engine generates (`maskctl
     sample --grammar`: uniform walks over GrammarGuide's masks) on the
     bundled tokenizer and on ../shared/tokenizers/llama2 when present, for
     the grammars above, calls.lark, sql.lark and Outlines' JSON and
     arithmetic grammars (tests/data/grammars): every finished sample must
     be UTF-8 that lark accepts; plus Outlines' CFG samples
     (../shared/corpora/outlines/cfg_samples), which both sides must accept.
Not in the default suite (needs lark from PyPI):

  python3 -m venv ~/.cache/maskd-lark && ~/.cache/maskd-lark/bin/pip install lark
  cmake --build build --target lark_accepts maskctl
  ~/.cache/maskd-lark/bin/python tests/grammar/lark_oracle.py [--count N] [--seed S]

Disagreements recognised as the documented greedy line-comment %ignore
difference are counted apart; any other disagreement on a text, or a driver
crash, makes the exit status 1 (grammars that only one side loads are listed,
not failed: docs/grammars.md lists why).
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from typing import List, Optional, Tuple

import lark

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.normpath(os.path.join(HERE, "../.."))
SHARED_DIR = os.path.normpath(os.path.join(SOURCE_DIR, "../shared"))
# Grammar files of tests/data/grammars sampled with the engine besides GRAMMARS.
ENGINE_GRAMMAR_FILES = ["calls.lark", "sql.lark", "outlines_json.lark", "outlines_arithmetic.lark"]
# Outlines' CFG samples: folder under cfg_samples -> the grammar file they are for.
OUTLINES_SAMPLES = {"json": "outlines_json.lark", "arithmetic": "outlines_arithmetic.lark"}

GRAMMARS = {
    "json": (r'''
?start: value
?value: object | array | string | SIGNED_NUMBER -> number
      | "true" -> true | "false" -> false | "null" -> null
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : string ":" value
string : ESCAPED_STRING
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
''', ['{"a": [1, 2.5e3, -3], "b": {"c": null}}', '[true, false, "x\\"y"]', '{}', '[1.5E-3]',
      '"a\\\\"', '{"k": "v", "l": [[], {}]}']),
    "arithmetic": (r'''
?start: sum
?sum: product | sum "+" product | sum "-" product
?product: atom | product "*" atom | product "/" atom
?atom: NUMBER | "-" atom | NAME | "(" sum ")"
%import common.CNAME -> NAME
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
''', ["1 + 2 * (x - 3.5)", "--x", "a*b/c", "(1)", "1.e5 - .5"]),
    "sql": (r'''
start: select_stmt
select_stmt: SELECT columns FROM NAME [WHERE condition] [ORDER BY NAME (ASC | DESC)?]
columns: "*" | NAME ("," NAME)*
condition: NAME OP value (AND NAME OP value)*
value: NUMBER | STRING
SELECT: "select"i
FROM: "from"i
WHERE: "where"i
ORDER: "order"i
BY: "by"i
ASC: "asc"i
DESC: "desc"i
AND: "and"i
OP: "=" | "<" | ">" | "<=" | ">=" | "!="
NAME: /[a-z_][a-z0-9_]*/
STRING: /'[^']*'/
%import common.NUMBER
%import common.WS
%ignore WS
''', ["SELECT a, b FROM t WHERE a >= 3", "select * from t order by a desc",
      "SeLeCt x FrOm y where z = 'q' and w != 2", "select k from s"]),
    "c_like": (r'''
start: stmt*
?stmt: decl | assign | if_stmt | block
decl: TYPE NAME ["=" expr] ";"
assign: NAME "=" expr ";"
if_stmt: "if" "(" expr ")" stmt ["else" stmt]
block: "{" stmt* "}"
?expr: term (("+" | "-") term)*
?term: factor (("*" | "/") factor)*
?factor: NAME | INT | "(" expr ")"
TYPE.2: "int" | "char"
NAME: /[A-Za-z_]\w*/
%import common.INT
%import common.WS
%import common.C_COMMENT
%import common.CPP_COMMENT
%ignore WS
%ignore C_COMMENT
%ignore CPP_COMMENT
''', ["int x = 1; /* c */ if (x) { x = x * 2; } else y = 3; // done\n", "char c;",
      "{ a = (b + 1) / 2; }", "/**/x=1;/* * / */"]),
    "templates_repeats": (r'''
start: item ~ 2..3 ","? tail
item: LETTER+ | DIGIT ~ 2
tail: "<" sep{NUM, ";"} ">"
sep{x, s}: x (s x)*
NUM: /\d+/
%import common.LETTER
%import common.DIGIT
''', ["ab12c<1;22>", "abc,<1>", "a12<3>"]),
    "regex_flags": (r'''
start: WORD_I (SEP ITEM)* [TAIL]
WORD_I: /[a-z]+k/i
SEP: /\s+/ | ","
ITEM: /\d+(\.\d+)?/ | /x # comment
        [yz]+ /x
TAIL: /e.d/s | "end"i
''', ["abk 12,3.5 yz", "XK", "sk end", "ak,1e\nd", "Ak\u00a012"]),
    "strings_ranges": (r'''
start: (PAIR | ESC | HEX)+
PAIR: "a".."f" "0".."9"
ESC: "\"" | "\\" | /\\"/
HEX: "\x41" | "\u00e9" | /\x42/
''', ['a1"\\', "b2A\u00e9B", 'f9"']),
    "ambiguous": (r'''
start: a+
a: "x" | "xx" | b
b: A A
A: /x+/
%ignore " "
''', ["xxx", "x x", "xxxx x"]),
    "override_extend": (r'''
start: greeting+
greeting: HELLO NAME
HELLO: "hello"
NAME: /[a-z]+/
%override HELLO: "hi" | "hey"i
%extend greeting: "bye" NAME?
%extend NAME: /[0-9]+/
%ignore " "
''', ["hi bob", "HEY 12 bye", "hey x hi y bye", "hello z"]),
    # %ignore in the places the engine's parser treats apart (issue #26):
    # long runs of several ignored terminals, none closed under
    # concatenation; ignored text at both ends and alone; spaces that a real
    # terminal may also take (inside it only: lark's %ignore matches
    # greedily, so an ignore that may also begin or end a terminal is the
    # documented greedy difference).
    "ignore_runs": (r'''
?start: sum
?sum: product | sum "+" product | sum "-" product
?product: atom | product "*" atom
?atom: NUMBER | NAME | "-" atom | "(" sum ")"
%import common.CNAME -> NAME
%import common.NUMBER
%ignore " "
%ignore /\t/
%ignore /\r?\n/
''', ["1 +  2", " \t\n( x\r\n*\t\t-3 )\n\n", "(\n\n\n1\n)", "  a  ", "1\t\t\t\t\t\t\t\t+2"]),
    "ignore_edges": (r'''
start: item*
item: WORD | "[" item* "]"
%import common.WORD
%import common.WS
%ignore WS
''', ["", "   ", " a  b ", "[ ]", "[\n[a]\t] x\n", "a[b]c"]),
    "ignore_overlap": (r'''
start: pair ("," pair)*
pair: KEY "=" VALUE
KEY: /[a-z]+/
VALUE: /[a-z]+( +[a-z]+)*/
%ignore /[ \t]+/
''', ["a = b c  d , e=f", " k=v ", "a=\tb", "x = y z ,w= v"]),
    "outlines_csv": (r'''
start: header _NL row+
header: NAME ("," NAME)*
row: value ("," value)* _NL
value: SIGNED_NUMBER | ESCAPED_STRING | NAME
_NL: /(\r?\n)+/
%import common.CNAME -> NAME
%import common.SIGNED_NUMBER
%import common.ESCAPED_STRING
''', ["a,b\n1,2\n", 'name,age\n"x",3\n\r\nbob,-1.5\n']),
}


def alphabet(grammar, seeds):
    chars = set("".join(seeds)) | set(" \n\t\"\\")
    chars |= {c for c in grammar if c.isprintable()}
    return sorted(chars)


def mutate(rng, text, chars):
    t = list(text)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(4)
        i = rng.randrange(len(t) + 1)
        if op == 0:
            t.insert(i, rng.choice(chars))
        elif op == 1 and t:
            del t[min(i, len(t) - 1)]
        elif op == 2 and t:
            t[min(i, len(t) - 1)] = rng.choice(chars)
        elif t:
            j = rng.randrange(len(t) + 1)
            lo, hi = min(i, j), max(i, j)
            t[lo:lo] = t[lo:hi]
    return "".join(t)


def texts_for(rng, grammar, seeds, count):
    chars = alphabet(grammar, seeds)
    out = list(seeds)
    while len(out) < count:
        r = rng.random()
        if r < 0.6:
            out.append(mutate(rng, rng.choice(seeds), chars))
        elif r < 0.8:
            a, b = rng.choice(seeds), rng.choice(seeds)
            out.append(a[: rng.randrange(len(a) + 1)] + b[rng.randrange(len(b) + 1):])
        else:
            out.append("".join(rng.choice(chars) for _ in range(rng.randint(0, 12))))
    return out


LINE_COMMENT_IGNORES = {"CPP_COMMENT": "//", "SH_COMMENT": "#", "SQL_COMMENT": "--"}


def greedy_ignore_difference(parser, grammar, text):
    """Whether lark rejecting and maskd accepting `text` is the documented
    difference: lark's %ignore of a line comment takes the whole rest of the
    line, maskd's may stop early. It is when ending some such comment early
    with a newline (ignored whitespace in these grammars) makes lark accept:
    that is the reading maskd found."""
    for name, opener in LINE_COMMENT_IGNORES.items():
        if "%%ignore %s" % name not in grammar:
            continue
        i = text.find(opener)
        while i >= 0:
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            for j in range(i + len(opener), end):
                if lark_accepts(parser, text[:j] + "\n" + text[j:]):
                    return True
            i = text.find(opener, i + 1)
    return False


def lark_accepts(parser, text):
    try:
        parser.parse(text)
        return True
    except lark.exceptions.LarkError:
        return False


# Driver output is split on "\n" only: texts may hold U+0085 or U+2028, which
# str.splitlines would also split on.

# Random regexes for the translation check (--regexes N): maskd's reading of
# `start: /P/flags` must be exactly re.fullmatch of the pattern Lark compiles.
RE_CHARS = ["a", "b", "k", "K", "s", "S", "\u017f", "\u212a", "\u00e9", "\u00c9", "0", "7", " ",
            "_", "-", "\\.", "\u0660", "\u00a0", "\\n", "\\t", "\\x41", "\\0"]
RE_CLASSES = ["\\d", "\\w", "\\s", "\\D", "\\W", "\\S", ".", "[ab]", "[^a]", "[a-z]",
              "[\\w-]", "[^\\W\\d]", "[K-k]", "[\u00e9s]", "[]a]", "[\\s\\d]", "[^\\sK]",
              "[0-9a-fA-F]", "[\\x00-\\x7f]", "[\u00c0-\u024f]"]
RE_QUANT = ["", "", "", "*", "+", "?", "{2}", "{,2}", "{1,}", "*?", "{1,2}"]
TEXT_CHARS = ["a", "b", "k", "K", "s", "S", "\u017f", "\u212a", "\u00e9", "\u00c9", "0", "7", " ", "_",
              "-", "\n", "\t", "\u0660", "\u00a0", "x", ".", "A", "\x00", "\u0131", "\u0130", "I", "i"]


def random_regex(rng, depth=0):
    items = []
    for _ in range(rng.randint(1, 3)):
        r = rng.random()
        if r < 0.4:
            atom = rng.choice(RE_CHARS)
        elif r < 0.8 or depth >= 2:
            atom = rng.choice(RE_CLASSES)
        else:
            inner = random_regex(rng, depth + 1)
            if rng.random() < 0.5:
                inner += "|" + random_regex(rng, depth + 1)
            atom = rng.choice(["(%s)", "(?:%s)", "(?i:%s)", "(?s:%s)", "(?-i:%s)"]) % inner
        items.append(atom + rng.choice(RE_QUANT))
    return "".join(items)


def check_regexes(driver, rng, count, texts_per):
    agree = total = matched = refused = limited = 0
    shown = 0
    for _ in range(count):
        pattern = random_regex(rng)
        flags = "".join(f for f in "is" if rng.random() < 0.3)
        grammar = "start: /%s/%s\n" % (pattern, flags)
        try:
            parser = lark.Lark(grammar, parser="earley", lexer="dynamic_complete")
            compiled = re.compile(parser.terminals[0].pattern.to_regexp())
        except Exception:
            compiled = None
        texts = ["".join(rng.choice(TEXT_CHARS) for _ in range(rng.randint(0, 4))) for _ in range(texts_per)]
        with tempfile.NamedTemporaryFile("w", suffix=".lark", delete=False, encoding="utf-8") as f:
            f.write(grammar)
            path = f.name
        try:
            run = subprocess.run([driver, path], input="".join(json.dumps(t) + "\n" for t in texts),
                                 capture_output=True, text=True, encoding="utf-8")
        finally:
            os.unlink(path)
        lines = run.stdout.split("\n")
        if compiled is not None and lines and "limit" in lines[0] and lines[0].startswith("ERROR"):
            limited += 1  # maskd's DFA or regex size limits: refused cleanly, not a mismatch
            continue
        if compiled is None or not lines or lines[0] != "OK":
            # Both refuse (zero-width or invalid): agreement; one refuses: report.
            both = compiled is None and (not lines or lines[0] != "OK")
            total += 1
            agree += both
            refused += both
            if not both and shown < 8:
                shown += 1
                print("    /%s/%s: lark %s, maskd %s" % (pattern, flags, "refuses" if compiled is None else "compiles",
                                                     lines[0] if lines else run.stderr))
            continue
        for text, m in zip(texts, lines[1:]):
            want = compiled.fullmatch(text) is not None
            matched += want
            total += 1
            if not m.startswith("D") and (m == "1") == want:
                agree += 1
            elif shown < 8:
                shown += 1
                print("    /%s/%s on %r: re %s, maskd %s" % (pattern, flags, text, want, m))
    print("regexes            %d patterns (%d refused by both, %d over a maskd limit) x %d texts "
          "(%d matching), agreement %d/%d" % (count, refused, limited, texts_per, matched, agree, total))
    return agree == total


GRAMMAR_PIECES = ["(", ")", "[", "]", "|", "*", "+", "?", "~ 2", "..", ":", "\"", "/", "\\", "\n",
                  "\n|", " ", "_", "A", "a", "i", "x", ".", ",", "//", "#", "%ignore ", "\"x\"", "/y+/",
                  "->", "{", "}", "\\n", "\\\"", "\\/", "?", "!"]


def run_driver(driver, grammar, texts):
    with tempfile.NamedTemporaryFile("w", suffix=".lark", delete=False, encoding="utf-8") as f:
        f.write(grammar)
        path = f.name
    try:
        run = subprocess.run([driver, path], input="".join(json.dumps(t) + "\n" for t in texts),
                             capture_output=True, text=True, encoding="utf-8", errors="replace")
    finally:
        os.unlink(path)
    return run.returncode, run.stdout.split("\n")


def check_mutated_grammars(driver, rng, count, texts_per):
    """Mutates the grammars above: lark and maskd must agree on refusing the
    grammar, and where both load it, on the texts."""
    names = list(GRAMMARS)
    both_load = both_refuse = only_lark = only_maskd = text_agree = text_total = crashes = known = 0
    shown = 0
    for _ in range(count):
        grammar, seeds = GRAMMARS[rng.choice(names)]
        g = list(grammar)
        for _ in range(1 if rng.random() < 0.7 else 2):
            i = rng.randrange(len(g) + 1)
            if rng.random() < 0.5:
                g[i:i] = list(rng.choice(GRAMMAR_PIECES))
            else:
                del g[i:i + rng.randint(1, 2)]
        g = "".join(g)
        try:
            parser = lark.Lark(g, parser="earley", lexer="dynamic_complete")
        except Exception:
            parser = None
        texts = texts_for(rng, grammar, seeds, texts_per)
        rc, lines = run_driver(driver, g, texts)
        if rc not in (0, 2):
            crashes += 1
            print("    driver exit %d on grammar %r" % (rc, g))
            continue
        maskd_ok = bool(lines) and lines[0] == "OK"
        if parser is None and not maskd_ok:
            both_refuse += 1
            continue
        if parser is None or not maskd_ok:
            if parser is None:
                only_maskd += 1
            else:
                only_lark += 1
            if shown < 10:
                shown += 1
                print("    %s loads, the other refuses: %r -> %s"
                      % ("maskd" if parser is None else "lark", g, lines[:1]))
            continue
        both_load += 1
        for text, m in zip(texts, lines[1:]):
            text_total += 1
            try:
                want = lark_accepts(parser, text)
            except Exception:  # lark's own internal errors on odd grammars
                text_total -= 1
                continue
            if (m == "1") == want:
                text_agree += 1
            elif m == "1" and greedy_ignore_difference(parser, g, text):
                text_total -= 1
                known += 1
            elif shown < 10:
                shown += 1
                print("    grammar %r on %r: lark %s, maskd %s" % (g, text, want, m))
    print("mutated grammars   %d: both load %d, both refuse %d, only lark loads %d, only maskd loads %d, "
          "driver crashes %d; texts agree %d/%d (+%d known greedy line-comment %%ignore)"
          % (count, both_load, both_refuse, only_lark, only_maskd, crashes, text_agree, text_total, known))
    return crashes == 0 and text_agree == text_total


COMMON = ["DIGIT", "HEXDIGIT", "INT", "SIGNED_INT", "DECIMAL", "_EXP", "FLOAT", "SIGNED_FLOAT",
          "NUMBER", "SIGNED_NUMBER", "_STRING_INNER", "_STRING_ESC_INNER", "ESCAPED_STRING",
          "LCASE_LETTER", "UCASE_LETTER", "LETTER", "WORD", "CNAME", "WS_INLINE", "WS", "CR", "LF",
          "NEWLINE", "SH_COMMENT", "CPP_COMMENT", "C_COMMENT", "SQL_COMMENT"]
COMMON_CHARS = list("0123456789aefxAEFZ_+-.eE \t\r\n\f#/*\"\\") + ["\u00e9"]


def check_common(driver, rng, texts_per):
    """Each of lark's common terminals alone (start: NAME) on random texts:
    maskd's definitions against lark's own common.lark."""
    agree = total = 0
    for name in COMMON:
        grammar = "start: %s\n%%import common.%s\n" % (name, name)
        try:
            parser = lark.Lark(grammar, parser="earley", lexer="dynamic_complete")
        except Exception:
            parser = None
        texts = ["".join(rng.choice(COMMON_CHARS) for _ in range(rng.randint(1, 8))) for _ in range(texts_per)]
        # Texts built to match: a quoted string, comments, numbers.
        texts += ['"%s"' % "".join(rng.choice(COMMON_CHARS) for _ in range(rng.randint(0, 6)))
                  for _ in range(texts_per // 4)]
        texts += ["/*%s*/" % "".join(rng.choice(COMMON_CHARS) for _ in range(rng.randint(0, 6)))
                  for _ in range(texts_per // 4)]
        rc, lines = run_driver(driver, grammar, texts)
        maskd_ok = bool(lines) and lines[0] == "OK"
        if parser is None or not maskd_ok:
            total += 1
            if parser is None and not maskd_ok:
                agree += 1
            else:
                print("    common.%s: lark %s, maskd %s" % (name, "refuses" if parser is None else "loads", lines[:1]))
            continue
        bad = 0
        for text, m in zip(texts, lines[1:]):
            total += 1
            if not m.startswith("D") and (m == "1") == lark_accepts(parser, text):
                agree += 1
            elif bad < 3:
                bad += 1
                print("    common.%s on %r: lark %s, maskd %s" % (name, text, lark_accepts(parser, text), m))
    print("common terminals   %d names, agreement %d/%d" % (len(COMMON), agree, total))
    return agree == total


def engine_tokenizers() -> List[str]:
    """The bundled tokenizer, and a shared one (llama2: SentencePiece with
    byte fallback, unlike the bundled byte-level BPE) when ../shared exists."""
    out = [os.path.join(SOURCE_DIR, "data/tokenizers/qwen3")]
    shared = os.path.join(SHARED_DIR, "tokenizers/llama2")
    if os.path.exists(os.path.join(shared, "tokenizer.json")):
        out.append(shared)
    return out


def engine_grammars() -> List[Tuple[str, str]]:
    """(name, Lark text) of every grammar the engine samples."""
    out = [(name, grammar) for name, (grammar, _) in GRAMMARS.items()]
    for name in ENGINE_GRAMMAR_FILES:
        with open(os.path.join(SOURCE_DIR, "tests/data/grammars", name), encoding="utf-8") as f:
            out.append((name, f.read()))
    return out


def maskctl_sample(maskctl: str, tokenizer: str, grammar_path: str, seed: int, max_tokens: int,
                   timeout_s: float) -> Tuple[Optional[dict], str]:
    """One `maskctl sample --grammar` walk: its JSON line, or None and why
    ("timeout" past timeout_s)."""
    try:
        run = subprocess.run([maskctl, "sample", "--tokenizer", tokenizer, "--grammar", grammar_path,
                              "--format", "lark", "--seed", str(seed), "--max-tokens", str(max_tokens)],
                             capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    if run.returncode != 0:
        return None, "exit %d: %s%s" % (run.returncode, run.stdout.strip(), run.stderr.strip())
    try:
        return json.loads(run.stdout.strip().split("\n")[-1]), ""
    except ValueError:
        return None, "bad output: %r" % run.stdout


def check_engine_samples(maskctl: str, rng: random.Random, per_grammar: int, max_tokens: int,
                         timeout_s: float) -> bool:
    """Texts the engine generates with each grammar must parse with lark. A
    walk slower than timeout_s is reported (with the command that repeats it)
    and ends that grammar's walks on that tokenizer; it fails nothing."""
    keep = tempfile.mkdtemp(prefix="maskd-lark-oracle-")
    ok = True
    shown = 0
    slow: List[str] = []
    for tokenizer in engine_tokenizers():
        samples = finished = accepted = known = failures = 0
        grammars = engine_grammars()
        for name, grammar in grammars:
            parser = lark.Lark(grammar, parser="earley", lexer="dynamic_complete")
            path = os.path.join(keep, name if name.endswith(".lark") else name + ".lark")
            with open(path, "w", encoding="utf-8") as f:
                f.write(grammar)
            for _ in range(per_grammar):
                seed = rng.randrange(1 << 30)
                command = "%s sample --tokenizer %s --grammar %s --format lark --seed %d --max-tokens %d" % (
                    maskctl, tokenizer, path, seed, max_tokens)
                out, why = maskctl_sample(maskctl, tokenizer, path, seed, max_tokens, timeout_s)
                if why == "timeout":
                    slow.append("%s on %s: over %g s\n      %s" % (name, os.path.basename(tokenizer), timeout_s,
                                                                 command))
                    break
                samples += 1
                problem = ""
                if out is None:
                    problem = why
                elif out["finished"]:
                    finished += 1
                    raw = bytes.fromhex(out["text_hex"])
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError:
                        text = None
                        problem = "not UTF-8: %r" % raw
                    if text is not None:
                        if lark_accepts(parser, text):
                            accepted += 1
                        elif greedy_ignore_difference(parser, grammar, text):
                            known += 1
                        else:
                            problem = "lark rejects %r" % text
                if problem:
                    failures += 1
                    ok = False
                    if shown < 10:
                        shown += 1
                        print("    %s on %s: %s\n      %s" % (name, os.path.basename(tokenizer), problem, command))
        print("engine samples     %-6s %d grammars, %d walks of <= %d tokens: %d finished with EOS, "
              "%d accepted by lark, %d known (greedy line-comment %%ignore), %d disagreements"
              % (os.path.basename(tokenizer), len(grammars), samples, max_tokens, finished, accepted,
                 known, failures))
    for line in slow:
        print("    slow walk, the grammar's other walks skipped: " + line)
    if ok and not slow:
        for name in os.listdir(keep):
            os.unlink(os.path.join(keep, name))
        os.rmdir(keep)
    else:
        print("    grammars kept in %s" % keep)
    return ok


def check_outlines_samples(driver: str) -> bool:
    """Outlines' CFG samples: lark and maskd both accept each with its grammar."""
    root = os.path.join(SHARED_DIR, "corpora/outlines/cfg_samples")
    if not os.path.isdir(root):
        print("outlines samples   skipped: %s is absent" % root)
        return True
    total = agree = 0
    for folder, grammar_name in sorted(OUTLINES_SAMPLES.items()):
        with open(os.path.join(SOURCE_DIR, "tests/data/grammars", grammar_name), encoding="utf-8") as f:
            grammar = f.read()
        parser = lark.Lark(grammar, parser="earley", lexer="dynamic_complete")
        texts = []
        for name in sorted(os.listdir(os.path.join(root, folder))):
            with open(os.path.join(root, folder, name), encoding="utf-8") as f:
                text = f.read()
            # The arithmetic grammar has no newline; its samples end in one.
            texts.append(text.rstrip("\n ") if folder == "arithmetic" else text)
        rc, lines = run_driver(driver, grammar, texts)
        for text, m in zip(texts, lines[1:] if lines and lines[0] == "OK" else ["refused"] * len(texts)):
            total += 1
            want = lark_accepts(parser, text)
            if want and m == "1":
                agree += 1
            else:
                print("    %s sample %r: lark %s, maskd %s" % (folder, text[:60], want, m))
    print("outlines samples   %d texts, both accept %d/%d" % (total, agree, total))
    return agree == total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", default=os.path.join(os.path.dirname(__file__), "../../build/bin/lark_accepts"))
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="")
    ap.add_argument("--regexes", type=int, default=300, help="random regexes to check (0: none)")
    ap.add_argument("--grammars", type=int, default=300, help="mutated grammars to check (0: none)")
    ap.add_argument("--common", type=int, default=400, help="texts per common terminal (0: none)")
    ap.add_argument("--maskctl", default=os.path.join(SOURCE_DIR, "build/bin/maskctl"))
    ap.add_argument("--engine-samples", type=int, default=20,
                    help="maskctl sample walks per grammar and tokenizer (0: none)")
    ap.add_argument("--engine-max-tokens", type=int, default=64)
    ap.add_argument("--engine-timeout", type=float, default=60, help="seconds one maskctl sample may take")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    total = agree = known_total = 0
    failed = False
    print("lark %s, Python %s" % (lark.__version__, sys.version.split()[0]))
    for name, (grammar, seeds) in GRAMMARS.items():
        if args.only and name != args.only:
            continue
        parser = lark.Lark(grammar, parser="earley", lexer="dynamic_complete")
        with tempfile.NamedTemporaryFile("w", suffix=".lark", delete=False, encoding="utf-8") as f:
            f.write(grammar)
            path = f.name
        try:
            # Texts sampled from maskd's side join the seeds: they test that
            # what maskd generates parses, and their mutations go further.
            sample = subprocess.run([args.driver, path, "--sample", str(max(10, args.count // 10)),
                                     str(rng.randrange(1 << 30))],
                                    capture_output=True, text=True, encoding="utf-8")
            sampled = []
            for line in sample.stdout.split("\n")[1:]:
                if not line:
                    continue
                try:
                    sampled.append(json.loads(line))
                except ValueError:
                    print("    bad sample line from lark_accepts: %r" % line)
                    failed = True
            texts = texts_for(rng, grammar, list(seeds) + sampled, args.count)
            run = subprocess.run([args.driver, path], input="".join(json.dumps(t) + "\n" for t in texts),
                                 capture_output=True, text=True, encoding="utf-8")
        finally:
            os.unlink(path)
        lines = run.stdout.split("\n")
        if not lines or lines[0] != "OK":
            print("%-18s maskd refused the grammar: %s" % (name, lines[:1] or run.stderr))
            failed = True
            continue
        got = lines[1:]
        diffs = []
        known = 0
        for text, m in zip(texts, got):
            want = lark_accepts(parser, text)
            if m not in ("0", "1") or (m == "1") != want:
                if m == "1" and not want and greedy_ignore_difference(parser, grammar, text):
                    known += 1
                else:
                    diffs.append((text, want, m))
        total += len(texts)
        agree += len(texts) - len(diffs) - known
        known_total += known
        sampled_rejected = sum(1 for t in sampled if not lark_accepts(parser, t))
        print("%-18s %4d texts (%3d sampled by maskd, %d of them rejected by lark), %4d accepted by lark, "
              "agreement %d/%d%s"
              % (name, len(texts), len(sampled), sampled_rejected, sum(1 for t in texts if lark_accepts(parser, t)),
                 len(texts) - len(diffs) - known, len(texts),
                 ", %d known (greedy line-comment %%ignore)" % known if known else ""))
        for text, want, m in diffs[:5]:
            print("    %r: lark %s, maskd %s" % (text, "accepts" if want else "rejects", m))
        failed |= bool(diffs)
    print("total agreement %d/%d, %d known differences (greedy line-comment %%ignore), %d unexplained"
          % (agree, total, known_total, total - agree - known_total))
    if args.regexes:
        failed |= not check_regexes(args.driver, rng, args.regexes, 30)
    if args.grammars:
        failed |= not check_mutated_grammars(args.driver, rng, args.grammars, 30)
    if args.common:
        failed |= not check_common(args.driver, rng, args.common)
    if args.engine_samples:
        failed |= not check_outlines_samples(args.driver)
        failed |= not check_engine_samples(args.maskctl, rng, args.engine_samples, args.engine_max_tokens,
                                           args.engine_timeout)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
