#!/usr/bin/env python3
"""Checks maskd's vocabulary loader against the Hugging Face `tokenizers`
library, token by token, for the shared tokenizers, and writes the digests the
C++ tests compare against (tests/data/tokenizer_digests.json).

Usage (from the repository root, after building maskctl):
    python3 -m venv .venv && .venv/bin/pip install tokenizers
    .venv/bin/python scripts/tokenizer_digests.py [--maskctl build/bin/maskctl]
        [--shared ../shared] [--out tests/data/tokenizer_digests.json]
        [--check] [NAME ...]
Exit status 0 when every tokenizer passes, 1 otherwise.

What is checked, for every id from 0 to the highest id:
  1. Token presence and string: HF's id_to_token(id) is the token string the
     tokenizer.json declares for that id (added_tokens content wins over
     model.vocab, as in HF); maskd has a token exactly where HF has one.
  2. Special flag: maskd's flag equals HF's AddedToken.special.
  3. Bytes. The expected bytes are derived here, in Python, from the token
     string, then confirmed with HF's own decoder; maskd's bytes (from
     `maskctl vocab --dump`) must equal them.
       - special tokens: their content's UTF-8 (they are never text).
       - byte-level: every character maps back through GPT-2's byte<->unicode
         table (bytes_to_unicode below, as in GPT-2's encoder.py); a string
         with a character outside the table keeps its UTF-8 (what HF's
         ByteLevel decoder does).
       - sentencepiece: "▁" -> " ", then a whole token "<0xXX>" -> one byte
         when the decoder has ByteFallback.
     Decode check. decode([t]) alone is not a sound oracle: HF turns invalid
     UTF-8 into U+FFFD (lossy for partial UTF-8 tokens: byte-level tokens
     such as "\\xe4\\xb8" and SentencePiece's <0xE4>), and llama2's Strip
     decoder drops the first leading space of the output. So each token t is
     decoded as [anchor, pre..., t, suf...]: `anchor` is the token "a" (so
     Strip never touches t), and pre/suf are single-byte tokens chosen so
     that pre + bytes(t) + suf is valid UTF-8 (a lead byte before leading
     continuation bytes, continuation bytes after a truncated sequence).
     Then HF's text must equal ("a" + pre + bytes(t) + suf).decode(): a
     lossless check. Tokens that no such completion makes valid (e.g. the
     bytes C0, C1, F5-FF, which never occur in UTF-8) get the lossy check:
     HF's text equals ("a" + bytes(t)).decode(errors="replace"). Counts of
     both are printed.
  4. Size, EOS (tokenizer_config.json eos_token -> HF token_to_id) and the
     content hash, recomputed here from the Python-derived bytes with the
     serialization documented in tokenizer/vocabulary.h:
       "maskd-vocab-v1\\n"; u32 size; per id: u8 flags (1 has token,
       2 special), u32 byte length, bytes; u32 EOS count, u32 EOS ids
       (ascending). Integers little-endian. SHA-256, lowercase hex.
"""

import argparse
import glob
import hashlib
import json
import os
import struct
import subprocess
import sys
import time

from tokenizers import Tokenizer

