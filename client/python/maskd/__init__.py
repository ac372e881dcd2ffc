"""maskd: the Python client of the maskd token-mask sidecar.

    import maskd
    c = maskd.Client("unix:///tmp/maskd.sock")
    reply = c.step([(session_id, [token])])      # reply.masks: (rows, words) uint32 view
    maskd.apply_mask(logits, reply.masks)        # NumPy / torch / MLX

Modules: maskd.client (sync), maskd.aio (asyncio), maskd.masks (mask helpers),
maskd.shm (logits in shared memory), maskd.resume (sessions that survive a
server restart), maskd.integrations.{transformers,mlx_lm,outlines}.
Documentation: docs/python.md.
"""
from maskd._version import __version__
from maskd._common import Grammar, MaskdError, MaskReply, StepReply, step_request
from maskd.client import Client, StepFuture, StepStream
from maskd.resume import ResumableSession, ResumeOptions, step_resumable
from maskd.masks import allowed_tokens, apply_mask, is_allowed, unpack_mask

__all__ = ["__version__",
           "Client", "StepStream", "StepFuture", "StepReply", "MaskReply", "MaskdError", "Grammar",
           "ResumableSession", "ResumeOptions", "step_resumable",
           "apply_mask", "unpack_mask", "allowed_tokens", "is_allowed", "step_request"]
