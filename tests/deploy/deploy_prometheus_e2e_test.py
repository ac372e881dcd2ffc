#!/usr/bin/env python3
"""End to end, on loopback only: a real maskd and a real Prometheus server (Debian's package)
scraping it every second with deploy/prometheus/maskd-rules.yaml loaded; `maskctl bench` drives a
known workload; then EVERY expression of the Grafana dashboard and of the rules is sent to
Prometheus's HTTP API: each must parse and run, and the core ones (step rate, latency quantiles,
sessions, cache hits) must return data. `promtool check metrics` must pass on maskd's own /metrics.
Every wait is bounded; the processes it starts are stopped whatever happens.

Usage: deploy_prometheus_e2e_test.py [BIN_DIR]   (BIN_DIR holds maskd and maskctl; default: $MASKD_BIN_DIR,
else the newest build*/bin of the repository). Skips (exit 77) when maskd, maskctl, prometheus or a
tokenizer is missing, unless MASKD_DEPLOY_STRICT=1."""
import glob
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_common import (DASHBOARD, REPO, RULES, check, dashboard_exprs, finish,  # noqa: E402
                           grafana_substitute, need_yaml, rule_exprs, run, skip, tool)

yaml = need_yaml()
HOST = "127.0.0.1"  # loopback only
BENCH_REGEX = os.environ.get("MASKD_E2E_REGEX", r'\{"id": [0-9]{1,6}, "name": "[a-z]{1,12}"\}')
BENCH_REGEX2 = os.environ.get("MASKD_E2E_REGEX2", r"[a-z]+( [a-z]+){0,7}\.")
BENCH_SESSIONS = int(os.environ.get("MASKD_E2E_SESSIONS", "8"))
BENCH_STEPS = int(os.environ.get("MASKD_E2E_STEPS", "40"))
FLAGS = os.path.join(REPO, "deploy", "k8s", "base", "maskd.flags")


def find_bins():
    cands = []
    if len(sys.argv) > 1:
        cands.append(sys.argv[1])
    if os.environ.get("MASKD_BIN_DIR"):
        cands.append(os.environ["MASKD_BIN_DIR"])
    cands += sorted(glob.glob(os.path.join(REPO, "build*", "bin")), key=lambda d: -os.path.getmtime(d))
    for d in cands:
        m, c = os.path.join(d, "maskd"), os.path.join(d, "maskctl")
        if os.access(m, os.X_OK) and os.access(c, os.X_OK):
            return os.path.abspath(m), os.path.abspath(c)
    return None, None


def tokenizer_dir(tmp):
    """data/tokenizers if it holds a tokenizer, else ../shared/tokenizers/qwen3 linked into tmp."""
    def has_tok(d):
        return glob.glob(os.path.join(d, "*", "tokenizer.json*"))
    bundled = os.path.join(REPO, "data", "tokenizers")
    if has_tok(bundled):
        names = sorted(os.path.basename(os.path.dirname(p)) for p in has_tok(bundled))
        return bundled, ("qwen3" if "qwen3" in names else names[0])
    shared = os.path.abspath(os.path.join(REPO, "..", "shared", "tokenizers", "qwen3"))
    if glob.glob(os.path.join(shared, "tokenizer.json*")):
        d = os.path.join(tmp, "tokenizers")
        os.makedirs(d)
        os.symlink(shared, os.path.join(d, "qwen3"))
        return d, "qwen3"
    return None, None


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode("utf-8", "replace")


def wait_for(what, fn, timeout, interval=0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except (OSError, urllib.error.URLError, ValueError) as e:
            last = e
        time.sleep(interval)
    print(f"  timed out after {timeout} s waiting for {what} (last error: {last})")
    return None


def stop(proc, name, timeout=30):
    if proc is None or proc.poll() is not None:
        return proc.returncode if proc else None
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"  {name} did not stop within {timeout} s of SIGTERM: killed")
        proc.kill()
        proc.wait(timeout=10)
        return None