NAMES = ["llama2", "llama3", "qwen3", "gemma3", "gptoss"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPACE_MARKER = "\u2581"


def bytes_to_unicode():
    """GPT-2's table: byte -> printable unicode character."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_OF = {c: b for b, c in bytes_to_unicode().items()}


def decoder_types(node, out):
    if isinstance(node, dict):
        if "type" in node:
            out.append(node["type"])
        for v in node.values():
            decoder_types(v, out)
    elif isinstance(node, list):
        for v in node:
            decoder_types(v, out)
    return out


def byte_fallback_value(s):
    """Rust u8::from_str_radix(s[3:5], 16) on "<0xXX>", as HF's ByteFallback."""
    if len(s) != 6 or not s.startswith("<0x") or not s.endswith(">"):
        return None
    h = s[3:5]
    hexdigits = "0123456789abcdefABCDEF"
    if h[0] == "+" and h[1] in hexdigits:
        return int(h[1], 16)
    if h[0] in hexdigits and h[1] in hexdigits:
        return int(h, 16)
    return None


def expected_bytes(s, kind, byte_fallback):
    if kind == "byte_level":
        if all(c in BYTE_OF for c in s):
            return bytes(BYTE_OF[c] for c in s)
        return s.encode("utf-8")
    t = s.replace(SPACE_MARKER, " ")
    if byte_fallback:
        v = byte_fallback_value(t)
        if v is not None:
            return bytes([v])
    return t.encode("utf-8")


def valid_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


PREFIXES = [b""] + [bytes([lead]) for lead in (0xC3, 0xE1, 0xE0, 0xED, 0xF1, 0xF0, 0xF4)] + [
    bytes([lead, c]) for lead in (0xE1, 0xF1, 0xF0, 0xF4) for c in (0x80, 0x90, 0xA0)
] + [bytes([0xF1, 0x80, 0x80]), bytes([0xF0, 0x90, 0x80]), bytes([0xF4, 0x80, 0x80])]
SUFFIXES = [b""] + [bytes([c] + [0x80] * (n - 1)) for c in (0x80, 0x90, 0xA0, 0xBF)
                    for n in (1, 2, 3)]


def completion(b):
    """(pre, suf) making pre + b + suf valid UTF-8, or None."""
    if valid_utf8(b):
        return b"", b""
    for pre in PREFIXES:
        for suf in SUFFIXES:
            if valid_utf8(pre + b + suf):
                return pre, suf
    return None


def find_maskctl(arg):
    """--maskctl, else build/bin/maskctl, else the newest build*/bin/maskctl."""
    if arg:
        return arg
    default = os.path.join(ROOT, "build", "bin", "maskctl")
    if os.path.exists(default):
        return default
    hits = glob.glob(os.path.join(ROOT, "build*", "bin", "maskctl"))
    if hits:
        return max(hits, key=os.path.getmtime)
    sys.exit("maskctl not found: build it, or pass --maskctl")


def run_maskctl(maskctl, path, dump):
    args = [maskctl, "vocab", "--tokenizer", path] + (["--dump"] if dump else [])
    p = subprocess.run(args, capture_output=True)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(args), p.returncode,
                                                  p.stderr.decode(errors="replace")))
    return p.stdout.decode()


def content_hash(size, tokens, eos):
    """tokens: id -> (bytes, special). The serialization of tokenizer/vocabulary.h."""
    h = hashlib.sha256()
    h.update(b"maskd-vocab-v1\n")
    h.update(struct.pack("<I", size))
    for i in range(size):
        if i in tokens:
            b, special = tokens[i]
            h.update(struct.pack("<BI", 1 | (2 if special else 0), len(b)))
            h.update(b)
        else:
            h.update(struct.pack("<BI", 0, 0))
    h.update(struct.pack("<I", len(eos)))
    for e in sorted(eos):
        h.update(struct.pack("<I", e))
    return h.hexdigest()


