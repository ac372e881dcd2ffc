"""SGLang's structural tags as maskd structural-tag documents (docs/grammars.md,
"Structural tags").

SGLang passes one of two JSON shapes:
  * legacy: {"structures": [{"begin", "schema", "end"}], "triggers": [...],
    "at_least_one": bool} -- maps one to one;
  * XGrammar's StructuralTag: {"type": "structural_tag", "format": {...}}; maskd takes
    the "triggered_tags" format whose tags are {"type": "tag", "begin", "content", "end"}
    with a json_schema, regex or grammar (EBNF) content. Other formats (sequence, or,
    tags_with_separator, qwen_xml_parameter, ...) raise ValueError: maskd's structural
    tag is free text with triggered tags and nothing more.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List


def _content(c: Any, where: str) -> Dict[str, Any]:
    if not isinstance(c, dict):
        raise ValueError(f"{where}: expected an object")
    kind = c.get("type")
    if kind == "json_schema":
        schema = c.get("json_schema")
        return {"schema": {} if schema is None else schema}
    if kind == "regex":
        return {"regex": c["pattern"]}
    if kind == "grammar":
        return {"grammar": {"format": "ebnf", "text": c["grammar"]}}
    if kind == "const_string":
        import re
        return {"regex": re.escape(c["value"])}
    raise ValueError(f"{where}: content type {kind!r} is not supported by maskd "
                     "(json_schema, regex, grammar, const_string are)")


def to_maskd(key_string: str) -> str:
    """SGLang's structural tag (JSON text) as maskd's (JSON text); ValueError when
    maskd cannot express it."""
    tag = json.loads(key_string)
    if not isinstance(tag, dict):
        raise ValueError("structural tag: expected a JSON object")
    if tag.get("structures") is not None:  # legacy
        tags: List[Dict[str, Any]] = []
        for s in tag["structures"]:
            schema = s.get("schema")
            tags.append({"begin": s["begin"], "schema": {} if schema is None else schema,
                         "end": s["end"]})
        return json.dumps({"tags": tags, "triggers": list(tag["triggers"]),
                           "at_least_one": bool(tag.get("at_least_one", False))})
    fmt = tag.get("format")
    if not isinstance(fmt, dict) or fmt.get("type") != "triggered_tags":
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        raise ValueError(f"structural tag format {kind!r} is not supported by maskd "
                         "(legacy structures and triggered_tags are)")
    tags = []
    for i, t in enumerate(fmt.get("tags", [])):
        where = f"format.tags[{i}]"
        if t.get("type", "tag") != "tag":
            raise ValueError(f"{where}: type {t.get('type')!r} is not supported by maskd")
        tags.append({"begin": t["begin"], **_content(t.get("content"), where + ".content"),
                     "end": t.get("end", "")})
    out: Dict[str, Any] = {"tags": tags, "triggers": list(fmt.get("triggers", [])),
                           "at_least_one": bool(fmt.get("at_least_one", False)),
                           "stop_after_first": bool(fmt.get("stop_after_first", False))}
    if not out["triggers"]:
        del out["triggers"]  # maskd's default: the tags' begins
    return json.dumps(out)
