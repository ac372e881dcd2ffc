#!/usr/bin/env python3
"""deploy/k8s: every kustomization renders (kubectl kustomize), every rendered object validates
strictly against the Kubernetes OpenAPI schemas (kubernetes-validate, offline), and the properties
the deployment relies on are asserted on the rendered objects, so an edit cannot drop them silently:
native sidecar, gRPC probes on the numeric plaintext port, shared socket and /dev/shm volumes,
read-only config, resources, restrictive security context, GPU sharing in the GPU overlay."""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_common import DEPLOY, check, finish, need_yaml, run, skip, tool  # noqa: E402

yaml = need_yaml()
K8S = os.path.join(DEPLOY, "k8s")
# Kustomizations and the Kubernetes versions each must validate against. Native sidecars are on
# by default from 1.29; DRA resource.k8s.io/v1 (the GPU overlay) from 1.34; 1.37 = newest schemas.
TARGETS = {
    "base": ["1.30.0", "1.37.0"],
    "overlays/example": ["1.30.0", "1.37.0"],
    "overlays/gpu": ["1.34.0", "1.37.0"],
    "monitoring": ["1.37.0"],
}
CRD_KINDS = {("monitoring.coreos.com/v1", "PodMonitor")}

kubectl = tool("KUBECTL", "kubectl")
kustomize = tool("KUSTOMIZE", "kustomize")
validator = tool("KUBERNETES_VALIDATE", "kubernetes-validate", "/opt/maskd-deploy/venv/bin/kubernetes-validate")
if not kubectl and not kustomize:
    skip("neither kubectl nor kustomize found")
if not validator:
    skip("kubernetes-validate not found")


def render(path):
    cmd = [kubectl, "kustomize", path] if kubectl else [kustomize, "build", path]
    r = run(cmd)
    if r.returncode != 0:
        return None, f"{' '.join(cmd)} failed: {r.stderr.strip()}"
    return [d for d in yaml.safe_load_all(r.stdout) if d], ""


def validate(docs, version, label):
    """kubernetes-validate --strict on each object; returns (ok, output)."""
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, d in enumerate(docs):
            if (d["apiVersion"], d["kind"]) in CRD_KINDS:
                continue
            f = os.path.join(tmp, f"{i:02d}-{d['kind']}.yaml")
            with open(f, "w") as fh:
                yaml.safe_dump(d, fh)
            files.append(f)
        if not files:
            return True, "(only CRDs)"
        r = run([validator, "--strict", "--kubernetes-version", version, *files])
        out = (r.stdout + r.stderr).strip()
        ok = r.returncode == 0 and "ERROR" not in out
        return ok, out


def by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def parse_flags(text):
    """An absl flag file: {name with dashes: [values]}; comma-separated values split (--listen)."""
    flags = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"--([A-Za-z0-9_-]+)(?:=(.*))?$", line)
        check(m is not None, f"flag file line is --name[=value]: {line}")
        if m:
            name = m.group(1).replace("_", "-")
            value = m.group(2) if m.group(2) is not None else "true"
            flags[name] = [v for v in value.split(",")] if name == "listen" else [value]
    return flags


def service_flags():
    """Flag names (with dashes) maskd defines (ABSL_FLAG in service/*.cc); None without the source."""
    import glob
    srcs = glob.glob(os.path.join(DEPLOY, "..", "service", "*.cc"))
    text = "".join(open(f).read() for f in srcs)
    names = {n.replace("_", "-") for n in re.findall(r"ABSL_FLAG\(\s*[^,]+,\s*([a-z0-9_]+)\s*,", text)}
    return names or None


SERVICE_FLAGS = service_flags()


def duration_seconds(v):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)?", v or "")
    if not m:
        return None
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def sec_ctx_ok(c, pod_sc, name):
    sc = c.get("securityContext") or {}
    non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
    uid = sc.get("runAsUser", pod_sc.get("runAsUser"))
    seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
    check(non_root is True, f"{name}: runAsNonRoot")
    check(uid is not None and uid != 0, f"{name}: runAsUser is set and not 0 (got {uid})")
    check(sc.get("readOnlyRootFilesystem") is True, f"{name}: readOnlyRootFilesystem")
    check(sc.get("allowPrivilegeEscalation") is False, f"{name}: allowPrivilegeEscalation false")
    check(sc.get("privileged") in (None, False), f"{name}: not privileged")
    check("ALL" in ((sc.get("capabilities") or {}).get("drop") or []), f"{name}: capabilities drop ALL")
    check(not (sc.get("capabilities") or {}).get("add"), f"{name}: no capability added")
    check(seccomp in ("RuntimeDefault", "Localhost"), f"{name}: seccompProfile RuntimeDefault (got {seccomp})")


