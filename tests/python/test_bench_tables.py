"""bench/tables/*.py (the generators of docs/benchmarks.md's tables) on captured
benchmark output (tests/data/bench_tables): each table's figures are checked
against the same figures computed here from the raw input."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import List, Tuple

from conftest import REPO

TABLES = REPO / "bench" / "tables"
DATA = REPO / "tests" / "data" / "bench_tables"


def run(script: str, fixture: str) -> Tuple[int, str]:
    p = subprocess.run([sys.executable, str(TABLES / script), str(DATA / fixture)],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout


def rows(md: str) -> List[List[str]]:
    """Every body row of every Markdown table in md, cells stripped."""
    out = []
    for line in md.splitlines():
        if line.startswith("|") and not line.startswith("| ---"):
            out.append([c.strip() for c in line.strip().strip("|").split("|")])
    return out


def medians(fixture: str) -> dict:
    """run_name -> the median aggregate (or the only run), straight from the JSON."""
    out = {}
    for b in json.loads((DATA / fixture).read_text())["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        out[b["run_name"]] = b
    return out


def test_kernels_ratio_is_apply_over_memcpy_of_its_dtype():
    rc, md = run("kernels.py", "apply_mask_bench.json")
    assert rc == 0
    runs = medians("apply_mask_bench.json")
    memcpy = {d: runs["BM_Memcpy/%s/real_time" % a]["bytes_per_second"] for a, d in (("0", "fp32"), ("2", "bf16"))}
    applies = [r for r in rows(md) if r[0].startswith("apply ")]
    assert len(applies) == 8
    for r in applies:
        dtype, masks, threads = r[0].split()[1], r[0].split()[2], r[1]
        b = runs["BM_Apply/%s/%s/%s/real_time" % ("0" if dtype == "fp32" else "2",
                                                  "1" if masks == "realistic" else "0", threads)]
        assert r[4] == "%.0f%%" % (100 * b["bytes_per_second"] / memcpy[dtype])
    small = [r for r in rows(md) if r[0] == "wall time"]
    assert len(small) == 1 and len(small[0]) == 5  # rows 1, 4, 8, 16


def test_kernels_gpu_without_a_gpu_prints_nothing_and_exits_2():
    rc, md = run("kernels_gpu.py", "apply_mask_cuda_bench_no_gpu.json")
    assert (rc, md) == (2, "")


def test_index_bench_ratio_and_memo_columns():
    rc, md = run("index_bench.py", "index_bench.json")
    assert rc == 0
    runs = medians("index_bench.json")
    body = {r[1]: r for r in rows(md) if r[0] == "llama3"}
    assert sorted(body) == ["email", "url"]
    for regex, r in body.items():
        ready = runs["WriteMaskReady/llama3/%s" % regex]["cpu_time"]
        assert r[10] == "%.2f" % (ready / runs["Memcpy/llama3"]["cpu_time"])
        cold = runs["CompileFirstMaskColdMemo/llama3/%s" % regex]
        warm = runs["CompileFirstMaskWarmMemo/llama3/%s" % regex]
        assert r[5] == "%.1f / %.1f" % (cold["memo_misses"], warm["memo_hits"])
        fresh = runs["CompileFirstMaskFreshVocab/llama3/%s/iterations:10" % regex]
        assert r[2] == "%.3f" % (fresh["cpu_time"] / 1e3 if fresh["time_unit"] == "us" else fresh["cpu_time"])
        walk = runs["FirstVisitWriteMask/llama3/%s" % regex]
        assert r[7] == "%d (%d)" % (walk["steps"], walk["distinct_states"])


def test_dfa_construction_ratio_is_build_over_parse():
    rc, md = run("dfa_construction.py", "index_bench_dfa.json")
    assert rc == 0
    runs = medians("index_bench_dfa.json")
    body = rows(md)[1:]
    assert len(body) == 3
    for r in body:
        name = r[0].split()[0]
        ratio = runs["DfaFromPattern/%s" % name]["real_time"] / runs["DfaBaselineParse/%s" % name]["real_time"]
        assert r[4] == "%.1f×" % ratio


def test_json_schema_suite_reasons_account_for_every_group_not_converted():
    rc, md = run("json_schema_suite.py", "json_schema_suite_test.txt")
    assert rc == 0
    drafts = [r for r in rows(md) if r[0] in ("2020-12", "7")]
    assert len(drafts) == 2
    not_converted = sum(int(r[1]) - int(r[2]) for r in drafts)
    reasons = [r for r in rows(md) if len(r) == 2 and r[1].isdigit()]
    assert sum(int(r[1]) for r in reasons) == not_converted


def test_regex_conformance_counts():
    rc, md = run("regex_conformance.py", "regex_conformance_test.txt")
    assert rc == 0
    text = (DATA / "regex_conformance_test.txt").read_text()
    skipped = sum(int(line.split()[1].rstrip(":")) for line in text.splitlines()
                  if line.startswith("  skipped"))
    assert "**1023 of 1023 applicable cases pass (100.0%%)**; %d skipped" % skipped in md


def test_service_ratios():
    rc, md = run("service.py", "service_bench.jsonl")
    assert rc == 0
    lines = [json.loads(l) for l in (DATA / "service_bench.jsonl").read_text().splitlines()]
    p50 = {(l["sessions"], l["mode"]): l["step_p50_us"] for l in lines}
    assert "64 sessions / 1 session, step p50, unary: %.1f×" % (p50[(64, "unary")] / p50[(1, "unary")]) in md
    assert len(rows(md)) == 1 + len(lines)
    assert "server RSS" in md


def test_shm_demo_and_budget_and_adapters():
    rc, md = run("shm_demo.py", "shm_demo_bench.jsonl")
    assert rc == 0
    for line, r in zip((DATA / "shm_demo_bench.jsonl").read_text().splitlines(), rows(md)[1:]):
        j = json.loads(line)
        assert r[0] == j["dtype"] and r[5] == "%.2f" % (j["apply_p50_us"] / j["reply_p50_us"])
    rc, md = run("budget.py", "bench_budget.jsonl")
    assert rc == 0 and len(rows(md)) == 1 + 3
    rc, md = run("adapters.py", "bench_adapters.jsonl")
    assert rc == 0
    runs = [json.loads(l) for l in (DATA / "bench_adapters.jsonl").read_text().splitlines() if l.startswith("{")]
    base = next(r["ms_per_step"] for r in runs if r["mode"] == "unconstrained")
    assert [r[9] for r in rows(md)[1:]] == ["%.2f×" % (r["ms_per_step"] / base) for r in runs]


def test_processor_step_ratio_is_apply_over_the_fastest_peer():
    rc, md = run("processor_step.py", "bench_processor_step.jsonl")
    assert rc == 0
    runs = [json.loads(l) for l in (DATA / "bench_processor_step.jsonl").read_text().splitlines()]
    body = rows(md)[1:]
    assert len(body) == len(runs)
    for r, j in zip(body, runs):
        assert r[0] == f"{j['rows']} × {j['live']}"
        peers = [j[k] for k in ("llguidance_cpu_p50_us", "xgrammar_cpu_p50_us") if k in j]
        if peers and "apply_cpu_p50_us" in j:
            assert r[5] == "%.2f×" % (j["apply_cpu_p50_us"] / min(peers))
        else:  # a run without the peers (or from before the apply column): dashes, not figures
            assert r[2] == r[3] == r[4] == r[5] == "—"


def test_maskbench_reasons_and_limit():
    rc, md = run("maskbench_reasons.py", "maskbench_verbose.txt")
    assert rc == 0
    assert rows(md)[1] == ["`unsupported keyword not`", "33"]
    rc, md = run("maskbench_limit.py", "maskbench_limit.txt")
    assert rc == 0
    assert [r[0] for r in rows(md)[1:]] == ["1 MiB", "8 MiB"]


def test_coldpath_goals_counts_misses_and_peer_errors():
    rc, md = run("coldpath_goals.py", "coldpath_results.json")
    assert rc == 0
    goals = {r[0]: r[1:] for r in rows(md)[1:]}
    first = goals["regex → first mask ≤ llguidance, every regex"]
    assert first[0].startswith("2 of 3 compared") and "`b` (3 vs 1.5 ms)" in first[1]
    walk = goals["whole first walk ≤ llguidance, every regex"]
    assert walk[0].startswith("3 of 3 compared") and walk[1] == "met"
    eager = goals["eager build ≤ XGrammar's full compile, every regex"]
    assert eager[0].startswith("1 of 2 compared") and "no xgrammar figure on `c` (timeout (120 s))" in eager[0]
    assert "`b` (20 vs 10 ms)" in eager[1]
    assert goals["WriteMask ≤ 2× memcpy"][1] == "missed on `b`"
    assert goals["advance ≤ 30 ns"] == ["7–35 ns", "missed on `b`"]


def test_grammar_rows_and_ratio_over_memcpy():
    rc, md = run("grammar.py", "grammar_bench.jsonl")
    assert rc == 0
    lines = [json.loads(l) for l in (DATA / "grammar_bench.jsonl").read_text().splitlines()]
    body = rows(md)[1:]
    assert len(body) == len(lines)
    for row, l in zip(body, lines):
        assert row[0] == "`%s`" % l["grammar"]
        ratio = l["warm_step_us"]["p50"] / l["memcpy_us"]
        assert row[10] == ("%.0f×" % ratio if ratio >= 100 else "%.1f×" % ratio)


def test_grammar_peers_tables_and_goals_from_the_raw_results():
    rc, md = run("grammar_peers.py", "grammar_peers.json")
    assert rc == 0
    results = json.loads((DATA / "grammar_peers.json").read_text())
    body = rows(md)
    n = len(results)

    def fig(x: float, digits: int) -> str:
        return "%.0f" % x if x >= 100 else "%.*f" % (digits, x)

    # Time to first mask: one row per case; the ratio is maskd's over llguidance's.
    ttfm = body[1:1 + n]
    for row, r in zip(ttfm, results):
        m, ll = r["engines"]["maskd"]["ttfm_ms"], r["engines"]["llguidance"]["ttfm_ms"]
        assert row[:3] == ["`%s`" % r["grammar"], r["tokenizer"], fig(m, 2)]
        assert row[5:7] == [fig(r["engines"]["maskd"]["compile_ms"], 2), fig(r["engines"]["maskd"]["first_mask_ms"], 2)]
        assert row[7] == "%.2f×" % (m / ll)
    # First walk: "mean / p99" per engine; a failed engine is "err".
    first = body[2 + n:2 + 2 * n]
    for row, r in zip(first, results):
        assert row[2] == str(r["engines"]["maskd"]["walk_steps"])
        s = r["engines"]["llguidance"]["step_us"]
        assert row[4] == "%s / %s" % (fig(s["mean"], 1), fig(s["p99"], 1))
        assert row[5] == ("err" if "error" in r["engines"]["xgrammar"] else "%s / %s" % (
            fig(r["engines"]["xgrammar"]["step_us"]["mean"], 1), fig(r["engines"]["xgrammar"]["step_us"]["p99"], 1)))
    # Warm: maskd's replay summary is warm_step_us, the peers' warm_us.
    warm = body[3 + 2 * n:3 + 3 * n]
    for row, r in zip(warm, results):
        w = r["engines"]["maskd"]["warm_step_us"]
        assert row[3] == "%s / %s" % (fig(w["mean"], 1), fig(w["p99"], 1))
    agree = body[4 + 3 * n:4 + 4 * n]
    for row, r in zip(agree, results):
        ll = r["engines"]["llguidance"]
        assert row[2] == "%d / %d" % (ll["agree"], ll["compared"]) + (
            " (refused step %d)" % ll["refused"]["step"] if "refused" in ll else "")
    goals = {r[0]: r[1:] for r in body[5 + 4 * n:]}
    ok = [r for r in results if "error" not in r["engines"]["xgrammar"]]
    faster = [r for r in ok if r["engines"]["maskd"]["step_us"]["mean"] <= r["engines"]["xgrammar"]["step_us"]["mean"]]
    assert goals["per-token mean ≤ XGrammar's"][0] == "%d of %d" % (len(faster), len(ok))
    first_ok = [r for r in results if r["engines"]["maskd"]["ttfm_ms"] <= r["engines"]["llguidance"]["ttfm_ms"]]
    assert goals["time to first mask ≤ llguidance's"][0] == "%d of %d" % (len(first_ok), n)
    for r in results:
        if r not in first_ok:
            assert "`%s`/%s" % (r["grammar"], r["tokenizer"]) in goals["time to first mask ≤ llguidance's"][1]
    p99 = [r for r in results if r["engines"]["maskd"]["step_us"]["p99"] <= 100]
    assert goals["per-token p99 ≤ 100 µs"][0] == "%d of %d" % (len(p99), n)
    same = [r for r in results if r["engines"]["llguidance"]["agree"] == r["engines"]["llguidance"]["compared"]
            and "refused" not in r["engines"]["llguidance"]]
    assert goals["masks equal to llguidance's"][0] == "%d of %d cases" % (len(same), n)
    # Every described differing step, refusal and error is listed.
    listed = [l for l in md.splitlines() if l.startswith("- ")]
    diffs = sum(len(e.get("diffs", [])) for r in results for e in r["engines"].values())
    refused = [r for r in results for e in r["engines"].values() if "refused" in e]
    errors = [e["error"] for r in results for e in r["engines"].values() if "error" in e]
    assert refused and len(listed) == diffs + len(refused) + len(errors)
    assert any("refused maskd's token 129" in l for l in listed)
    assert all(any(err in l for l in listed) for err in errors)
