"""The resume rules (maskd._resume_core) under both drivers, against an in-process fake
maskd with scheduled faults: no binary needed.

The fake's mask for a session is a digest of the tokens it applied, so a mask equals the
digest of the tokens a model of the generation expects only if every resume replayed
exactly the confirmed tokens. Random scenarios (steps, batches, rollbacks; faults:
dropped calls, lost replies, restarts, NOT_SERVING, client deadlines) run through ``maskd.resume`` and
``maskd.aio_resume``: both must match that model and make the same calls in the same
order.
"""
from __future__ import annotations

import asyncio
import hashlib
import random
from typing import Any, Dict, List, Optional, Tuple

import grpc
import pytest
from grpc_health.v1 import health_pb2 as health_pb

from maskd._common import MaskdError
from maskd.aio_resume import AsyncResumableSession, async_step_resumable
from maskd.resume import ResumableSession, ResumeOptions, step_resumable, step_resumable_async
from maskd.v1 import maskd_pb2 as pb

WPR = 2  # words per mask row
REFUSED = 7  # the fake refuses every token divisible by it (FAILED_PRECONDITION)
OPTS = ResumeOptions(recovery_timeout=30, max_attempts=8, initial_backoff=0.0, max_backoff=0.0)
COMPILE = pb.CompileRequest(tokenizer="fake", regex="x")


def digest(tokens: List[int]) -> bytes:
    return hashlib.sha256(repr(list(tokens)).encode()).digest()[:4 * WPR]


class RpcFailure(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str = ""):
        self._code, self._details = code, details or code.name

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class Hang(Exception):
    """The fake applied the call and its reply never comes."""


