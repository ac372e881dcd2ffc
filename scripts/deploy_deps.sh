#!/usr/bin/env bash
# Installs what the deploy tests (tests/deploy) need. Idempotent; run as root.
#   scripts/deploy_deps.sh           test tools: Debian prometheus (prometheus + promtool), kubectl check,
#                                    a venv with kubernetes-validate + PyYAML
#   scripts/deploy_deps.sh --image   also buildah and debootstrap, for deploy/docker/build-local.sh
# Environment: MASKD_DEPLOY_VENV (default /opt/maskd-deploy/venv).
# kubectl (with its built-in kustomize) is not in Debian 12's archive: this machine kind ships it
# (package kubectl from the Google Cloud SDK repository, /usr/bin/kubectl). When it is missing the
# k8s test skips (or fails under MASKD_DEPLOY_STRICT=1); see docs/deploy.md for the alternatives.
set -euo pipefail
IMAGE=0
for a in "$@"; do
  case "$a" in
    --image) IMAGE=1 ;;
    *) echo "deploy_deps: unknown argument $a" >&2; exit 2 ;;
  esac
done
VENV=${MASKD_DEPLOY_VENV:-/opt/maskd-deploy/venv}
PIP_PKGS=(kubernetes-validate==1.37.0 PyYAML)
APT_PKGS=(prometheus python3-venv)
[ "$IMAGE" = 1 ] && APT_PKGS+=(buildah debootstrap)

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deploy_deps: apt installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # The package's service is never started here (no systemd in CI); the tests start their own.
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# A python3 with venv + ensurepip: prefer Debian's, else whatever python3 is first on PATH.
PY=/usr/bin/python3
"$PY" -c 'import venv, ensurepip' 2>/dev/null || PY=$(command -v python3)
if [ ! -x "$VENV/bin/python3" ] || ! "$VENV/bin/python3" -c 'import sys' 2>/dev/null; then
  echo "deploy_deps: creating venv $VENV"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python3" -c 'import yaml, kubernetes_validate' 2>/dev/null; then
  echo "deploy_deps: pip installing ${PIP_PKGS[*]} into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PIP_PKGS[@]}"
fi

if command -v kubectl >/dev/null && kubectl kustomize --help >/dev/null 2>&1; then
  echo "deploy_deps: kubectl $(kubectl version --client 2>/dev/null | head -1 | awk '{print $3}') with kustomize: ok"
elif command -v kustomize >/dev/null; then
  echo "deploy_deps: kustomize $(kustomize version 2>/dev/null): ok"
else
  echo "deploy_deps: WARNING: no kubectl or kustomize on PATH: deploy_k8s_test will skip" >&2
fi
echo "deploy_deps: prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}'), venv $VENV: ok"
