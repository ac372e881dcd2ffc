"""maskd.ResumableSession against the real maskd binary: SIGKILL the server mid-generation,
restart it on the same unix socket, and every sequence finishes with exactly the masks and
tokens of an uninterrupted run; a server that stays down gives a bounded UNAVAILABLE."""
from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time
from typing import List, Tuple

import grpc
import pytest

import maskd
from maskd.resume import ResumableSession, ResumeOptions, step_resumable

from conftest import TOKENIZER_DIR, maskd_bin

RX = "[a-z]+( [a-z]+)*"
SEQS = 4
STEPS = 24
KILL_AT = 10


class Sidecar:
    """maskd on a fixed unix socket that can be SIGKILLed and started again."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="maskd-resume-")
        self.addr = f"unix://{self.dir}/maskd.sock"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self, wait: bool = True) -> None:
        self.starts += 1
        log = open(os.path.join(self.dir, f"maskd.{self.starts}.log"), "wb")
        self.proc = subprocess.Popen(
            [str(maskd_bin()), f"--listen={self.addr}", "--metrics-listen=",
             f"--tokenizer-dir={TOKENIZER_DIR}"], stdout=log, stderr=subprocess.STDOUT)
        log.close()
        if wait:
            with maskd.Client(self.addr, timeout=2) as c:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    try:
                        if c.health() == "SERVING":
                            return
                    except maskd.MaskdError:
                        pass
                    assert self.proc.poll() is None, "maskd exited"
                    time.sleep(0.05)
            raise RuntimeError("maskd did not start within 60 s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # SIGKILL: no draining, every session lost
            self.proc.wait()

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture()
def sidecar():
    s = Sidecar()
    s.start()
    yield s
    s.close()


def _sample(mask, rng: random.Random, eos: set) -> int:
    allowed = [t for t in maskd.allowed_tokens(mask) if t not in eos]
    return rng.choice(allowed)


def _generate(client: maskd.Client, eos: set, kill=None) -> Tuple[List[List[str]], List[List[int]]]:
    """SEQS sequences, STEPS batched steps each, seeded sampling; ``kill(step)`` runs before
    each step. Returns each sequence's mask digests and tokens."""
    opts = ResumeOptions(recovery_timeout=60)
    sessions = [ResumableSession.create(client, "qwen3", regex=RX, options=opts) for _ in range(SEQS)]
    rngs = [random.Random(1000 + i) for i in range(SEQS)]
    digests: List[List[str]] = [[] for _ in range(SEQS)]
    last: List[List[int]] = [[] for _ in range(SEQS)]
    for step in range(STEPS):
        if kill is not None:
            kill(step)
        if step % 3 == 2:  # some steps one session at a time, the others batched
            rows = [s.step(last[i]).raise_for_status().masks[0] for i, s in enumerate(sessions)]
        else:
            reply = step_resumable([(s, last[i]) for i, s in enumerate(sessions)]).raise_for_status()
            rows = list(reply.masks)
        for i, row in enumerate(rows):
            digests[i].append(hashlib.sha256(row.tobytes()).hexdigest())
            last[i] = [_sample(row, rngs[i], eos)]
    # The final tokens too, so that every sampled token is confirmed.
    step_resumable([(s, last[i]) for i, s in enumerate(sessions)]).raise_for_status()
    tokens = [list(s.tokens) for s in sessions]
    resumes = sum(s.resumes for s in sessions)
    for s in sessions:
        s.close()
    return digests, tokens, resumes


def test_sigkill_mid_generation_every_sequence_finishes_exactly(sidecar):
    with maskd.Client(sidecar.addr, timeout=30) as client:
        eos = set(client.tokenizer("qwen3").eos_ids)
        want_masks, want_tokens, resumes = _generate(client, eos)
        assert resumes == 0 and all(len(t) == STEPS for t in want_tokens)

        restarter: List[threading.Thread] = []

        def kill(step: int) -> None:
            if step == KILL_AT:
                sidecar.kill()
                # Restart at once and without waiting: the client first finds the socket
                # dead, then a maskd that accepts connections before its tokenizers load.
                t = threading.Thread(target=lambda: (time.sleep(0.3), sidecar.start(wait=False)))
                t.start()
                restarter.append(t)

        got_masks, got_tokens, resumes = _generate(client, eos, kill)
        for t in restarter:
            t.join()
    assert sidecar.starts == 2
    assert resumes == SEQS  # every sequence was resumed once
    assert got_tokens == want_tokens
    assert got_masks == want_masks


def test_server_stays_down_bounded_unavailable(sidecar):
    with maskd.Client(sidecar.addr, timeout=30) as client:
        opts = ResumeOptions(recovery_timeout=2.0, max_attempts=50)
        s = ResumableSession.create(client, "qwen3", regex=RX, options=opts)
        row = s.step().raise_for_status().masks[0]
        tok = maskd.allowed_tokens(row)[0]
        s.step([tok]).raise_for_status()
        sidecar.kill()
        t0 = time.monotonic()
        with pytest.raises(maskd.MaskdError) as e:
            s.step([tok])
        took = time.monotonic() - t0
        assert e.value.code == grpc.StatusCode.UNAVAILABLE
        assert "did not come back" in e.value.message
        assert took < 6, took
        assert s.tokens == (tok,)  # unchanged
        with pytest.raises(maskd.MaskdError) as e:
            step_resumable([(s, [tok])])
        assert e.value.code == grpc.StatusCode.UNAVAILABLE
        assert s.tokens == (tok,)
        s.close()