def mounts(c):
    return {m["mountPath"]: m for m in c.get("volumeMounts") or []}


def check_worker_pod(docs, where, gpu=False):
    deps = by_kind(docs, "Deployment")
    check(len(deps) == 1, f"{where}: one Deployment")
    if not deps:
        return
    dep = deps[0]
    pod = dep["spec"]["template"]["spec"]
    labels = dep["spec"]["template"]["metadata"].get("labels") or {}
    inits = {c["name"]: c for c in pod.get("initContainers") or []}
    mains = {c["name"]: c for c in pod.get("containers") or []}
    maskd = inits.get("maskd")
    check(maskd is not None, f"{where}: maskd is an init container")
    check("maskd" not in mains, f"{where}: maskd is not a regular container")
    if maskd is None:
        return
    check(maskd.get("restartPolicy") == "Always", f"{where}: maskd restartPolicy Always (native sidecar)")
    check(len(mains) >= 1, f"{where}: a worker container")
    worker = next(iter(mains.values()))
    check(labels.get("maskd.io/sidecar") == "true", f"{where}: pod label maskd.io/sidecar=true (PodMonitor selector)")

    ports = {p["name"]: p for p in maskd.get("ports") or []}
    grpc_port = (ports.get("maskd-grpc") or {}).get("containerPort")
    metrics_port = (ports.get("maskd-metrics") or {}).get("containerPort")
    check(isinstance(grpc_port, int), f"{where}: maskd-grpc containerPort is a number")
    check(isinstance(metrics_port, int), f"{where}: maskd-metrics containerPort is a number")
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = maskd.get(kind) or {}
        g = probe.get("grpc") or {}
        check(isinstance(g.get("port"), int) and g.get("port") == grpc_port,
              f"{where}: maskd {kind} is grpc on numeric port {grpc_port} (got {probe})")
        check(not g.get("service"), f"{where}: maskd {kind} checks the server's overall health (no service name)")
    st = maskd.get("startupProbe") or {}
    check(st.get("periodSeconds", 10) * st.get("failureThreshold", 3) >= 60,
          f"{where}: startup probe allows at least 60 s for tokenizers to load")

    for c, n in ((maskd, "maskd"), (worker, "worker")):
        res = c.get("resources") or {}
        for k in ("requests", "limits"):
            check(all(x in (res.get(k) or {}) for x in ("cpu", "memory")), f"{where}: {n} has cpu+memory {k}")
        sec_ctx_ok(c, pod.get("securityContext") or {}, f"{where}: {n}")
    psc = pod.get("securityContext") or {}
    check(psc.get("runAsNonRoot") is True, f"{where}: pod runAsNonRoot")
    check(pod.get("automountServiceAccountToken") is False, f"{where}: no service account token")
    uid_m = (maskd.get("securityContext") or {}).get("runAsUser", psc.get("runAsUser"))
    uid_w = (worker.get("securityContext") or {}).get("runAsUser", psc.get("runAsUser"))
    check(uid_m == uid_w, f"{where}: maskd and worker share a uid (socket and /dev/shm access)")

    vols = {v["name"]: v for v in pod.get("volumes") or []}
    mm, wm = mounts(maskd), mounts(worker)
    shm_m, shm_w = mm.get("/dev/shm"), wm.get("/dev/shm")
    check(shm_m is not None and shm_w is not None and shm_m["name"] == shm_w["name"],
          f"{where}: one volume mounted at /dev/shm in both containers")
    if shm_m:
        ed = (vols.get(shm_m["name"]) or {}).get("emptyDir")
        check(ed is not None and ed.get("medium") == "Memory", f"{where}: /dev/shm is an emptyDir medium: Memory")
        check(ed is not None and ed.get("sizeLimit"), f"{where}: /dev/shm has a sizeLimit")

    # maskd's flags, from the ConfigMap the --flagfile points at.
    args = maskd.get("args") or []
    ff = [a.split("=", 1)[1] for a in args if a.startswith("--flagfile=")]
    check(len(ff) == 1, f"{where}: maskd reads its flags from one --flagfile")
    flags = {}
    if ff:
        fdir, fname = os.path.dirname(ff[0]), os.path.basename(ff[0])
        cm_mount = mm.get(fdir)
        check(cm_mount is not None and cm_mount.get("readOnly") is True, f"{where}: flag file folder {fdir} mounted read-only")
        cm_name = ((vols.get((cm_mount or {}).get("name")) or {}).get("configMap") or {}).get("name")
        cms = {c["metadata"]["name"]: c for c in by_kind(docs, "ConfigMap")}
        check(cm_name in cms, f"{where}: flags ConfigMap {cm_name} is rendered with the pod")
        text = ((cms.get(cm_name) or {}).get("data") or {}).get(fname)
        check(text is not None, f"{where}: ConfigMap {cm_name} has key {fname}")
        flags = parse_flags(text or "")
        for line in (text or "").splitlines():
            m = re.match(r"\s*--([A-Za-z0-9]+-[A-Za-z0-9-]*)", line)
            check(m is None, f"{where}: flag file spells names with underscores (absl does not read dashes "
                             f"in a flag file): {line.strip()}")
        if SERVICE_FLAGS is not None:
            unknown = sorted(set(flags) - SERVICE_FLAGS)
            check(not unknown, f"{where}: every flag in {fname} is defined by maskd (service/*.cc): unknown {unknown}")
    listens = flags.get("listen", [])
    tcp = [a for a in listens if not a.startswith("unix")]
    unix = [a for a in listens if a.startswith("unix://")]
    check(any(a.rsplit(":", 1)[-1] == str(grpc_port) and a.rsplit(":", 1)[0] in ("0.0.0.0", "[::]", "")
              for a in tcp), f"{where}: --listen on all interfaces at the probe port {grpc_port} ({tcp})")
    check(len(unix) == 1, f"{where}: one --listen unix:// socket ({unix})")
    mlisten = (flags.get("metrics-listen") or [""])[0]
    check(mlisten.rsplit(":", 1)[-1] == str(metrics_port), f"{where}: --metrics-listen port = maskd-metrics port")
    if unix:
        sock = unix[0][len("unix://"):]
        sdir = os.path.dirname(sock)
        sm, sw = mm.get(sdir), wm.get(sdir)
        check(sm is not None and sw is not None and sm["name"] == sw["name"],
              f"{where}: socket folder {sdir} is one volume in both containers")
        if sm:
            check("emptyDir" in (vols.get(sm["name"]) or {}), f"{where}: socket volume is an emptyDir")
        env = {e["name"]: e.get("value") for e in worker.get("env") or []}
        check(env.get("MASKD_ADDR") == unix[0], f"{where}: worker MASKD_ADDR = {unix[0]}")
    if SERVICE_FLAGS is None or "allow-shm" in SERVICE_FLAGS:
        check("allow-shm" in flags, f"{where}: --allow_shm (shared-memory logits; maskd defines the flag: add it to the maskd.flags files)")
    else:
        print(f"  note: maskd has no --allow_shm flag (yet): not required in {where}")
    td = (flags.get("tokenizer-dir") or [""])[0]
    tokmount = [p for p in mm if td == p or td.startswith(p.rstrip("/") + "/")]
    check(td.startswith("/usr/local/share/maskd/tokenizers") or all(mm[p].get("readOnly") for p in tokmount),
          f"{where}: --tokenizer-dir is the image's bundled folder or a read-only mount ({td})")
    tok_cm = [m for m in mm.values() if (vols.get(m["name"]) or {}).get("configMap", {}).get("name", "").startswith("maskd-tokenizers")]
    check(tok_cm and all(m.get("readOnly") for m in tok_cm), f"{where}: tokenizers ConfigMap mounted read-only")
    grace = duration_seconds((flags.get("grace-period") or ["0"])[0]) or 0
    check(pod.get("terminationGracePeriodSeconds", 30) > grace,
          f"{where}: terminationGracePeriodSeconds > --grace-period ({grace} s)")
    for c in list(inits.values()) + list(mains.values()):
        check("/" in c["image"] and ":" in c["image"], f"{where}: {c['name']} image is a full reference ({c['image']})")

    if gpu:
        check(pod.get("shareProcessNamespace") is True, f"{where}: shareProcessNamespace (CUDA IPC)")
        claims = {rc["name"]: rc for rc in pod.get("resourceClaims") or []}
        mc = [c["name"] for c in (maskd.get("resources") or {}).get("claims") or []]
        wc = [c["name"] for c in (worker.get("resources") or {}).get("claims") or []]
        shared = set(mc) & set(wc) & set(claims)
        check(bool(shared), f"{where}: maskd and worker claim the same GPU ResourceClaim ({mc} / {wc})")
        tmpl = {t["metadata"]["name"] for t in by_kind(docs, "ResourceClaimTemplate")}
        check(all(claims[s].get("resourceClaimTemplateName") in tmpl for s in shared),
              f"{where}: the shared claim's ResourceClaimTemplate is rendered")
        check(not any("nvidia.com/gpu" in ((c.get("resources") or {}).get(k) or {})
                      for c in (maskd, worker) for k in ("limits", "requests")),
              f"{where}: no device-plugin nvidia.com/gpu request (it would give each container its own GPU)")
        check("cuda" in maskd["image"], f"{where}: maskd image is the CUDA variant ({maskd['image']})")
    return dep


