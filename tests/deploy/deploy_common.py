"""Helpers shared by the deploy tests (tests/deploy/*.py). Standard library + PyYAML only."""
import os
import shutil
import subprocess
import sys

REPO = os.path.abspath(os.environ.get("MASKD_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", ".."))
DEPLOY = os.path.join(REPO, "deploy")
SKIP_CODE = 77  # ctest SKIP_RETURN_CODE

_failures = []


def strict():
    """MASKD_DEPLOY_STRICT=1 (CI after scripts/deploy_deps.sh): a missing tool fails instead of skipping."""
    return os.environ.get("MASKD_DEPLOY_STRICT", "") not in ("", "0")


def skip(why, hint="install the deploy tools with scripts/deploy_deps.sh"):
    if strict():
        print(f"FAIL: {why} (MASKD_DEPLOY_STRICT is set: what is missing fails; {hint})")
        sys.exit(1)
    print(f"SKIP: {why} ({hint})")
    sys.exit(SKIP_CODE)


def tool(env, *names):
    """The path of a tool: $env if set, else the first of names on PATH (or an absolute path)."""
    if os.environ.get(env):
        p = os.environ[env] if os.path.isabs(os.environ[env]) else shutil.which(os.environ[env])
        return p if p and os.access(p, os.X_OK) else None
    for n in names:
        if os.path.isabs(n) and os.access(n, os.X_OK):
            return n
        p = shutil.which(n)
        if p:
            return p
    return None


def need_yaml():
    try:
        import yaml  # noqa: F401
        return yaml
    except ImportError:
        skip(f"PyYAML not importable by {sys.executable}")


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run(cmd, **kw)


def check(cond, what):
    if cond:
        print(f"  ok   {what}")
    else:
        print(f"  FAIL {what}")
        _failures.append(what)
    return cond


def finish(name):
    if _failures:
        print(f"{name}: {len(_failures)} check(s) failed:")
        for f in _failures:
            print(f"  - {f}")
        sys.exit(1)
    print(f"{name}: all checks passed")
    sys.exit(0)


# --- Expressions used by the dashboard and the rules (shared by the offline and e2e tests) ---

DASHBOARD = os.path.join(DEPLOY, "grafana", "maskd-dashboard.json")
RULES = os.path.join(DEPLOY, "prometheus", "maskd-rules.yaml")
# What Grafana substitutes before sending a query; the e2e test's Prometheus scrapes every 1 s.
GRAFANA_VARS = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "5m",
    "$namespace": ".*",
    "$pod": ".*",
}


def grafana_substitute(expr):
    for k in sorted(GRAFANA_VARS, key=len, reverse=True):
        expr = expr.replace("${" + k[1:] + "}", GRAFANA_VARS[k]).replace(k, GRAFANA_VARS[k])
    return expr


def dashboard_panels(dash):
    for p in dash.get("panels", []):
        yield p
        for q in p.get("panels", []) or []:
            yield q


def dashboard_exprs(dash):
    """[(panel title, raw expr)] for every target, plus the template variables' queries."""
    out = []
    for p in dashboard_panels(dash):
        for t in p.get("targets", []) or []:
            if t.get("expr"):
                out.append((p.get("title", "?"), t["expr"]))
    return out


def rule_exprs(rules_doc):
    """[(record or alert name, expr)] for every rule."""
    return [(r.get("record") or r.get("alert"), r["expr"]) for g in rules_doc["groups"] for r in g["rules"]]



def metric_names(expr):
    """maskd_* metric names referenced by an expression (histogram suffixes kept)."""
    import re
    return set(re.findall(r"\b(maskd_[a-z0-9_]+)\b", expr))


def exported_metric_names():
    """Metric family names the service source registers (service/*.cc), with histogram series names.
    None when the service source is absent."""
    import glob
    import re
    srcs = glob.glob(os.path.join(REPO, "service", "*.cc")) + glob.glob(os.path.join(REPO, "service", "*.h"))
    if not srcs:
        return None
    text = "".join(open(f, encoding="utf-8", errors="replace").read() for f in srcs)
    names = set(re.findall(r'"(maskd_[a-z0-9_]+)"', text))
    hist = {n for n in names if n.endswith(("_seconds", "_size"))}
    for n in hist:
        names |= {n + "_bucket", n + "_sum", n + "_count"}
    return names