def test_rollback_and_fork_resume(sidecar):
    with maskd.Client(sidecar.addr, timeout=30) as client:
        eos = set(client.tokenizer("qwen3").eos_ids)
        s = ResumableSession.create(client, "qwen3", regex=RX)
        rng = random.Random(7)
        row = s.step().raise_for_status().masks[0]
        for _ in range(5):
            row = s.step([_sample(row, rng, eos)]).raise_for_status().masks[0]
        toks = s.tokens
        sidecar.kill()
        sidecar.start()
        assert s.rollback(2) == 3 and s.tokens == toks[:3] and s.resumes == 1
        f = s.fork()
        assert f.tokens == toks[:3] and f.session_id != s.session_id
        want = client.mask(s.index_id, toks[:3]).mask
        assert (f.step().masks[0] == want).all() and (s.step().masks[0] == want).all()
        # A token the constraint refuses: an entry error, nothing changes.
        bad = next(t for t in range(len(want) * 32) if not maskd.is_allowed(want, t))
        r = s.step([bad])
        assert r.results[0].status.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
        assert s.tokens == toks[:3]
        f.close()
        s.close()


def test_transformers_resume_true_survives_sigkill(sidecar, qwen3_dir):
    """MaskdLogitsProcessor(resume=True): SIGKILL mid-generate, same outputs as without."""
    from conftest import need

    torch = need("torch")
    need("transformers")
    from transformers import StoppingCriteria

    from maskd.integrations.transformers import MaskdLogitsProcessor
    from models import EOS, PROMPTS, REGEX, hf_tokenizer, llama

    model, tok = llama(), hf_tokenizer(qwen3_dir)
    enc = tok(PROMPTS, return_tensors="pt", padding=True)

    class KillAt(StoppingCriteria):
        def __init__(self, at: int):
            self.at, self.calls, self.threads = at, 0, []

        def __call__(self, input_ids, scores, **kwargs):
            self.calls += 1
            if self.calls == self.at:
                sidecar.kill()
                t = threading.Thread(target=lambda: (time.sleep(0.3), sidecar.start(wait=False)))
                t.start()
                self.threads.append(t)
            return torch.zeros(input_ids.shape[0], dtype=torch.bool)

    def run(kill: KillAt | None):
        with maskd.Client(sidecar.addr, timeout=30) as c:
            proc = MaskdLogitsProcessor(c, "qwen3", regex=REGEX, resume=True)
            crit = ([kill] if kill else []) + [proc.prefetch]  # kill, then the prefetch Step
            torch.manual_seed(5)
            with torch.no_grad():
                out = model.generate(**enc, logits_processor=[proc], stopping_criteria=crit,
                                     do_sample=True, top_k=0, top_p=None, temperature=None,
                                     num_return_sequences=3, max_new_tokens=24,
                                     pad_token_id=tok.pad_token_id, eos_token_id=EOS)
            resumes = sum(getattr(s, "resumes", 0) for s in proc.sessions.ids)
            proc.close()
            return out.tolist(), resumes

    want, resumes = run(None)
    assert resumes == 0
    kill = KillAt(3)
    got, resumes = run(kill)
    for t in kill.threads:
        t.join()
    assert sidecar.starts == 2 and resumes > 0
    assert got == want


def test_asyncio_resumable_session_survives_sigkill(sidecar):
    import asyncio

    import maskd.aio
    from maskd.aio_resume import AsyncResumableSession, async_step_resumable

    async def run(kill_at: int):
        async with maskd.aio.AsyncClient(sidecar.addr, timeout=30) as c:
            eos = {e for t in await c.list_tokenizers() if t.name == "qwen3" for e in t.eos_ids}
            ss = [await AsyncResumableSession.create(c, "qwen3", regex=RX) for _ in range(3)]
            rngs = [random.Random(50 + i) for i in range(3)]
            last = [[] for _ in ss]
            digests = [[] for _ in ss]
            for step in range(12):
                if step == kill_at:
                    sidecar.kill()
                    sidecar.start(wait=False)
                if step % 2:
                    rows = [(await s.step(last[i])).raise_for_status().masks[0] for i, s in enumerate(ss)]
                else:
                    rows = list((await async_step_resumable(
                        [(s, last[i]) for i, s in enumerate(ss)])).raise_for_status().masks)
                for i, row in enumerate(rows):
                    digests[i].append(hashlib.sha256(row.tobytes()).hexdigest())
                    last[i] = [_sample(row, rngs[i], eos)]
            out = (digests, [s.tokens for s in ss], sum(s.resumes for s in ss))
            for s in ss:
                await s.close()
            return out

    want = asyncio.run(run(-1))
    got = asyncio.run(run(6))
    assert want[2] == 0 and got[2] == 3 and sidecar.starts == 2
    assert got[:2] == want[:2]
