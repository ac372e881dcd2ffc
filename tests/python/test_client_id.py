"""maskd.Client(client_id=...) and maskd.aio.AsyncClient(client_id=...) against the real maskd
run with --client-identity=header: every call (unary, streams, shared memory) carries the
``maskd-client-id`` metadata, so clients on separate channels with one id share one per-client
share, another id has its own, and a bad id is refused when the client is made.

gRPC shares one connection between channels of equal options in a process; a distinct
client_name (the user agent, a channel option) gives a client a connection of its own, so two
clients with one id below are two connections, one client only through the header."""
from __future__ import annotations

import asyncio

import grpc
import pytest

import maskd
import maskd.aio
from maskd.shm import ShmLogits

from conftest import MaskdServer

SHARE = "--max-sessions-per-client=2"


@pytest.fixture(scope="module")
def header_server():
    s = MaskdServer(["--client-identity=header", SHARE, "--max-streams-per-client=1",
                     "--allow_shm", "--max-shm-regions-per-client=1"])
    yield s
    s.stop()


def _session(c: maskd.Client) -> int:
    return c.create_session(tokenizer="qwen3", regex="[0-9]+").session_id


def _refused(e: pytest.ExceptionInfo[maskd.MaskdError], client_id: str) -> None:
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value
    assert f"client id:{client_id} " in e.value.message, e.value.message


def test_clients_with_one_id_share_one_share(header_server):
    addr = header_server.addr
    with maskd.Client(addr, timeout=60, client_name="vllm", client_id="engine-7") as first, \
            maskd.Client(addr, timeout=60, client_name="sglang", client_id="engine-7") as second:
        assert first.health() == "SERVING"  # health goes through the interceptor too
        _session(first)
        kept = _session(second)
        for c in (first, second):  # the third session across both is refused
            with pytest.raises(maskd.MaskdError) as e:
                _session(c)
            _refused(e, "engine-7")
            assert "holds 2 sessions" in e.value.message and SHARE in e.value.message
        # Another id, on the same connection as `first` (equal options), is another client.
        with maskd.Client(addr, timeout=60, client_name="vllm", client_id="engine-8") as other:
            _session(other)
            _session(other)
        # A unit given back is free to either client of the id.
        second.close_session(kept)
        _session(first)


def test_streams_and_shm_carry_the_id(header_server):
    addr = header_server.addr
    with maskd.Client(addr, timeout=60, client_name="vllm", client_id="engine-9") as first, \
            maskd.Client(addr, timeout=60, client_name="sglang", client_id="engine-9") as second, \
            maskd.Client(addr, timeout=60, client_name="sglang", client_id="engine-10") as other:
        sid = _session(first)
        with first.step_stream() as mine:
            mine.step([(sid, [])]).raise_for_status()  # open on the server
            with pytest.raises(maskd.MaskdError) as e, second.step_stream() as refused:
                refused.step([(sid, [])])
            _refused(e, "engine-9")
            with other.step_stream() as theirs:
                theirs.step([(sid, [])]).raise_for_status()
        with ShmLogits(first, 1, 8):
            with pytest.raises(maskd.MaskdError) as e:
                ShmLogits(second, 1, 8)
            _refused(e, "engine-9")
            with ShmLogits(other, 1, 8):
                pass


def test_async_client_carries_the_id(header_server):
    addr = header_server.addr

    async def run() -> None:
        async with maskd.aio.AsyncClient(addr, timeout=60, client_name="vllm",
                                         client_id="engine-11") as a:
            assert await a.health() == "SERVING"
            s = await a.create_session(tokenizer="qwen3", regex="[0-9]+")
            stream = a.step_stream()
            (await stream.step([(s.session_id, [])])).raise_for_status()
            with maskd.Client(addr, timeout=60, client_name="sglang", client_id="engine-11") as b:
                _session(b)  # the share's second unit
                with pytest.raises(maskd.MaskdError) as e:
                    await a.create_session(tokenizer="qwen3", regex="[0-9]+")
                _refused(e, "engine-11")
                # a's stream holds the stream share
                with pytest.raises(maskd.MaskdError) as e, b.step_stream() as refused:
                    refused.step([(s.session_id, [])])
                _refused(e, "engine-11")
            await stream.close()

    asyncio.run(run())


BAD_IDS = ["", "bad id", "a" * 129, "caf\u00e9", "tab\there", "new\nline"]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_bad_id_is_refused_at_construction(bad):
    with pytest.raises(ValueError, match=r"1 to 128 bytes of \[A-Za-z0-9\._:@/\+-\]"):
        maskd.Client("unix:///nonexistent/maskd.sock", client_id=bad)

    async def run() -> None:
        with pytest.raises(ValueError, match="a client id is 1 to 128 bytes"):
            maskd.aio.AsyncClient("unix:///nonexistent/maskd.sock", client_id=bad)

    asyncio.run(run())


def test_good_ids_are_accepted():
    for good in ["a" * 128, "engine-7.pod_a:0@node/x+y"]:
        with maskd.Client("unix:///nonexistent/maskd.sock", client_id=good) as c:
            assert c.client_id == good
    with maskd.Client("unix:///nonexistent/maskd.sock") as c:
        assert c.client_id is None
