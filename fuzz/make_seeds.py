#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<fuzzer>/ from the project's test
data and docs examples (deterministic; rerun after changing it). Inputs that
crashed a fuzzer are added by hand (name: crash-<what>) and kept."""
import hashlib
import json
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")


def write(fuzzer, data, name=None):
    d = os.path.join(OUT, fuzzer)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    name = name or "seed-" + hashlib.sha1(data).hexdigest()[:12]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def regex_seeds():
    seen = []
    with open(os.path.join(ROOT, "tests/data/regex_conformance_slice.jsonl")) as f:
        for line in f:
            r = json.loads(line)["regex"]
            if r not in seen:
                seen.append(r)
    picked = seen[:: max(1, len(seen) // 30)][:30]
    picked += [
        r"[0-9]{3}-[0-9]{4}", r"(?:true|false)", r"\d+(\.\d+)?([eE][+-]?\d+)?",
        r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"', r"[\u0100-\uffff]+x",
        r"(a|b)*a(a|b){4}", r"(?P<n>x)(?#c)y?", r"[^\n]{0,8}", r"((((a))))", r"\x41\101\0",
    ]
    for r in picked:
        write("regex_fuzzer", r)


def schema_seeds():
    n = 0
    with open(os.path.join(ROOT, "tests/data/maskbench_slice.jsonl")) as f:
        lines = f.readlines()
    for i, line in enumerate(lines[:: max(1, len(lines) // 30)][:30]):
        schema = json.dumps(json.loads(line)["schema"], separators=(",", ":"))
        write("json_schema_fuzzer", bytes([i * 37 % 256]) + schema.encode())
        n += 1
    extra = [
        {"type": "string", "pattern": "^(a|b(c)*)+[0-9]{2,3}$", "minLength": 2, "maxLength": 5},
        {"type": "string", "pattern": "x\\d+\\u00e9"},
        {"$defs": {"n": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/n"}}}},
         "$ref": "#/$defs/n"},
        {"allOf": [{"type": "integer", "minimum": -5}, {"maximum": 17, "multipleOf": 1}]},
        {"anyOf": [{"const": "a"}, {"enum": [1, 2.5, None, True, [1], {"k": "v"}]}]},
        {"type": "object", "properties": {"a": {"type": "number", "exclusiveMinimum": 0.5}},
         "required": ["a"], "additionalProperties": False},
        {"type": "array", "prefixItems": [{"type": "boolean"}], "items": {"type": "string"},
         "minItems": 1, "maxItems": 3},
        {"not": {"type": "string"}},
        {"if": {"properties": {"t": {"const": 1}}}, "then": {"required": ["x"]}, "else": {"required": ["y"]}},
        {"type": "string", "format": "date-time"},
        # The crash of issue #11 item 1, shortened: past the 256-group limit.
        {"type": "string", "pattern": "^" + "(" * 300 + "a" + ")" * 300 + "$"},
    ]
    for i, s in enumerate(extra):
        write("json_schema_fuzzer", bytes([i * 53 % 256]) + json.dumps(s, separators=(",", ":")).encode())
    write("json_schema_fuzzer", b"\x00" + b'{"type":"integer"}\x00garbage', "trailing-nul")


def tokenizer_seeds():
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, n = {}, 0
    for b in range(256):
        if b in bs:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    byte_vocab = {table[b]: b for b in range(256)}
    byte_vocab.update({"ab": 256, "\u0120the": 257, "{\"": 258})
    docs = [
        {"model": {"type": "BPE", "vocab": byte_vocab, "merges": ["a b"]},
         "added_tokens": [{"id": 259, "content": "<|end|>", "special": True}],
         "decoder": {"type": "ByteLevel"}},
        {"model": {"type": "BPE", "vocab": {"\u2581a": 0, "<0x41>": 1, "b": 2, "</s>": 3}, "byte_fallback": True},
         "added_tokens": [{"id": 3, "content": "</s>", "special": True}],
         "decoder": {"type": "Sequence", "decoders": [
             {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
             {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}},
        {"model": {"type": "Unigram", "vocab": [["<unk>", 0.0], ["\u2581x", -1.5], ["y", -2.0]]},
         "added_tokens": None, "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581"},
         "decoder": {"type": "Metaspace", "replacement": "\u2581"}},
        {"model": {"type": "BPE", "vocab": {"a": 0, "b": 5}}, "decoder": None,
         "pre_tokenizer": {"type": "ByteLevel"}},
        {"model": {"type": "WordPiece", "vocab": {"a": 0}}},
    ]
    for i, d in enumerate(docs):
        write("tokenizer_json_fuzzer", bytes([i * 2 & 0xFE]) + json.dumps(d).encode())
    write("tokenizer_json_fuzzer", b"\x00" + json.dumps(docs[3]).encode() + b"\x00garbage", "trailing-nul")
    for c in [{"eos_token": "</s>"}, {"eos_token": {"content": "<|end|>", "lstrip": False}},
              {"eos_token": None, "model_max_length": 1000000000000000019884624838656}]:
        write("tokenizer_json_fuzzer", b"\x01" + json.dumps(c).encode())


# --- request_fuzzer: hand-encoded protobuf (no protobuf module needed).
def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def fv(num, v):  # varint field
    return varint(num << 3) + varint(v)


def fb(num, data):  # length-delimited field
    if isinstance(data, str):
        data = data.encode()
    return varint(num << 3 | 2) + varint(len(data)) + data


METHODS = ["Ping", "Stats", "ListTokenizers", "RegisterTokenizer", "Detokenize", "Compile",
           "GetIndex", "CancelCompile", "CreateSession", "CloseSession", "ForkSession", "Rollback",
           "Step", "Mask", "RegisterSystemRegion", "ListRegions", "UnregisterRegion", "StepInRegion",
           "StepStream", "Resize"]  # the last two: request_fuzzer.cc's kStepStream and kResize


def rec(method, payload):
    i = METHODS.index(method)
    return bytes([i]) + struct.pack("<H", len(payload)) + payload


def compile_req(regex=None, schema=None, wait=True, grammar=None, fmt=1):
    p = fb(1, "")  # tokenizer "" -> tiny
    if grammar is not None:  # Grammar {format (1 lark, 2 gbnf, 3 ebnf), text}
        p += fb(6, fv(1, fmt) + fb(2, grammar))
    else:
        p += fb(2, regex) if regex is not None else fb(3, schema)
    if wait:
        p += fv(5, 1)
    return p


def step(session, tokens, rollback=0):
    e = fv(1, session) + (fv(2, rollback) if rollback else b"")
    if tokens:
        e += fb(3, b"".join(varint(t) for t in tokens))  # packed
    return fb(1, e)


def stream(mode, requests):  # kStepStream payload: [mode][[len LE16][StepRequest]]...
    return bytes([mode]) + b"".join(struct.pack("<H", len(r)) + r for r in requests)


def resize(k, size):  # kResize payload: [object][size LE32]
    return bytes([k]) + struct.pack("<I", size)


def region(k):  # RegisterSystemRegion of the fuzzer's object k, whole, as "r0"
    return rec("RegisterSystemRegion", fb(2, bytes([k])))


def packed(values):  # packed repeated int32 (negative: 10-byte varint)
    return b"".join(varint(v & (2**64 - 1)) for v in values)


def logits_target(dtype, rows, vocab, row_map=None, offset=0):
    t = fb(1, b"") + fv(3, dtype) + fv(4, rows) + fv(5, vocab)
    if offset:
        t += fv(2, offset)
    if row_map:
        t += fb(7, packed(row_map))
    return fb(3, t)


def request_seeds():
    seqs = [
        [rec("Ping", b""), rec("ListTokenizers", b""), rec("Stats", b"")],
        [rec("Compile", compile_req("[0-9]+")), rec("CreateSession", fb(1, "")),
         rec("Step", step(0, [])), rec("Step", step(0, [ord("1"), ord("2")])),
         rec("ForkSession", fv(1, 0)), rec("Step", step(1, [ord("3")])),
         rec("Rollback", fv(1, 0) + fv(2, 1)), rec("Mask", fb(1, "") + fb(2, bytes([ord("4")]))),
         rec("CloseSession", fv(1, 0))],
        [rec("CreateSession", fb(2, compile_req(schema='{"type":"object","properties":{"a":{"type":"boolean"}}}'))),
         rec("Step", step(0, [258, ord("a"), ord('"'), ord(":")]))],
        [rec("Compile", compile_req(schema='{"type":"string","pattern":"^(ab)+$"}')),
         rec("GetIndex", fb(1, "") + fv(2, 1)), rec("Detokenize", fb(1, "") + fb(2, bytes([97, 98, 0x82, 0x02])))],
        [rec("Compile", compile_req("(a|b){2,5}c", wait=False)), rec("CancelCompile", fb(1, "")),
         rec("GetIndex", fb(1, "") + fv(2, 1))],
        [rec("Compile", compile_req("(" * 300 + "a" + ")" * 300))],
        [rec("Compile", compile_req(schema='{"type":"integer"}\x00garbage'))],
        [rec("RegisterTokenizer", fb(1, "t2") + fb(2, '{"model":{"type":"BPE","vocab":{"a":0,"b":1}},"decoder":{"type":"ByteLevel"}}') + fv(4, 8))],
        [rec("RegisterSystemRegion", fb(1, "r") + fb(2, "/maskd-fuzz-no-such-object-x") + fv(4, 4096)),
         rec("ListRegions", b""), rec("UnregisterRegion", fb(1, "r"))],
        [rec("Step", b"\xff\xff\xff\x0f"), rec("Compile", b"\x12\x05ab")],  # malformed protobuf
        # StepStream: steps, a rollback, a malformed request (ends the stream).
        [rec("Compile", compile_req("[0-9]+")), rec("CreateSession", fb(1, "")),
         rec("StepStream", stream(0, [step(0, []), step(0, [ord("1"), ord("2")]),
                                      step(0, [ord("3")], rollback=1), b"\xff\xff"]))],
        # StepStream cancelled after the second reply; one abandoned after its first request.
        [rec("CreateSession", fb(2, compile_req("(ab|cd)*e"))), rec("ForkSession", fv(1, 0)),
         rec("StepStream", stream(1 | (1 << 2), [step(0, [ord("a")]), step(1, [ord("c")]),
                                                 step(0, [ord("b")])])),
         rec("StepStream", stream(2, [step(1, [ord("d")]), step(1, [ord("e")])]))],
        # Shared memory, masks target: masks written into the mapped object 0.
        [rec("Compile", compile_req("[a-c]+x")), rec("CreateSession", fb(1, "")),
         rec("CreateSession", fb(1, "")), region(0),
         rec("StepInRegion", step(0, []) + step(1, [ord("a")]) + fb(2, b"")),
         rec("StepInRegion", step(0, [ord("b"), ord("x")]) + fb(2, b"" + fv(2, 36))),
         rec("ListRegions", fb(1, b"\x00")), rec("UnregisterRegion", fb(1, b"\x00"))],
        # Shared memory, logits target: fp32 rows with a row map, then bf16 at an offset.
        [rec("Compile", compile_req("(cat|dog)s?")), rec("CreateSession", fb(1, "")),
         rec("CreateSession", fb(1, "")), region(2),
         rec("StepInRegion", step(0, []) + step(1, [ord("c")]) + logits_target(1, 3, 271, [1, -1, 0])),
         rec("StepInRegion", step(0, [ord("d")]) + logits_target(3, 1, 271, offset=2048)),
         rec("StepInRegion", step(1, [ord("a")]) + logits_target(2, 1, 300))],
        # Grammars: a GBNF session stepped, rolled back and forked; a Lark one with
        # %ignore through a stream; an ambiguous one that runs into the set limit.
        [rec("CreateSession", fb(2, compile_req(grammar='root ::= "(" root ")" | [a-c]+\n', fmt=2))),
         rec("Step", step(0, [ord("("), ord("(")])), rec("ForkSession", fv(1, 0)),
         rec("Step", step(1, [ord("a")], rollback=1)), rec("Mask", fb(1, "") + fb(2, bytes([ord("(")]))),
         rec("Rollback", fv(1, 0) + fv(2, 2))],
        [rec("CreateSession", fb(2, compile_req(grammar='start: "a" ("," "a")*\n%ignore " "\n'))),
         rec("StepStream", stream(0, [step(0, [ord("a"), ord(" ")]), step(0, [ord(",")]),
                                      step(0, [ord("a")], rollback=1)]))],
        [rec("CreateSession", fb(2, compile_req(grammar="root ::= root root | \"a\" | \"\"\n", fmt=3))),
         rec("Step", step(0, [ord("a")] * 40)), rec("Step", step(0, [], 0)),
         rec("Compile", compile_req(grammar="root ::= [z-a]\n", fmt=2)),
         rec("Compile", compile_req(grammar="start: x\n", fmt=0))],
        # The object shrinks under a registered region; grows back; a new registration.
        [rec("CreateSession", fb(2, compile_req("[0-9]{2,4}"))), region(1),
         rec("Resize", resize(1, 100)), rec("StepInRegion", step(0, [ord("1")]) + fb(2, b"")),
         rec("RegisterSystemRegion", fb(1, "r1") + fb(2, b"\x01")),
         rec("Resize", resize(1, 16384)), rec("StepInRegion", step(0, [ord("2")]) + fb(2, b""))],
    ]
    for s in seqs:
        write("request_fuzzer", b"".join(s))


def grammar_seeds():
    # [dialect byte: bit 0 clear GBNF, set EBNF][grammar]["\n%%\n" text]
    texts = {
        "json.gbnf": '{"a": [1, -2.5e3, "x\\u00e9"], "b": null}',
        "arithmetic.gbnf": "(a +b)*c = 10\n",
        "list.gbnf": "- milk\n- eggs\n",
        "chess.gbnf": "1. e4 e5\n2. Nf3 Nc6\n",
        "c.gbnf": "int main(){x = 1;return x;}",
    }
    for i, (name, text) in enumerate(sorted(texts.items())):
        with open(os.path.join(ROOT, "tests/data/grammars", name)) as f:
            grammar = f.read()
        write("grammar_fuzzer", "0" + grammar + "\n%%\n" + text)
        write("grammar_fuzzer", "1" + grammar + "\n%%\n" + text[: len(text) // 2 + i])
    extra = [
        "0root ::= [α-ω]+ (\"a\" | \"bc\"){2,5} .?\n%%\nαβbca",
        "1root ::= a b.c_d* Regex(\"[0-9]{2}\")\na ::= \"\\x41\\e\" | ()\nb.c_d ::= [\\-\\]x]\n%%\nA]x42",
        "0root ::= ((((\"a\"))))* \"b\"{0,3}\n%%\naab",
        "0root ::= x\nx ::= x \"+\" x | \"1\" | \"\"\n%%\n1+1+",
        "1root ::= \"a\" (= \"b\")\n",
        "0root ::= <think> \"a\"\n",
    ]
    for e in extra:
        write("grammar_fuzzer", e)


# --- session_fuzzer: [config][constraint]\n%%\n[operations] (session_fuzzer.cc's header).
def s_entry(target, tokens, rollback=0, budget=0):
    """A step entry: `tokens` are pick bytes (< 0xF0: the k-th allowed token)."""
    r = 0 if rollback == 0 else (0xE0 | rollback)
    shape = len(tokens) | ((3 << 3) | ((budget - 1) << 5) if budget else 0)
    return bytes([target, r, shape]) + bytes(tokens)


def s_batch(*entries):  # [n - 1][entries]
    return bytes([len(entries) - 1]) + b"".join(entries)


def s_step(*entries, pad=0):  # op 0: [shape][batch]
    return bytes([0, pad << 2]) + s_batch(*entries)


def s_stream(*batches):  # op 1: [k - 2][batch]...
    return bytes([1, len(batches) - 2]) + b"".join(batches)


def session_seeds():
    ops = b"".join([
        s_step(s_entry(0, [1, 2, 3])),
        bytes([3, 0]),                                         # fork session 0
        s_step(s_entry(0, [0]), s_entry(1, [5, 7]), s_entry(1, [0xF0]), pad=1),
        bytes([2, 1, 2]),                                      # roll session 1 back by 2
        s_stream(s_batch(s_entry(0, [4], rollback=1)), s_batch(s_entry(1, [2, 2], budget=3))),
        bytes([0x84, 0]),                                      # close session 0 (probe: budget)
        s_step(s_entry(0xE0, [1]), s_entry(0xF5, []), s_entry(0, [0xF1])),
        bytes([5]),                                            # create
        s_step(s_entry(1, [9, 9, 9, 9]), s_entry(1, [], rollback=9)),
    ])
    constraints = [
        (0 | 1 << 3, r"[0-9]+(\.[0-9]+)?e?"),
        (1 | 3 << 3, '{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"integer"}},'
                     '"required":["a"]}'),
        (2 | 2 << 5, '{"type":"array","items":{"$ref":"#"},"maxItems":2}'),
        (3 | 1 << 5, 'start: value\nvalue: "{" [pair ("," pair)*] "}" | /[0-9]+/ | "true"\n'
                     'pair: /"[a-z]+"/ ":" value\n%ignore " "\n'),
        (4 | 0x80, 'root ::= "(" root ")" | [a-c]+'),
        (5 | 3 << 5, 'root ::= root root | "a" | ""'),
        (6, bytes([0x03, 2, 2, 0, 7, 3, 1, 1, 4, 2, 1, 5, 1, 2, 3, 6, 0, 1, 0, 5])),
        (7 | 1 << 5, bytes([0x81, 1, 3, 3, 1, 0, 2, 1, 6, 0, 1, 2, 5, 4])),
    ]
    for config, text in constraints:
        if isinstance(text, str):
            text = text.encode()
        write("session_fuzzer", bytes([config]) + text + b"\n%%\n" + ops)
    write("session_fuzzer", b"\x00[ab]{2,3}", "no-operations")


if __name__ == "__main__":
    regex_seeds()
    schema_seeds()
    tokenizer_seeds()
    request_seeds()
    grammar_seeds()
    session_seeds()