class FakeMaskd:
    """Session RPCs of maskd in memory. ``faults[n]`` applies to the n-th call (0-based):
    "drop" (UNAVAILABLE, not applied), "lost" (applied, then UNAVAILABLE), "restart"
    (every session lost and the next health check NOT_SERVING, then the call), "deadline"
    (applied, then DEADLINE_EXCEEDED), "interrupt" (applied, then KeyboardInterrupt),
    "hang" (applied, then Hang)."""

    def __init__(self, faults: Optional[Dict[int, str]] = None):
        self.faults = dict(faults or {})
        self.sessions: Dict[int, List[int]] = {}
        self.next_sid = 1
        self.not_serving = 0
        self.calls: List[Tuple[Any, ...]] = []  # (method, what it asked)

    def handle(self, method: str, req: Any) -> Any:
        n = len(self.calls)
        self.calls.append(self._summary(method, req))
        fault = self.faults.pop(n, None)
        if fault == "drop":
            raise RpcFailure(grpc.StatusCode.UNAVAILABLE, "connection refused")
        if fault == "restart":
            self.sessions.clear()
            self.not_serving = 1
        resp = getattr(self, "_" + method)(req)
        if fault == "lost":
            raise RpcFailure(grpc.StatusCode.UNAVAILABLE, "connection reset")
        if fault == "deadline":
            raise RpcFailure(grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded")
        if fault == "interrupt":
            raise KeyboardInterrupt
        if fault == "hang":
            raise Hang
        return resp

    @staticmethod
    def _summary(method: str, req: Any) -> Tuple[Any, ...]:
        if method == "Step":
            return (method, tuple((e.session_id, tuple(e.tokens), e.rollback) for e in req.entries))
        if method in ("Rollback", "CloseSession"):
            return (method, req.session_id, getattr(req, "num_tokens", 0))
        return (method,)

    def _Health(self, req: Any) -> Any:
        serving = self.not_serving == 0
        self.not_serving = max(0, self.not_serving - 1)
        return health_pb.HealthCheckResponse(
            status=health_pb.HealthCheckResponse.SERVING if serving
            else health_pb.HealthCheckResponse.NOT_SERVING)

    def _CreateSession(self, req: pb.CreateSessionRequest) -> pb.CreateSessionResponse:
        sid, self.next_sid = self.next_sid, self.next_sid + 1
        self.sessions[sid] = []
        return pb.CreateSessionResponse(session_id=sid, index_id="idx", words_per_row=WPR)

    def _Step(self, req: pb.StepRequest) -> pb.StepResponse:
        resp = pb.StepResponse(words_per_row=WPR)
        masks = b""
        for e in req.entries:
            r = resp.results.add()
            toks = self.sessions.get(e.session_id)
            if toks is None:
                r.status.code = grpc.StatusCode.NOT_FOUND.value[0]
                r.status.message = f"session {e.session_id} not found"
            elif e.rollback > len(toks) or any(t % REFUSED == 0 for t in e.tokens):
                r.status.code = grpc.StatusCode.FAILED_PRECONDITION.value[0]
                r.status.message = "token not allowed"
            else:
                del toks[len(toks) - e.rollback:]
                toks.extend(e.tokens)
                masks += digest(toks)
                continue
            masks += b"\0" * (4 * WPR)
        resp.masks = masks
        return resp

    def _Rollback(self, req: pb.RollbackRequest) -> pb.RollbackResponse:
        toks = self.sessions.get(req.session_id)
        if toks is None:
            raise RpcFailure(grpc.StatusCode.NOT_FOUND, "session not found")
        del toks[len(toks) - req.num_tokens:]
        return pb.RollbackResponse(num_tokens=len(toks))

    def _CloseSession(self, req: pb.CloseSessionRequest) -> pb.CloseSessionResponse:
        if self.sessions.pop(req.session_id, None) is None:
            raise RpcFailure(grpc.StatusCode.NOT_FOUND, "session not found")
        return pb.CloseSessionResponse()


class _Done:
    """A grpc.Future whose call the fake answered when it was made."""

    def __init__(self, fn: Any):
        self._resp, self._err = None, None
        try:
            self._resp = fn()
        except grpc.RpcError as e:
            self._err = e

    def result(self) -> Any:
        if self._err is not None:
            raise self._err
        return self._resp

    def cancel(self) -> bool:
        return False


class _SyncMethod:
    def __init__(self, fake: FakeMaskd, name: str):
        self.fake, self.name = fake, name

    def __call__(self, req: Any, timeout: Optional[float] = None, wait_for_ready: Any = None) -> Any:
        return self.fake.handle(self.name, req)

    def future(self, req: Any, timeout: Optional[float] = None, wait_for_ready: Any = None) -> _Done:
        return _Done(lambda: self(req))


class _AsyncMethod(_SyncMethod):
    async def __call__(self, req: Any, timeout: Optional[float] = None, wait_for_ready: Any = None) -> Any:
        await asyncio.sleep(0)
        try:
            return self.fake.handle(self.name, req)
        except Hang:
            await asyncio.Event().wait()  # never set: only cancellation ends it


class _Stub:
    def __init__(self, fake: FakeMaskd, method: type):
        for name in ("CreateSession", "Step", "Rollback", "CloseSession"):
            setattr(self, name, method(fake, name))


class FakeClient:
    """What the resume drivers use of a maskd.Client (``asyncio``: of an AsyncClient)."""

    def __init__(self, fake: FakeMaskd, asyncio_: bool = False):
        method = _AsyncMethod if asyncio_ else _SyncMethod
        self.timeout = 10.0
        self.stub = _Stub(fake, method)
        self.health_check = method(fake, "Health")


# -- random scenarios, both drivers ------------------------------------------
SESSIONS = 3


def _scenario(seed: int) -> Tuple[List[Tuple[Any, ...]], Dict[int, str]]:
    rng = random.Random(seed)
    ops: List[Tuple[Any, ...]] = []
    for _ in range(30):
        kind = rng.choice(["step", "step", "batch", "batch", "rollback"])
        if kind == "step":
            ops.append(("step", rng.randrange(SESSIONS), [rng.randrange(1, 60)], rng.randrange(2)))
        elif kind == "batch":
            ops.append(("batch", [([rng.randrange(1, 60)] * rng.randrange(1, 3), rng.randrange(2))
                                  for _ in range(SESSIONS)]))
        else:
            ops.append(("rollback", rng.randrange(SESSIONS), rng.randrange(3)))
    faults = {n: rng.choice(["drop", "lost", "restart", "deadline"]) for n in range(300) if rng.random() < 0.12}
    return ops, faults


class _Model:
    """The tokens each session must have (the oracle), and the outcomes seen."""

    def __init__(self) -> None:
        self.tokens: List[List[int]] = [[] for _ in range(SESSIONS)]
        self.outcomes: List[Any] = []

    def step(self, i: int, toks: List[int], rb: int, result: Any, row: bytes) -> None:
        want = self.tokens[i][:len(self.tokens[i]) - rb] if rb else list(self.tokens[i])
        if rb > len(self.tokens[i]) or any(t % REFUSED == 0 for t in toks):
            assert result.status.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
            self.outcomes.append(("refused", i))
            return
        assert result.status.code == 0, result.status
        want += toks
        assert row == digest(want), (i, want)
        self.tokens[i] = want
        self.outcomes.append(("ok", i, tuple(want)))

    def error(self, e: MaskdError, op: Tuple[Any, ...], now: List[List[int]]) -> None:
        """A call raised: each session it covered either kept its tokens or (a batch's
        entries redone before the one that raised) took its step."""
        self.outcomes.append(("error", e.code, e.message.split(":")[0]))
        if op[0] != "batch":
            return
        for i, (toks, rb) in enumerate(op[1]):
            stepped = self.tokens[i][:len(self.tokens[i]) - rb] + toks if rb <= len(self.tokens[i]) else None
            if now[i] != self.tokens[i]:
                assert now[i] == stepped, (i, now[i], self.tokens[i], toks, rb)
                self.tokens[i] = stepped
                self.outcomes.append(("redone", i))


def _run_sync(ops: List[Tuple[Any, ...]], fake: FakeMaskd) -> _Model:
    client = FakeClient(fake)
    ss = [ResumableSession(client, COMPILE, OPTS) for _ in range(SESSIONS)]
    m = _Model()
    for op in ops:
        try:
            if op[0] == "step":
                _, i, toks, rb = op
                r = ss[i].step(toks, rollback=rb)
                m.step(i, toks, rb, r.results[0], r.masks[0].tobytes())
            elif op[0] == "batch":
                r = step_resumable([(s, toks, rb) for s, (toks, rb) in zip(ss, op[1])])
                for i, (toks, rb) in enumerate(op[1]):
                    m.step(i, toks, rb, r.results[i], r.masks[i].tobytes())
            else:
                _, i, n = op
                n = min(n, len(m.tokens[i]))
                assert ss[i].rollback(n) == len(m.tokens[i]) - n
                m.tokens[i] = m.tokens[i][:len(m.tokens[i]) - n]
                m.outcomes.append(("rollback", i, n))
        except MaskdError as e:
            m.error(e, op, [list(s.tokens) for s in ss])
        assert [list(s.tokens) for s in ss] == m.tokens
    for s in ss:
        s.close()
    return m


async def _run_async(ops: List[Tuple[Any, ...]], fake: FakeMaskd) -> _Model:
    client = FakeClient(fake, asyncio_=True)
    ss = [await AsyncResumableSession.from_compile(client, COMPILE, OPTS) for _ in range(SESSIONS)]
    m = _Model()
    for op in ops:
        try:
            if op[0] == "step":
                _, i, toks, rb = op
                r = await ss[i].step(toks, rollback=rb)
                m.step(i, toks, rb, r.results[0], r.masks[0].tobytes())
            elif op[0] == "batch":
                r = await async_step_resumable([(s, toks, rb) for s, (toks, rb) in zip(ss, op[1])])
                for i, (toks, rb) in enumerate(op[1]):
                    m.step(i, toks, rb, r.results[i], r.masks[i].tobytes())
            else:
                _, i, n = op
                n = min(n, len(m.tokens[i]))
                assert await ss[i].rollback(n) == len(m.tokens[i]) - n
                m.tokens[i] = m.tokens[i][:len(m.tokens[i]) - n]
                m.outcomes.append(("rollback", i, n))
        except MaskdError as e:
            m.error(e, op, [list(s.tokens) for s in ss])
        assert [list(s.tokens) for s in ss] == m.tokens
    for s in ss:
        await s.close()
    return m


@pytest.mark.parametrize("seed", range(40))
def test_random_faults_masks_exact_and_drivers_agree(seed):
    ops, faults = _scenario(seed)
    fake_sync, fake_async = FakeMaskd(faults), FakeMaskd(faults)
    got_sync = _run_sync(ops, fake_sync)
    got_async = asyncio.run(_run_async(ops, fake_async))
    assert got_sync.outcomes == got_async.outcomes
    assert fake_sync.calls == fake_async.calls
    assert got_sync.tokens == got_async.tokens


def test_scenarios_exercise_resumes():
    """The random scenarios are not vacuous: most recover from faults, a few give up."""
    resumed = gave_up = 0
    for seed in range(40):
        ops, faults = _scenario(seed)
        fake = FakeMaskd(faults)
        m = _run_sync(ops, fake)
        resumed += sum(1 for c in fake.calls if c[0] == "CreateSession") > SESSIONS
        gave_up += any(o[0] == "error" for o in m.outcomes)
    assert resumed >= 30 and gave_up < 40, (resumed, gave_up)


# -- calls whose outcome is unknown --------------------------------------------
def _started(fake: FakeMaskd, client: Optional[FakeClient] = None) -> Tuple[ResumableSession, List[int]]:
    s = ResumableSession(client or FakeClient(fake), COMPILE, OPTS)
    s.step([1]).raise_for_status()
    s.step([2]).raise_for_status()
    return s, [1, 2]


def _next_call(fake: FakeMaskd) -> int:
    return len(fake.calls)


@pytest.mark.parametrize("fault,raises", [("deadline", MaskdError), ("interrupt", KeyboardInterrupt)])
def test_sync_call_with_unknown_outcome_abandons_the_session(fault, raises):
    """The server applied the step but the reply did not come (the client's deadline, or
    Ctrl-C): the session is abandoned, so the next call resumes at the confirmed tokens
    instead of stepping a session that may be one token ahead."""
    fake = FakeMaskd()
    s, toks = _started(fake)
    fake.faults[_next_call(fake)] = fault
    with pytest.raises(raises):
        s.step([3])
    assert s.tokens == tuple(toks) and s.session_id == 0
    r = s.step([3]).raise_for_status()
    assert r.masks[0].tobytes() == digest(toks + [3])
    assert s.tokens == (1, 2, 3) and s.resumes == 1


def test_sync_batch_with_unknown_outcome_abandons_its_sessions():
    fake = FakeMaskd()
    client = FakeClient(fake)
    (a, ta), (b, tb) = _started(fake, client), _started(fake, client)
    fake.faults[_next_call(fake)] = "deadline"
    with pytest.raises(MaskdError) as e:
        step_resumable([(a, [3]), (b, [4])])
    assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert a.session_id == 0 and b.session_id == 0
    r = step_resumable([(a, [3]), (b, [4])]).raise_for_status()
    assert [m.tobytes() for m in r.masks] == [digest(ta + [3]), digest(tb + [4])]


def test_sync_cancelled_future_abandons_its_sessions():
    fake = FakeMaskd()
    client = FakeClient(fake)
    (a, ta), (b, tb) = _started(fake, client), _started(fake, client)
    fut = step_resumable_async([(a, [3]), (b, [4])])  # the fake applies it at once
    fut.cancel()
    assert a.session_id == 0 and b.session_id == 0 and a.tokens == tuple(ta)
    r = fut.result().raise_for_status()  # redone alone, after resuming
    assert [m.tobytes() for m in r.masks] == [digest(ta + [3]), digest(tb + [4])]
    assert a.resumes == 1 and b.resumes == 1


def test_asyncio_cancelled_step_abandons_the_session():
    async def run() -> None:
        fake = FakeMaskd()
        s = await AsyncResumableSession.from_compile(FakeClient(fake, asyncio_=True), COMPILE, OPTS)
        (await s.step([1])).raise_for_status()
        fake.faults[_next_call(fake)] = "hang"
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(s.step([2]), 0.05)
        assert s.tokens == (1,) and s.session_id == 0
        r = (await s.step([2])).raise_for_status()
        assert r.masks[0].tobytes() == digest([1, 2]) and s.resumes == 1

        fake.faults[_next_call(fake)] = "hang"
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(async_step_resumable([(s, [3])]), 0.05)
        assert s.tokens == (1, 2) and s.session_id == 0
        r = (await async_step_resumable([(s, [3])])).raise_for_status()
        assert r.masks[0].tobytes() == digest([1, 2, 3])

    asyncio.run(run())


# -- pinned details --------------------------------------------------------------
def test_replay_refused_names_the_chunk_in_both_drivers():
    """A resumed session whose confirmed tokens the server now refuses fails with
    FAILED_PRECONDITION naming the replay chunk (sync, asyncio and C++ alike)."""
    opts = ResumeOptions(max_attempts=3, initial_backoff=0.0, max_backoff=0.0, replay_chunk_tokens=2)

    want = "resume: the server refused the replayed tokens 2..3 (tokenizer changed?): token not allowed"
    fake = FakeMaskd()
    s = ResumableSession(FakeClient(fake), COMPILE, opts)
    for t in (1, 2, 3):
        s.step([t]).raise_for_status()
    fake.sessions.clear()
    fake._Step = _refusing(fake._Step, 3)  # type: ignore[method-assign]
    with pytest.raises(MaskdError) as e:
        s.step([4])
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION and e.value.message == want

    async def run() -> MaskdError:
        fake = FakeMaskd()
        s = await AsyncResumableSession.from_compile(FakeClient(fake, asyncio_=True), COMPILE, opts)
        for t in (1, 2, 3):
            (await s.step([t])).raise_for_status()
        fake.sessions.clear()
        fake._Step = _refusing(fake._Step, 3)  # type: ignore[method-assign]
        with pytest.raises(MaskdError) as e:
            await s.step([4])
        return e.value

    err = asyncio.run(run())
    assert err.code == grpc.StatusCode.FAILED_PRECONDITION and err.message == want


def _refusing(step: Any, token: int) -> Any:
    """A fake Step that also refuses ``token``."""

    def refusing(req: pb.StepRequest) -> pb.StepResponse:
        if any(token in e.tokens for e in req.entries):
            resp = pb.StepResponse(words_per_row=WPR, masks=b"\0" * (4 * WPR * len(req.entries)))
            for _ in req.entries:
                r = resp.results.add()
                r.status.code = grpc.StatusCode.FAILED_PRECONDITION.value[0]
                r.status.message = "token not allowed"
            return resp
        return step(req)

    return refusing


def test_closed_session_and_mixed_clients():
    fake = FakeMaskd()
    c1, c2 = FakeClient(fake), FakeClient(fake)
    a, b = ResumableSession(c1, COMPILE, OPTS), ResumableSession(c2, COMPILE, OPTS)
    with pytest.raises(ValueError, match="step_resumable: every session must use the same Client"):
        step_resumable([(a, []), (b, [])])
    a.close()
    a.close()  # twice: nothing
    for call in (lambda: a.step([1]), lambda: a.rollback(0), a.fork):
        with pytest.raises(MaskdError) as e:
            call()
        assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION and "session closed" in e.value.message
    with pytest.raises(MaskdError) as e:
        b.rollback(1)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    fake.sessions.clear()
    b.close()  # a session the server lost: not an error
