#!/usr/bin/env python3
"""deploy/grafana: the dashboard JSON is well formed, its data source is a template variable
(no data source uid baked in), it has the panels operators need, and every PromQL expression in it
parses (promtool check rules on the expressions, offline) and uses only metrics the service exports."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_common import (DASHBOARD, check, dashboard_exprs, dashboard_panels, exported_metric_names,  # noqa: E402
                           finish, grafana_substitute, metric_names, need_yaml, run, tool)

dash = json.load(open(DASHBOARD))
tvars = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
ds = tvars.get("datasource")
check(ds is not None and ds.get("type") == "datasource" and ds.get("query") == "prometheus",
      "template variable 'datasource' of type datasource (prometheus)")
check(dash.get("uid") and dash.get("title") and isinstance(dash.get("schemaVersion"), int), "uid, title, schemaVersion")
check(not dash.get("__inputs"), "no __inputs (imports without prompting for a data source)")

panels = list(dashboard_panels(dash))
ids = [p["id"] for p in panels]
check(len(ids) == len(set(ids)), "panel ids are unique")
for p in panels:
    g = p.get("gridPos") or {}
    check(g.get("x", 0) + g.get("w", 0) <= 24, f"panel '{p.get('title')}' fits the 24-column grid")
    if p.get("type") == "row":
        continue
    refs = [p.get("datasource")] + [t.get("datasource") for t in p.get("targets", [])]
    check(all(r == {"type": "prometheus", "uid": "${datasource}"} for r in refs),
          f"panel '{p['title']}': panel and targets use ${{datasource}}")
for v in tvars.values():
    if v.get("type") == "query":
        check(v.get("datasource") == {"type": "prometheus", "uid": "${datasource}"}, f"variable {v['name']} uses ${{datasource}}")

titles = " | ".join(p.get("title", "").lower() for p in panels)
for want in ("step latency p50 / p99", "steps and tokens per second", "batch size", "compile latency",
             "compile outcomes", "cache hit ratio", "cache bytes", "active sessions", "expired sessions",
             "errors by method and code", "steps per second by engine client",
             "mask calls by engine client"):
    check(want in titles, f"a panel for '{want}'")

exprs = dashboard_exprs(dash)
check(len(exprs) >= 15, f"{len(exprs)} expressions")
for title, e in exprs:
    if "maskd_" in e and "up{" not in e:
        check('namespace=~"$namespace"' in e and 'pod=~"$pod"' in e, f"'{title}': filters by $namespace and $pod: {e}")
    if "rate(" in e:
        check("[$__rate_interval]" in e, f"'{title}': rate windows use $__rate_interval")

exported = exported_metric_names()
if exported is not None:
    used = set().union(*(metric_names(e) for _, e in exprs))
    missing = sorted(used - exported - {"maskd_sessions_max"})
    check(not missing, f"every maskd_* metric in the dashboard is exported by service/ (missing: {missing})")

# Parse every expression offline: as recording rules, promtool check rules parses each with the
# Prometheus parser itself.
yaml = need_yaml()
promtool = tool("PROMTOOL", "promtool")
if not promtool:
    print("  note: promtool not found: expressions not parsed offline (install the Debian package prometheus)")
else:
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr_{i}", "expr": grafana_substitute(e)} for i, (_, e) in enumerate(exprs)]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(rules, f)
    r = run([promtool, "check", "rules", f.name])
    os.unlink(f.name)
    check(r.returncode == 0, f"all {len(exprs)} dashboard expressions parse (promtool)\n{r.stdout}{r.stderr}".rstrip())

finish("deploy_grafana_dashboard_test")
