"""Outlines 1.x: keep Outlines' models, output types and Generator; maskd computes the masks.

    import outlines
    from maskd.integrations.outlines import Generator
    model = outlines.from_transformers(hf_model, hf_tokenizer)       # or outlines.from_mlxlm(...)
    gen = Generator(model, Person, client="unix:///tmp/maskd.sock", tokenizer="qwen3")
    text = gen("Describe a person as JSON:", max_new_tokens=200)      # as outlines.Generator

Integration point: Outlines' own ``outlines.Generator(model, processor=...)`` hook (a
SteerableGenerator built from an ``OutlinesLogitsProcessor``). ``Generator`` here turns
the output type into a term with Outlines' own ``python_types_to_terms`` (so a regex
``outlines.types.Regex``, a Pydantic model, a JSON Schema string / ``JsonSchema``, a
``Literal[...]``, ``int`` etc. mean what they mean in Outlines), compiles it on maskd
(JSON Schema terms as JSON Schema, everything else as the regex Outlines derives), and
returns Outlines' generator around a ``MaskdOutlinesProcessor``. A ``CFG`` output type
(a Lark grammar) is compiled as a maskd grammar (docs/grammars.md lists the Lark subset). For transformers models it also passes
the processor's prefetch StoppingCriteria so the Step overlaps the forward pass; for
mlx-lm models the processor overlaps by itself (maskd.integrations.mlx_lm).

JSON layout: maskd writes JSON as ``json.dumps`` does (``", "`` and ``": "``); Outlines'
``whitespace_pattern`` is not used.
"""
from __future__ import annotations

from typing import Any, Dict

from outlines import Generator as _OutlinesGenerator
from outlines.processors import OutlinesLogitsProcessor
from outlines.types import CFG, JsonSchema
from outlines.types.dsl import python_types_to_terms, to_regex

from maskd._common import Grammar
from maskd.client import Client
from maskd.integrations._core import connect


def compile_output_type(client: Client, tokenizer: str, output_type: Any) -> str:
    """Compiles an Outlines output type on maskd; returns the index id."""
    term = python_types_to_terms(output_type)
    if isinstance(term, CFG):
        return client.compile(tokenizer, grammar=Grammar(term.definition, "lark")).index_id
    if isinstance(term, JsonSchema):
        return client.compile(tokenizer, json_schema=term.schema).index_id
    return client.compile(tokenizer, regex=to_regex(term)).index_id


class MaskdOutlinesProcessor(OutlinesLogitsProcessor):
    """An Outlines logits processor whose masks come from maskd.

    Args:
      client: a maskd.Client or an address.
      tokenizer: the maskd tokenizer name matching the model's tokenizer.
      index_id: the compiled constraint (see ``compile_output_type``).
      tensor_library_name: the Outlines model's (``"torch"`` or ``"mlx"``).
    """

    def __init__(self, client: Any, tokenizer: str, index_id: str, tensor_library_name: str):
        super().__init__(tensor_library_name)
        self.client = connect(client, "outlines")
        self.tokenizer = tokenizer
        self.index_id = index_id
        self.tensor_library_name = tensor_library_name
        if tensor_library_name == "torch":
            from maskd.integrations.transformers import MaskdLogitsProcessor as Torch

            self.inner: Any = Torch(self.client, tokenizer, index_id=index_id)
            # The transformers processor's StoppingCriteria (MaskdGenerator passes it on).
            self.prefetch: Any = self.inner.prefetch
        elif tensor_library_name == "mlx":
            from maskd.integrations.mlx_lm import MaskdLogitsProcessor as Mlx

            self.inner = Mlx(self.client, tokenizer, index_id=index_id)
            self.prefetch = None
        else:
            raise NotImplementedError(f"maskd's Outlines processor supports torch and mlx models, "
                                      f"not {tensor_library_name}")

    def reset(self) -> None:
        """A new generation: the sessions of the previous one are closed."""
        self.inner.close()

    def process_logits(self, input_ids: Any, logits: Any) -> Any:
        if self.tensor_library_name == "torch":
            return self.inner(input_ids, logits)
        # mlx-lm: one row per call (generate) or one call per row (batch_generate).
        if logits.shape[0] != 1:
            raise ValueError("mlx logits must come one row at a time")
        return self.inner(input_ids[0], logits)


class MaskdGenerator:
    """Outlines' SteerableGenerator with a maskd processor (see ``Generator``)."""

    def __init__(self, model: Any, processor: MaskdOutlinesProcessor):
        self.model = model
        self.logits_processor = processor
        self.generator = _OutlinesGenerator(model, processor=processor)

    def _kwargs(self, kw: Dict[str, Any]) -> Dict[str, Any]:
        if self.logits_processor.prefetch is not None and "stopping_criteria" not in kw:
            from transformers import StoppingCriteriaList

            kw["stopping_criteria"] = StoppingCriteriaList([self.logits_processor.prefetch])
        return kw

    def __call__(self, prompt: Any, **inference_kwargs: Any) -> Any:
        return self.generator(prompt, **self._kwargs(inference_kwargs))

    def batch(self, prompts: Any, **inference_kwargs: Any) -> Any:
        return self.generator.batch(prompts, **self._kwargs(inference_kwargs))

    def stream(self, prompt: Any, **inference_kwargs: Any) -> Any:
        return self.generator.stream(prompt, **self._kwargs(inference_kwargs))

    def close(self) -> None:
        self.logits_processor.reset()


def Generator(model: Any, output_type: Any, *, client: Any, tokenizer: str) -> MaskdGenerator:
    """``outlines.Generator(model, output_type)`` with masks computed by maskd.

    Args:
      model: an Outlines steerable model (``outlines.from_transformers``, ``outlines.from_mlxlm``).
      output_type: any Outlines output type except a CFG.
      client: a maskd.Client or an address; tokenizer: the maskd tokenizer name.
    """
    c = connect(client, "outlines")
    index_id = compile_output_type(c, tokenizer, output_type)
    proc = MaskdOutlinesProcessor(c, tokenizer, index_id, model.tensor_library_name)
    return MaskdGenerator(model, proc)