def main():
    maskd, maskctl = find_bins()
    if not maskd:
        skip("maskd/maskctl not built", "build the targets maskd and maskctl first, or pass BIN_DIR / set MASKD_BIN_DIR")
    prometheus = tool("PROMETHEUS", "prometheus")
    promtool = tool("PROMTOOL", "promtool")
    if not prometheus or not promtool:
        skip("prometheus/promtool not installed (Debian package prometheus)")
    print(f"maskd {maskd}\nprometheus {prometheus}")

    tmp = tempfile.mkdtemp(prefix="maskd-e2e-")
    procs = {}
    logs = {}
    try:
        tokdir, tokname = tokenizer_dir(tmp)
        if not tokdir:
            skip("no tokenizer: data/tokenizers is empty and ../shared/tokenizers/qwen3 is absent", "add a tokenizer to data/tokenizers")
        grpc_port, metrics_port, prom_port = free_port(), free_port(), free_port()
        addr = f"{HOST}:{grpc_port}"
        metrics_url = f"http://{HOST}:{metrics_port}/metrics"

        # maskd runs with the deployment's own flag file (deploy/k8s/base/maskd.flags), its addresses
        # and folders moved to loopback and this test's temporary folder.
        sock = os.path.join(tmp, "maskd.sock")
        flagfile = os.path.join(tmp, "maskd.flags")
        with open(FLAGS) as f:
            lines = f.read().splitlines()
        moved = {"listen": f"unix://{sock},{addr}", "metrics_listen": f"{HOST}:{metrics_port}",
                 "tokenizer_dir": tokdir, "grace_period": "5s"}
        out = []
        for line in lines:
            m = re.match(r"--([a-z0-9_]+)=", line)
            out.append(f"--{m.group(1)}={moved.pop(m.group(1))}" if m and m.group(1) in moved else line)
        out += [f"--{k}={v}" for k, v in moved.items()]
        with open(flagfile, "w") as f:
            f.write("\n".join(out) + "\n")
        logs["maskd"] = open(os.path.join(tmp, "maskd.log"), "w+")
        cmd = [maskd, f"--flagfile={flagfile}"]
        print("  flag file:\n" + "\n".join("    " + l for l in out if l.startswith("--")))
        print("$ " + " ".join(cmd))
        procs["maskd"] = subprocess.Popen(cmd, stdout=logs["maskd"], stderr=subprocess.STDOUT, cwd=tmp)
        ok = wait_for("maskd /metrics", lambda: procs["maskd"].poll() is None and http_get(metrics_url)[0] == 200, 180)
        ok = ok and wait_for("maskd health SERVING", lambda: procs["maskd"].poll() is None and run(
            [maskctl, "--addr", addr, "health"], timeout=10).returncode == 0, 180, interval=1)
        if not check(bool(ok), "maskd starts from the deployment's flag file, serves /metrics and reports SERVING"):
            return
        r = run([maskctl, "--addr", f"unix://{sock}", "health"], timeout=10)
        check(r.returncode == 0, f"health SERVING over the unix socket too ({r.stdout.strip()} {r.stderr.strip()})")

        # promtool check metrics on maskd's own exposition.
        _, text = http_get(metrics_url)
        r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        check(r.returncode == 0, f"promtool check metrics on maskd's /metrics\n{r.stdout}{r.stderr}".rstrip())

        # Prometheus: scrape every second, evaluate the real rules every second.
        rules = yaml.safe_load(open(RULES))
        for g in rules["groups"]:
            g["interval"] = "1s"
        with open(os.path.join(tmp, "maskd-rules.yaml"), "w") as f:
            yaml.safe_dump(rules, f)
        cfg = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
               "rule_files": ["maskd-rules.yaml"],
               "scrape_configs": [{"job_name": "maskd", "static_configs": [{"targets": [f"{HOST}:{metrics_port}"]}]}]}
        with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
            yaml.safe_dump(cfg, f)
        logs["prometheus"] = open(os.path.join(tmp, "prometheus.log"), "w+")
        pcmd = [prometheus, f"--config.file={tmp}/prometheus.yml", f"--storage.tsdb.path={tmp}/tsdb",
                f"--web.listen-address={HOST}:{prom_port}", "--storage.tsdb.retention.time=1h"]
        print("$ " + " ".join(pcmd))
        procs["prometheus"] = subprocess.Popen(pcmd, stdout=logs["prometheus"], stderr=subprocess.STDOUT, cwd=tmp)
        api = f"http://{HOST}:{prom_port}/api/v1"

        def query(q):
            st, body = http_get(f"{api}/query?" + urllib.parse.urlencode({"query": q}))
            return json.loads(body)

        def query_safe(q):
            try:
                return query(q)
            except urllib.error.HTTPError as e:  # 400 = does not parse
                return json.loads(e.read().decode() or "{}") | {"status": "error", "http": e.code}

        ok = wait_for("Prometheus ready", lambda: http_get(f"http://{HOST}:{prom_port}/-/ready")[0] == 200, 60)
        ok = ok and wait_for("3 scrapes of maskd", lambda: any(
            float(s["value"][1]) >= 3 for s in query('count_over_time(up{job="maskd"}[1m])')["data"]["result"]), 60)
        if not check(bool(ok), "Prometheus is ready and scrapes maskd"):
            return

        # The known workload: twice the same regex (the second compile is a cache hit), then another
        # regex (a second compilation, so that compile rates are not 0/0 on a series just created).
        for i, regex in ((1, BENCH_REGEX), (2, BENCH_REGEX), (3, BENCH_REGEX2)):
            bcmd = [maskctl, "--addr", addr, "bench", "--tokenizer", tokname, "--regex", regex,
                    "--sessions", str(BENCH_SESSIONS), "--steps", str(BENCH_STEPS)]
            print("$ " + " ".join(bcmd))
            r = run(bcmd, timeout=300)
            print("\n".join("    " + l for l in (r.stdout + r.stderr).strip().splitlines()[-8:]))
            check(r.returncode == 0, f"maskctl bench run {i} exits 0")
            # Prometheus scrapes this run's counters before the next run (a series that appears and
            # moves between two scrapes has no rate).
            _, after = http_get(metrics_url)
            m = re.search(r"^maskd_step_seconds_count (\S+)", after, re.M)
            steps_done = float(m.group(1)) if m else 0
            ok = wait_for(f"Prometheus to scrape run {i}'s steps", lambda: any(
                float(s["value"][1]) >= steps_done for s in query("maskd_step_seconds_count")["data"]["result"]), 30)
            check(steps_done > 0 and bool(ok), f"Prometheus scraped the step count after run {i} ({steps_done:.0f})")
        time.sleep(3)  # a few rule evaluations on the final data

        exprs = [("dashboard", t, grafana_substitute(e)) for t, e in dashboard_exprs(json.load(open(DASHBOARD)))]
        exprs += [("rules", n, e) for n, e in rule_exprs(rules)]
        core = {  # must return at least one sample with a finite value
            ("dashboard", "Step latency p50 / p99"), ("dashboard", "Steps and tokens per second"),
            ("dashboard", "Steps / s"), ("dashboard", "Active sessions"), ("dashboard", "Cache hit ratio"),
            ("dashboard", "Active sessions and cap"), ("dashboard", "maskd targets up"),
            ("rules", "maskd:step_seconds:p50_rate5m"), ("rules", "maskd:step_seconds:p99_rate5m"),
            ("rules", "maskd:steps:rate5m"), ("rules", "maskd:tokens_advanced:rate5m"),
            ("rules", "maskd:step_batch_size:mean_rate5m"), ("rules", "maskd:index_cache_hit:ratio_rate10m"),
            ("rules", "maskd:compiles:rate10m"), ("rules", "maskd:compile_failures:ratio_rate10m"),
            ("rules", "MaskdTargetsMissing"),
        }
        print(f"{len(exprs)} expressions:")
        for src, name, e in exprs:
            res = query_safe(e)
            parsed = res.get("status") == "success"
            series = res.get("data", {}).get("result", []) if parsed else []
            finite = [s for s in series if not math.isnan(float(s["value"][1]))]
            tag = f"{src}: {name}: {e if len(e) < 140 else e[:137] + '...'}"
            if not check(parsed, f"parses and runs ({len(series)} series) {tag}" + ("" if parsed else f"\n    {res}")):
                continue
            if (src, name) in core and "maskd_sessions_max" not in e:  # not exported yet: warned below
                if name == "MaskdTargetsMissing":  # absent(): must be empty while maskd is scraped
                    check(not series, f"core: absent(up{{job=\"maskd\"}}) is empty while maskd is up")
                else:
                    check(bool(finite), f"core: returns data: {name}" + ("" if finite else f" (got {series})"))
        sessions = query("maskd_sessions_active")["data"]["result"]
        check(bool(sessions), "core: maskd_sessions_active returns data")
        hits = query("maskd_index_cache_hits_total")["data"]["result"]
        check(hits and float(hits[0]["value"][1]) >= 1, f"core: cache hits counted ({hits and hits[0]['value'][1]})")
        if not query("maskd_sessions_max")["data"]["result"]:
            print("  WARNING: maskd does not export maskd_sessions_max: MaskdSessionsNearCap and the "
                  "'cap' line of the sessions panel have no data")

        # The recording rules were evaluated without error, and the core ones recorded series.
        st, body = http_get(f"{api}/rules")
        groups = json.loads(body)["data"]["groups"]
        bad = [(r["name"], r.get("lastError")) for g in groups for r in g["rules"] if r.get("health") not in ("ok",)]
        check(not bad and groups, f"Prometheus evaluated all {sum(len(g['rules']) for g in groups)} rules without error {bad}")
        for rec in ("maskd:steps:rate5m", "maskd:step_seconds:p99_rate5m", "maskd:index_cache_hit:ratio_rate10m"):
            check(bool(query(rec)["data"]["result"]), f"recorded series {rec} exists")
        st, body = http_get(f"{api}/targets")
        tg = json.loads(body)["data"]["activeTargets"]
        check(tg and all(t["health"] == "up" for t in tg), "the maskd target is up")

        # SIGTERM drains and exits.
        t0 = time.monotonic()
        rc = stop(procs["maskd"], "maskd", timeout=30)
        check(rc == 0, f"maskd exits 0 on SIGTERM (rc {rc}, {time.monotonic() - t0:.1f} s)")
    finally:
        for name in ("maskd", "prometheus"):
            stop(procs.get(name), name)
        if os.environ.get("MASKD_E2E_KEEP"):
            print(f"kept {tmp}")
        else:
            from deploy_common import _failures
            if _failures:
                for name, f in logs.items():
                    f.seek(0)
                    tail = f.read().splitlines()[-20:]
                    print(f"--- last lines of {name}'s log:\n" + "\n".join(tail))
            for f in logs.values():
                f.close()
            shutil.rmtree(tmp, ignore_errors=True)
    finish("deploy_prometheus_e2e_test")


if __name__ == "__main__":
    main()
