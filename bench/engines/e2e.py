"""Real generation through an engine, constrained by maskd or by the engine's own
backend: the Python side of scripts/engine_e2e.sh (which picks the engine's venv).

    python bench/engines/e2e.py ENGINE --constraints IN.jsonl --out OUT.jsonl
        [--maskd ADDR] [--backend maskd|builtin] [--max-tokens N] [--batch B] [--seed S]

ENGINE: vllm, sglang, llama.cpp, transformers, mlx-lm. Without --maskd it starts
build/bin/maskd (or $MASKD_BIN) on a private unix socket with the bundled tokenizers and
stops it at the end. Exits 1 when an output violates its constraint (checked by
check.py), 2 on bad arguments or input.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import urllib.request
import sys
import tempfile
import time
from typing import Iterator, List, Optional, Sequence

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import check  # noqa: E402
import common  # noqa: E402

ENGINES = {"vllm": "engine_vllm", "sglang": "engine_sglang", "llama.cpp": "engine_llama_cpp",
           "transformers": "engine_transformers", "mlx-lm": "engine_mlx_lm"}
REPO = pathlib.Path(__file__).resolve().parents[2]


class LocalMaskd:
    """build/bin/maskd on unix://<tmp>/maskd.sock; SIGTERM on close."""

    def __init__(self) -> None:
        binary = os.environ.get("MASKD_BIN", str(REPO / "build" / "bin" / "maskd"))
        if not os.access(binary, os.X_OK):
            raise SystemExit(f"engine_e2e: no maskd binary at {binary} (scripts/build.sh, "
                             "or give --maskd ADDR / MASKD_BIN)")
        self.dir = tempfile.mkdtemp(prefix="maskd-e2e-")
        self.addr = f"unix://{self.dir}/maskd.sock"
        port = common.free_port()  # for the Prometheus endpoint
        self.metrics_url = f"http://127.0.0.1:{port}/metrics"
        self.log = open(os.path.join(self.dir, "maskd.log"), "w+b")
        self.proc = subprocess.Popen(
            [binary, f"--listen={self.addr}", f"--metrics-listen=127.0.0.1:{port}",
             f"--tokenizer-dir={REPO / 'data' / 'tokenizers'}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while b" INFO start " not in self._log_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise SystemExit(f"engine_e2e: maskd did not start: {self._log_text()!r}")
            time.sleep(0.05)

    def _log_text(self) -> bytes:
        self.log.seek(0)
        return self.log.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# The server's counters of the work engines give it (docs/operations.md lists them all).
COUNTERS = ("maskd_tokens_advanced_total", "maskd_step_batch_size_count",
            "maskd_step_batch_size_sum", "maskd_mask_seconds_count")


def scrape(url: str, names: Sequence[str] = COUNTERS) -> dict:
    """The values of `names` (0 where absent): a bare name sums over its label sets, a name
    with its labels (`maskd_client_step_calls_total{client="vllm"}`) is that one series."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out = {k: 0.0 for k in names}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        series, value = line.rsplit(" ", 1)
        for key in (series, series.split("{", 1)[0]):
            if key in out:
                out[key] += float(value)
                break
    return out


def parse(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="engine_e2e.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("engine", choices=sorted(ENGINES))
    p.add_argument("--constraints", required=True, type=pathlib.Path, metavar="IN.jsonl")
    p.add_argument("--out", required=True, type=pathlib.Path, metavar="OUT.jsonl")
    p.add_argument("--maskd", metavar="ADDR", help="a running maskd (default: start one)")
    p.add_argument("--backend", choices=("maskd", "builtin"), default="maskd")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if a.max_tokens < 1 or a.batch < 1:
        p.error("--max-tokens and --batch must be at least 1")
    return a


def main(argv: Optional[List[str]] = None) -> int:
    a = parse(argv)
    try:
        requests = common.read_requests(a.constraints)
    except (OSError, ValueError) as e:
        print(f"engine_e2e: {e}", file=sys.stderr)
        return 2
    module = importlib.import_module(ENGINES[a.engine])
    server = None
    if a.backend == "maskd" and a.maskd is None:
        server = LocalMaskd()
    try:
        # An engine module's model_path() names its own model format (llama.cpp: the
        # tiny model as GGUF); otherwise the tiny Hugging Face folder.
        if hasattr(module, "model_path"):
            model_dir = module.model_path()
        else:
            import tiny_model
            model_dir = tiny_model.hf_model_dir()
        ctx = common.E2EContext(engine=a.engine, requests=requests,
                                maskd_addr=a.maskd or (server.addr if server else ""),
                                backend=a.backend, max_tokens=a.max_tokens, batch=a.batch,
                                seed=a.seed, model_dir=model_dir)
        before = scrape(server.metrics_url) if server else None
        res = module.run(ctx)
        work = None
        if server is not None and before is not None:
            after = scrape(server.metrics_url)
            work = {k: after[k] - before[k] for k in COUNTERS}
    finally:
        if server is not None:
            server.close()
    by_id = {r.id: r for r in requests}
    checks = [check.check(by_id[s.id], s.text, s.finished) for s in res.samples]
    lines = common.output_lines(ctx, res, checks)
    lines[-1]["maskd_work"] = work
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    summary = lines[-1]
    print(json.dumps({k: summary[k] for k in ("engine", "backend", "requests", "finished",
                                              "violations", "unchecked", "ms_per_step",
                                              "unconstrained_ms_per_step", "p99_step_ms")}))
    return 1 if summary["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
