#!/usr/bin/env python3
"""Seeded synthetic tool definitions, as agents send them, for the structural
tag benchmark (issue #26 item 3).

A tool has a name, a description and a JSON Schema of 2-8 typed properties
(string, integer, number, boolean, an enum of strings, an array of strings, a
nested object of 1-3 scalar properties), some of them required, no
additional properties. One seed gives one list of tools, always the same
(Python's random.Random, independent of the platform).

Outputs (--out-dir DIR, N tools):
  tags-N.json      the structural tag, one tag per tool:
                   {"tags": [{"begin": "<function=NAME>", "schema": PARAMS,
                              "end": "</function>"}, ...], "triggers": ["<function="]}
  anyof-N.json     the same tools as one tag whose schema is an anyOf of
                   {"name": {"const": NAME}, "arguments": PARAMS}
                   (begin "<tool_call>", end "</tool_call>")
  call-N.txt       free text then one seeded call of tool N // 2 in the
                   tags-N.json form (its arguments a valid instance, keys in
                   schema order, JSON with ", " and ": " separators)
  anyof-call-N.txt the same call in the anyof-N.json form
Usage:
  python3 bench/tool_gen.py --out-dir DIR [--counts 16,128,400] [--seed 26]
"""
from __future__ import annotations

import argparse
import json
import os
import random

WORDS = ("get set list create update delete find search fetch send open close read write "
         "weather city user order item file event calendar email message stock price report "
         "account invoice ticket task note project repo branch commit issue comment flight "
         "hotel booking route map image video song playlist device sensor alert metric").split()
TYPES = ("string", "integer", "number", "boolean", "enum", "array", "object")


def _name(rng: random.Random, i: int) -> str:
    return "_".join(rng.sample(WORDS, rng.randint(2, 3))) + f"_{i}"


def _scalar(rng: random.Random, kind: str) -> dict:
    if kind == "string":
        s = {"type": "string"}
        if rng.random() < 0.3:
            s["maxLength"] = rng.randint(8, 64)
        return s
    if kind == "integer":
        s = {"type": "integer"}
        if rng.random() < 0.4:
            s["minimum"] = 0
        return s
    if kind == "number":
        return {"type": "number"}
    if kind == "boolean":
        return {"type": "boolean"}
    if kind == "enum":
        return {"type": "string", "enum": rng.sample(WORDS, rng.randint(2, 5))}
    raise ValueError(kind)


def _property(rng: random.Random, kind: str) -> dict:
    if kind == "array":
        return {"type": "array", "items": {"type": "string"}, "maxItems": rng.randint(2, 6)}
    if kind == "object":
        props = {}
        for w in rng.sample(WORDS, rng.randint(1, 3)):
            props[w] = _scalar(rng, rng.choice(TYPES[:5]))
        return {"type": "object", "properties": props, "required": sorted(props)[:1],
                "additionalProperties": False}
    return _scalar(rng, kind)


def make_tools(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    tools = []
    for i in range(n):
        props = {}
        for w in rng.sample(WORDS, rng.randint(2, 8)):
            s = _property(rng, rng.choice(TYPES))
            s["description"] = f"the {w} to use"
            props[w] = s
        required = [k for k in props if rng.random() < 0.6] or [next(iter(props))]
        tools.append({
            "name": _name(rng, i),
            "description": " ".join(rng.sample(WORDS, 6)).capitalize() + ".",
            "parameters": {"type": "object", "properties": props, "required": required,
                           "additionalProperties": False},
        })
    return tools


def tags_doc(tools: list[dict]) -> dict:
    return {"tags": [{"begin": f"<function={t['name']}>", "schema": t["parameters"],
                      "end": "</function>"} for t in tools],
            "triggers": ["<function="]}


def anyof_doc(tools: list[dict]) -> dict:
    calls = [{"type": "object",
              "properties": {"name": {"const": t["name"]}, "arguments": t["parameters"]},
              "required": ["name", "arguments"], "additionalProperties": False} for t in tools]
    return {"tags": [{"begin": "<tool_call>", "schema": {"anyOf": calls}, "end": "</tool_call>"}],
            "triggers": ["<tool_call>"]}


def _value(rng: random.Random, s: dict):
    if "enum" in s:
        return rng.choice(s["enum"])
    t = s["type"]
    if t == "string":
        return " ".join(rng.sample(WORDS, 2))[: s.get("maxLength", 64)]
    if t == "integer":
        return rng.randint(0, 5000)
    if t == "number":
        return round(rng.uniform(-100, 100), 2)
    if t == "boolean":
        return rng.random() < 0.5
    if t == "array":
        return [rng.choice(WORDS) for _ in range(rng.randint(0, s["maxItems"]))]
    return instance(rng, s)


def instance(rng: random.Random, s: dict) -> dict:
    """A valid instance of an object schema: every required property, each
    other one half the time, in the schema's order."""
    out = {}
    for k, p in s["properties"].items():
        if k in s.get("required", []) or rng.random() < 0.5:
            out[k] = _value(rng, p)
    return out


def _dump(x) -> str:
    return json.dumps(x, separators=(", ", ": "))


def call_text(tool: dict, args: dict) -> str:
    return f"<function={tool['name']}>{_dump(args)}</function>"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--counts", default="16,128,400")
    ap.add_argument("--seed", type=int, default=26)
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    for n in (int(x) for x in a.counts.split(",")):
        tools = make_tools(n, a.seed)
        rng = random.Random(a.seed * 1000 + n)
        tool = tools[n // 2]
        args = instance(rng, tool["parameters"])
        files = {f"tags-{n}.json": json.dumps(tags_doc(tools)),
                 f"anyof-{n}.json": json.dumps(anyof_doc(tools)),
                 f"call-{n}.txt": "Let me look that up for you. " + call_text(tool, args),
                 f"anyof-call-{n}.txt": "Let me look that up for you. <tool_call>"
                 + _dump({"name": tool["name"], "arguments": args}) + "</tool_call>"}
        for name, text in files.items():
            with open(os.path.join(a.out_dir, name), "w") as f:
                f.write(text)

if __name__ == "__main__":
    main()
