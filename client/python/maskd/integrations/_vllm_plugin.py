"""maskd's vLLM plugin (entry point ``vllm.general_plugins``: ``maskd``), loaded by vLLM in
every process (front end, engine core, workers). It changes nothing unless the environment
variable ``MASKD_VLLM_ADDR`` names a maskd server; then every structured-output request is
served by ``maskd.integrations.vllm.MaskdBackend``, whatever builtin backend vLLM's config
names (vLLM's backend names are a fixed list, so none can name maskd):

- the request validators of vLLM's xgrammar and guidance backends (run in the front end,
  for "auto" and for those names) accept what maskd compiles: maskd reports a bad
  constraint when it compiles it, which fails that request only;
- ``StructuredOutputManager`` (engine core) builds a ``MaskdBackend`` instead of its own,
  and compiles with the request's ``max_tokens`` (maskd's budget mode);
- the scheduler, once it has accepted a step's sampled tokens, has the backend send the next
  Step at once (``MaskdBackend.prefetch``), so it runs during scheduling and the forward pass.

The variable is read when used, not when the plugin loads, so one process can create a
vLLM engine without maskd and another with it.
"""
from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable, Optional

log = logging.getLogger("maskd.vllm")

ENV_ADDR = "MASKD_VLLM_ADDR"
_registered = False


def maskd_addr() -> Optional[str]:
    """The maskd server vLLM's structured outputs use, or None (vLLM's own backends)."""
    return os.environ.get(ENV_ADDR) or None


def _validate_for_maskd(params: Any) -> None:
    """What maskd needs checked before a request is queued: the JSON Schema parses. Every
    other error (a bad regex, grammar or schema) comes from maskd's compile."""
    from vllm.exceptions import VLLMValidationError
    so = params.structured_outputs
    if so is None:
        return
    if isinstance(so.json, str):
        try:
            json.loads(so.json)
        except json.JSONDecodeError as e:
            raise VLLMValidationError(f"invalid JSON schema: {e}") from None


def _routed(original: Callable[..., Any]) -> Callable[..., Any]:
    def validate(params: Any, *args: Any, **kwargs: Any) -> Any:
        if maskd_addr():
            return _validate_for_maskd(params)
        return original(params, *args, **kwargs)
    validate.__wrapped__ = original  # type: ignore[attr-defined]
    return validate


def _create_with_budget(manager: Any, request: Any) -> Any:
    """StructuredOutputManager._create_grammar for MaskdBackend: the same compile, plus
    the request's max_tokens (engine core's Request.max_tokens) as the budget."""
    so = request.structured_output_request
    request_type, spec = so.structured_output_key
    sp = request.sampling_params
    stops = sp.all_stop_token_ids if sp is not None else None
    budget = None
    if sp is not None and not getattr(sp, "ignore_eos", False):
        budget = getattr(request, "max_tokens", None) or sp.max_tokens
    try:
        return manager.backend.compile_grammar(request_type, spec, stop_token_ids=stops,
                                               max_tokens=budget)
    except Exception:
        log.exception("maskd: compiling the constraint of request %s failed",
                      request.request_id)
        raise


def register() -> None:
    """The entry point: installs the routing (idempotent; vLLM may call it repeatedly)."""
    global _registered
    if _registered:
        return
    try:
        from vllm.v1.structured_output import StructuredOutputManager, backend_guidance, \
            backend_xgrammar
    except ImportError as e:  # a vLLM without the v1 structured-output layer
        log.warning("maskd: vLLM plugin not installed: %s", e)
        return
    _registered = True
    backend_xgrammar.validate_xgrammar_grammar = _routed(backend_xgrammar.validate_xgrammar_grammar)
    backend_guidance.validate_guidance_grammar = _routed(backend_guidance.validate_guidance_grammar)

    grammar_init = StructuredOutputManager.grammar_init
    create_grammar = StructuredOutputManager._create_grammar

    def maskd_grammar_init(self: Any, request: Any) -> None:
        addr = maskd_addr()
        if addr and self.backend is None and request.structured_output_request is not None:
            from maskd.integrations.vllm import MaskdBackend
            self.backend = MaskdBackend(self.vllm_config, tokenizer=self.tokenizer,
                                        vocab_size=self.vllm_config.model_config.get_vocab_size(),
                                        addr=addr)
            log.info("maskd: vLLM structured outputs served by maskd at %s", addr)
        grammar_init(self, request)

    def maskd_create_grammar(self: Any, request: Any) -> Any:
        if getattr(self.backend, "is_maskd", False):
            return _create_with_budget(self, request)
        return create_grammar(self, request)

    setattr(StructuredOutputManager, "grammar_init", maskd_grammar_init)
    setattr(StructuredOutputManager, "_create_grammar", maskd_create_grammar)

    try:
        from vllm.v1.core.sched.scheduler import Scheduler
    except ImportError:
        return  # no early Step: the first fill_bitmask of each step sends it
    update_from_output = Scheduler.update_from_output

    def maskd_update_from_output(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = update_from_output(self, *args, **kwargs)
        backend: Any = getattr(self.structured_output_manager, "backend", None)
        if getattr(backend, "is_maskd", False):
            backend.prefetch()  # the step's accepted tokens are all in: send the next Step
        return out

    setattr(Scheduler, "update_from_output", maskd_update_from_output)