rendered = {}
for path, versions in TARGETS.items():
    print(f"== {path}")
    docs, err = render(os.path.join(K8S, path))
    if not check(docs is not None, f"{path}: renders" + (f": {err}" if err else "")):
        continue
    rendered[path] = docs
    for v in versions:
        ok, out = validate(docs, v, path)
        check(ok, f"{path}: {len(docs)} objects validate strictly against Kubernetes {v}" + ("" if ok else f"\n{out}"))

# The validator really is strict: an unknown field in a container is rejected.
if "base" in rendered:
    bad = yaml.safe_load(yaml.safe_dump(by_kind(rendered["base"], "Deployment")[0]))
    bad["spec"]["template"]["spec"]["initContainers"][0]["restartPolcy"] = "Always"
    ok, out = validate([bad], "1.37.0", "negative")
    check(not ok, "negative control: a misspelt field (restartPolcy) is rejected by the strict validation")

if "base" in rendered:
    print("== properties: base")
    base_dep = check_worker_pod(rendered["base"], "base")
if "overlays/example" in rendered:
    print("== properties: overlays/example")
    docs = rendered["overlays/example"]
    check_worker_pod(docs, "example")
    ns = [d for d in docs if d["kind"] == "Namespace"]
    check(all(d["metadata"].get("namespace") == "inference" for d in docs if d["kind"] != "Namespace"),
          "example: every object in namespace inference")
    check(ns and ns[0]["metadata"].get("labels", {}).get("pod-security.kubernetes.io/enforce") == "restricted",
          "example: namespace enforces the restricted Pod Security Standard")
    check(any(d["kind"] == "PodDisruptionBudget" and d["apiVersion"] == "policy/v1" for d in docs), "example: policy/v1 PDB")
    nps = by_kind(docs, "NetworkPolicy")
    ports = [p.get("port") for np_ in nps for r in np_["spec"].get("ingress", []) for p in r.get("ports", [])]
    check(nps and 50051 not in ports, "example: NetworkPolicy does not open maskd's gRPC port to other pods")