def check(name, folder, maskctl):
    """Returns (digest dict, list of failures)."""
    failures = []

    def fail(msg):
        if len(failures) < 20:
            print("  FAIL %s: %s" % (name, msg))
        failures.append(msg)

    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        doc = json.load(f)
    hf = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))

    types = decoder_types(doc.get("decoder"), [])
    kind = "byte_level" if "ByteLevel" in types else "sentencepiece"
    byte_fallback = "ByteFallback" in types

    declared = {}
    for s, i in doc["model"]["vocab"].items():
        declared[i] = s
    special_declared = {}
    for a in doc.get("added_tokens") or []:
        declared[a["id"]] = a["content"]
        special_declared[a["id"]] = bool(a.get("special", False))
    size = max(declared) + 1
    hf_special = {i for i, t in hf.get_added_tokens_decoder().items() if t.special}

    # 1-3a: strings, flags and Python-derived bytes.
    expected = {}
    for i in range(size):
        s = hf.id_to_token(i)
        if (s is None) != (i not in declared):
            fail("id %d: HF token %r, tokenizer.json %r" % (i, s, declared.get(i)))
            continue
        if s is None:
            continue
        if s != declared[i]:
            fail("id %d: HF token %r != tokenizer.json %r" % (i, s, declared[i]))
        special = i in hf_special
        if special != special_declared.get(i, False):
            fail("id %d: HF special %s != tokenizer.json" % (i, special))
        expected[i] = (s.encode("utf-8") if special else expected_bytes(s, kind, byte_fallback),
                       special)

    # 3b: HF decode, losslessly where a UTF-8 completion exists.
    byte_tok = {}
    for i in sorted(expected):
        b, special = expected[i]
        if not special and len(b) == 1 and b[0] not in byte_tok:
            byte_tok[b[0]] = i
    # The anchor is the text token "a" (for SentencePiece not <0x61>, which
    # ByteFallback would group with a following byte token).
    anchor = next(i for i in sorted(expected) if declared[i] == "a" and not expected[i][1])
    batch, want, lossy_ids = [], [], []
    n_lossless = n_lossy = 0
    for i in sorted(expected):
        b, special = expected[i]
        if special:
            continue
        comp = completion(b)
        if comp is not None and all(x in byte_tok for x in comp[0] + comp[1]):
            pre, suf = comp
            batch.append([anchor] + [byte_tok[x] for x in pre] + [i] + [byte_tok[x] for x in suf])
            want.append((b"a" + pre + b + suf).decode("utf-8"))
            n_lossless += 1
        else:
            batch.append([anchor, i])
            want.append((b"a" + b).decode("utf-8", errors="replace"))
            lossy_ids.append(i)
            n_lossy += 1
    got = hf.decode_batch(batch, skip_special_tokens=False)
    for ids, g, w in zip(batch, got, want):
        if g != w:
            fail("ids %s: HF decodes %r, expected %r" % (ids, g, w))

    # EOS as HF maps the config's eos_token.
    eos = []
    config_path = os.path.join(folder, "tokenizer_config.json")
    if os.path.exists(config_path):
        with open(config_path, encoding="utf-8") as f:
            e = json.load(f).get("eos_token")
        if isinstance(e, dict):
            e = e.get("content")
        if e is not None:
            eos = [hf.token_to_id(e)]

    # 3c, 4: maskd.
    summary = json.loads(run_maskctl(maskctl, folder, dump=False))
    dump = {}
    for line in run_maskctl(maskctl, folder, dump=True).splitlines():
        d = json.loads(line)
        dump[d["id"]] = (bytes.fromhex(d["hex"]), d["special"])
    if set(dump) != set(expected):
        fail("maskd ids differ from HF: %d only in maskd, %d only in HF" % (
            len(set(dump) - set(expected)), len(set(expected) - set(dump))))
    n_diff = 0
    for i in sorted(set(dump) & set(expected)):
        if dump[i] != expected[i]:
            n_diff += 1
            fail("id %d: maskd %r, expected %r" % (i, dump[i], expected[i]))
    digest = {
        "sha256": content_hash(size, expected, eos),
        "tokens": len(expected),
        "vocab_size": size,
        "eos": sorted(eos),
        "special": sum(1 for b, s in expected.values() if s),
        "kind": kind,
    }
    for key in digest:
        if summary.get(key) != digest[key]:
            fail("%s: maskd %r, expected %r" % (key, summary.get(key), digest[key]))
    print("  %s: %d tokens (%d special), %d decode-checked losslessly, %d lossy "
          "(ids %s%s), maskd differs on %d, load %.1f ms" % (
              name, len(expected), digest["special"], n_lossless, n_lossy,
              lossy_ids[:8], "..." if len(lossy_ids) > 8 else "", n_diff,
              summary.get("load_ms", -1)))
    return digest, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--maskctl")
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(ROOT), "shared"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "tokenizer_digests.json"))
    ap.add_argument("--check", action="store_true",
                    help="compare with --out instead of writing it")
    ap.add_argument("names", nargs="*", default=NAMES)
    args = ap.parse_args()
    maskctl = find_maskctl(args.maskctl)
    print("maskctl: %s" % maskctl)

    digests, failed = {}, []
    for name in args.names:
        folder = os.path.join(args.shared, "tokenizers", name)
        t0 = time.time()
        digest, failures = check(name, folder, maskctl)
        digests[name] = digest
        print("  %s: %s (%.1f s)" % (name, "FAIL (%d)" % len(failures) if failures else "ok",
                                     time.time() - t0))
        if failures:
            failed.append(name)

    if args.check:
        with open(args.out, encoding="utf-8") as f:
            committed = json.load(f)["tokenizers"]
        for name, d in digests.items():
            if committed.get(name) != d:
                print("  %s: differs from %s" % (name, args.out))
                failed.append(name)
    elif not failed:
        out = {
            "comment": "Written by scripts/tokenizer_digests.py after checking every token "
                       "against HF tokenizers; sha256 is maskd's Vocabulary::content_hash "
                       "(serialization in tokenizer/vocabulary.h), recomputed in Python.",
            "tokenizers_version": __import__("tokenizers").__version__,
            "tokenizers": digests,
        }
        if set(args.names) != set(NAMES) and os.path.exists(args.out):
            with open(args.out, encoding="utf-8") as f:
                old = json.load(f)["tokenizers"]
            old.update(digests)
            out["tokenizers"] = old
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2, sort_keys=True)
            f.write("\n")
        print("wrote %s" % args.out)
    if failed:
        print("FAILED: %s" % ", ".join(failed))
        return 1
    print("all ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
