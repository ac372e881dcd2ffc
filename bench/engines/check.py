"""Independent checks of an engine's output against its constraint: Python's `regex`
(full match; a partial match for output cut at max_tokens), `jsonschema`, and `lark`.
None means unchecked: GBNF (no independent GBNF parser on PyPI), or a JSON / Lark output
cut before its end (a prefix is not a document)."""
from __future__ import annotations

import json
from typing import Optional

from common import Request


def check(req: Request, text: str, finished: bool) -> Optional[bool]:
    if req.kind == "regex":
        import regex
        return regex.fullmatch(req.constraint, text, partial=not finished) is not None
    if not finished or req.kind == "gbnf":
        return None
    if req.kind == "json_schema":
        import jsonschema
        try:
            jsonschema.validate(json.loads(text), json.loads(req.constraint))
        except (ValueError, jsonschema.ValidationError):
            return False
        return True
    import lark
    try:
        lark.Lark(req.constraint, parser="earley", lexer="dynamic").parse(text)
    except lark.LarkError:
        return False
    return True