if "overlays/gpu" in rendered:
    print("== properties: overlays/gpu")
    check_worker_pod(rendered["overlays/gpu"], "gpu", gpu=True)
    check(os.path.exists(os.path.join(K8S, "overlays", "gpu", "README.md")), "gpu: README.md with the CUDA IPC facts")
if "monitoring" in rendered:
    print("== properties: monitoring")
    pms = by_kind(rendered["monitoring"], "PodMonitor")
    check(len(pms) == 1, "monitoring: one PodMonitor")
    if pms and "base" in rendered:
        pm = pms[0]["spec"]
        tmpl = by_kind(rendered["base"], "Deployment")[0]["spec"]["template"]
        sel = (pm.get("selector") or {}).get("matchLabels") or {}
        check(sel and all(tmpl["metadata"]["labels"].get(k) == v for k, v in sel.items()),
              f"monitoring: PodMonitor selector {sel} matches the worker pod's labels")
        eps = pm.get("podMetricsEndpoints") or []
        maskd = [c for c in tmpl["spec"]["initContainers"] if c["name"] == "maskd"][0]
        names = {p["name"] for p in maskd["ports"]}
        check(eps and all(e.get("port") in names and e.get("path", "/metrics") == "/metrics" for e in eps),
              "monitoring: PodMonitor scrapes maskd's named metrics port at /metrics")
        check(any(r.get("targetLabel") == "job" and r.get("replacement") == "maskd"
                  for e in eps for r in e.get("relabelings") or []), "monitoring: job relabelled to maskd (alerts use it)")
        allowed = {"selector", "podMetricsEndpoints", "jobLabel", "namespaceSelector", "podTargetLabels", "sampleLimit"}
        check(set(pm) <= allowed, f"monitoring: PodMonitor spec has only known fields ({sorted(pm)})")
        ep_allowed = {"port", "path", "scheme", "interval", "scrapeTimeout", "relabelings", "metricRelabelings", "honorLabels"}
        check(all(set(e) <= ep_allowed for e in eps), "monitoring: podMetricsEndpoints have only known fields")

finish("deploy_k8s_test")
