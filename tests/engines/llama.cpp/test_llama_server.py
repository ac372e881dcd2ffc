"""llama-server with maskd as its grammar sampler: llama.cpp's own HTTP server, built with
client/llama_sampler/llama_server.patch and llama_server_hook.cc
(tests/engines/llama.cpp/build_sampler.sh --server), run on the tiny GGUF with a real
maskd. Requests use llama-server's own /completion fields (`grammar`, `json_schema`); every output is
checked by a matcher that is not maskd (`regex`, `jsonschema`, `lark`), and maskd's
per-engine counters show that maskd did the masking. Skipped when the server is not built.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any, Dict, Iterator, Tuple

import jsonschema
import lark
import pytest
import regex

import common  # bench/engines (on the path: tests/engines/conftest.py)
import e2e
from tiny_gguf import gguf_model_path

REPO = pathlib.Path(__file__).resolve().parents[3]
SERVER_BIN = pathlib.Path(os.environ.get(
    "MASKD_LLAMA_SERVER_BIN", REPO / "build-llama" / "bin" / "llama-server"))
pytestmark = pytest.mark.skipif(
    not SERVER_BIN.exists(),
    reason="llama-server not built (tests/engines/llama.cpp/build_sampler.sh --server)")

PHONE_GBNF = 'root ::= [0-9]{3} "-" [0-9]{4} (" ext. " [0-9]{1,3})?\n'
PHONE_RE = r"[0-9]{3}-[0-9]{4}( ext\. [0-9]{1,3})?"
SUM_GBNF = 'root ::= term ("+" term)*\nterm ::= [0-9]{1,3} | "(" root ")"\n'
SUM_LARK = 'start: root\nroot: term ("+" term)*\nterm: /[0-9]{1,3}/ | "(" root ")"\n'
PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
          "properties": {"name": {"type": "string", "maxLength": 8},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120}}}
SEEDS = (1, 2, 3)
N_PREDICT = 160


def http_json(url: str, body: Dict[str, Any] | None = None,
              timeout: float = 120) -> Tuple[int, Dict[str, Any]]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


STEPS = 'maskd_client_step_entries_total{client="llama.cpp"}'


def steps(metrics_url: str) -> float:
    """Step entries maskd has counted from llama.cpp clients."""
    return float(e2e.scrape(metrics_url, (STEPS,))[STEPS])


@pytest.fixture(scope="module")
def maskd_with_metrics() -> Iterator[Tuple[str, str]]:
    s = e2e.LocalMaskd()  # build/bin/maskd (or $MASKD_BIN), its metrics on a free port
    yield s.addr, s.metrics_url
    s.close()


class LlamaServer:
    """llama-server on a free loopback port, with MASKD_LLAMA_ADDR as given."""

    def __init__(self, maskd_addr: str | None) -> None:
        self.port = common.free_port()
        env = dict(os.environ)
        env.pop("MASKD_LLAMA_ADDR", None)
        if maskd_addr is not None:
            env["MASKD_LLAMA_ADDR"] = maskd_addr
            env["MASKD_LLAMA_TOKENIZER"] = "qwen3"
        self.log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log")
        self.proc = subprocess.Popen(
            [str(SERVER_BIN), "-m", str(gguf_model_path()), "--host", "127.0.0.1",
             "--port", str(self.port), "-t", "1", "-c", "512", "-np", "1", "--no-webui"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log_text()
            try:
                if http_json(self.url("/health"), timeout=5)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise AssertionError("llama-server did not start: " + self.log_text())

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def log_text(self) -> str:
        return pathlib.Path(self.log.name).read_text(errors="replace")[-4000:]

    def complete(self, seed: int, **constraint: Any) -> Tuple[int, Dict[str, Any]]:
        body = {"prompt": "Answer in the requested format:", "n_predict": N_PREDICT,
                "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "seed": seed,
                "cache_prompt": False, **constraint}
        return http_json(self.url("/completion"), body)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def llama_server(maskd_with_metrics) -> Iterator[LlamaServer]:
    s = LlamaServer(maskd_with_metrics[0])
    yield s
    s.stop()


def finished(out: Dict[str, Any]) -> bool:
    return out.get("stop_type") == "eos"


CASES = {
    "phone": ({"grammar": PHONE_GBNF}, lambda t: regex.fullmatch(PHONE_RE, t) is not None),
    "sum": ({"grammar": SUM_GBNF}, lambda t: lark.Lark(SUM_LARK).parse(t) is not None),
    "person": ({"json_schema": PERSON},
               lambda t: jsonschema.validate(json.loads(t), PERSON) is None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_are_valid_and_maskd_did_the_work(llama_server, maskd_with_metrics,
                                                  case: str) -> None:
    fields, valid = CASES[case]
    _, metrics_url = maskd_with_metrics
    before = steps(metrics_url)
    generated = 0
    for seed in SEEDS:
        status, out = llama_server.complete(seed, **fields)
        assert status == 200, (out, llama_server.log_text())
        text = out["content"]
        generated += int(out["tokens_predicted"])
        assert finished(out), (case, seed, out)  # the constraint ended it (EOS), not n_predict
        assert valid(text), (case, seed, text)
    # Every generated token but the EOS was stepped through maskd by llama-server's sampler.
    assert steps(metrics_url) - before >= generated - len(SEEDS) > 0


def test_unconstrained_output_would_fail(llama_server) -> None:
    """The tiny model alone does not write these formats: the masks made them valid."""
    status, out = llama_server.complete(1)
    assert status == 200
    for _, valid in CASES.values():
        assert not _safe(valid, out), out["content"]


def _safe(valid, out: Dict[str, Any]) -> bool:
    try:
        return bool(valid(out["content"]))
    except Exception:  # noqa: BLE001 - an invalid text may raise in a matcher
        return False


def test_chat_response_format_stays_with_llama_cpp(llama_server, maskd_with_metrics) -> None:
    """Chat completions' response_format: the chat template's grammar, which llama.cpp feeds
    the template's generation prompt (special tokens), stays with llama.cpp's sampler; the
    output is valid JSON and maskd is not asked."""
    _, metrics_url = maskd_with_metrics
    before = steps(metrics_url)
    status, out = http_json(llama_server.url("/v1/chat/completions"), {
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 64, "seed": 1,
        "temperature": 1.0, "response_format": {"type": "json_object"}})
    assert status == 200, out
    choice = out["choices"][0]
    if choice["finish_reason"] == "stop":
        assert isinstance(json.loads(choice["message"]["content"]), dict), choice
    assert steps(metrics_url) == before


def test_grammar_maskd_refuses_fails_the_request_with_its_message(llama_server) -> None:
    status, out = llama_server.complete(1, grammar='root ::= "a" undefined\n')
    assert status == 400, out
    message = json.dumps(out)
    assert "maskd" in message and "undefined" in message, message


def test_without_the_setting_llama_cpp_serves_grammars(maskd_with_metrics) -> None:
    """No MASKD_LLAMA_ADDR: llama.cpp's own grammar sampler, maskd untouched."""
    _, metrics_url = maskd_with_metrics
    before = steps(metrics_url)
    s = LlamaServer(None)
    try:
        status, out = s.complete(1, grammar=PHONE_GBNF)
        assert status == 200 and regex.fullmatch(PHONE_RE, out["content"]), out
    finally:
        s.stop()
    assert steps(metrics_url) == before
