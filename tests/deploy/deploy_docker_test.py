#!/usr/bin/env python3
"""deploy/docker, statically (building the image is deploy/docker/build-local.sh, not CI): the
Dockerfile is multi-stage on Debian 12, its runtime stage installs no compiler or -dev package,
runs as a non-root user, carries maskd, maskctl and the bundled tokenizers, and has the CUDA
build argument; build-local.sh is valid bash and uses chroot isolation."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_common import DEPLOY, REPO, check, finish, run  # noqa: E402

D = os.path.join(DEPLOY, "docker")
text = open(os.path.join(D, "Dockerfile")).read()
# Join continuation lines, drop comments.
logical = re.sub(r"\\\n", " ", "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#")))
stages, cur = [], None
for line in logical.splitlines():
    m = re.match(r"\s*FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.I)
    if m:
        cur = {"from": m.group(1), "name": (m.group(2) or "").lower(), "lines": []}
        stages.append(cur)
    elif cur is not None and line.strip():
        cur["lines"].append(line.strip())
names = [s["name"] for s in stages]
check(names == ["builder", "runtime"], f"two stages, builder then runtime ({names})")
m = re.search(r"^ARG BASE_IMAGE=(\S+)", text, re.M)
check(m and m.group(1).startswith("debian:bookworm"), f"default base image is Debian 12 ({m and m.group(1)})")
check(all(s["from"] == "${BASE_IMAGE}" for s in stages), "both stages FROM ${BASE_IMAGE}")
if len(stages) == 2:
    b, r = ("\n".join(s["lines"]) for s in stages)
    check("install-deps.sh" in b, "builder installs the -dev packages from scripts/install-deps.sh")
    check(re.search(r"cmake --build .*--target maskd maskctl", b) is not None, "builder builds maskd and maskctl")
    check(re.search(r"MASKD_BUILD_TESTS=OFF", b) is not None, "builder skips tests and benchmarks")
    check("ldd" in b and "dpkg -S" in b, "runtime package list derived from the binaries' libraries (ldd + dpkg -S)")
    check(not re.search(r"\b(build-essential|g\+\+|gcc|clang|cmake|ninja-build|install-deps\.sh)\b", r),
          "runtime stage installs no compiler or build tool")
    check(not re.search(r"apt-get install[^\n]*\b\S+-dev\b", r), "runtime stage installs no -dev package")
    user = re.findall(r"^USER\s+(\S+)", r, re.M)
    check(user and user[-1].split(":")[0] not in ("0", "root"), f"runtime runs as a non-root user ({user})")
    check(re.search(r"useradd .*--uid 10001", r) is not None, "uid 10001 exists in the image (matches the k8s runAsUser)")
    check(re.search(r"COPY --from=builder /out/bin/ /usr/local/bin/", r) is not None, "binaries copied from the builder")
    check("tokenizers" in r and "/usr/local/share/maskd/tokenizers" in r, "bundled tokenizers in /usr/local/share/maskd/tokenizers")
    check(re.search(r"^ENTRYPOINT \[\"/usr/local/bin/maskd\"\]", r, re.M) is not None, "ENTRYPOINT maskd (exec form)")
    check("rm -rf /var/lib/apt/lists" in r, "apt lists removed from the runtime image")
check(re.search(r"^ARG WITH_CUDA=0", text, re.M) is not None and "nvidia-cuda-toolkit" in text and "libcudart" in text,
      "WITH_CUDA build argument: CUDA toolkit in the builder, CUDA runtime in the runtime stage")
check(os.path.isdir(os.path.join(REPO, "data", "tokenizers")), "data/tokenizers exists (copied into the image)")

ign = open(os.path.join(D, "maskd.dockerignore")).read().split()
check(".git" in ign and any(i.startswith("build") for i in ign), "maskd.dockerignore keeps .git and build folders out")
sh = os.path.join(D, "build-local.sh")
check(os.access(sh, os.X_OK), "build-local.sh is executable")
r = run(["bash", "-n", sh])
check(r.returncode == 0, f"bash -n build-local.sh {r.stderr}")
s = open(sh).read()
for what in ("debootstrap", "buildah", "--isolation chroot", "--ignorefile", "bookworm"):
    check(what in s, f"build-local.sh uses {what}")
finish("deploy_docker_test")
