#!/usr/bin/env bash
# Builds the maskd container image with no registry and no Docker engine:
#   1. debootstrap a Debian 12 (bookworm) root file system from the configured apt mirror,
#   2. import it as a local base image (buildah from scratch + add + commit),
#   3. buildah bud --isolation chroot the multi-stage deploy/docker/Dockerfile on top of it.
#
# Usage (as root, from anywhere inside the repository):
#   deploy/docker/build-local.sh [all|base|image] [--cuda]
#     base   only step 1-2 (creates localhost/debian:bookworm-local)
#     image  only step 3 (needs the base image)
#     all    both (default)
#     --cuda build the GPU variant (--build-arg WITH_CUDA=1; needs Debian's non-free archive)
# Environment:
#   MIRROR          apt mirror for debootstrap (default: first URIs: of /etc/apt/sources.list.d/debian.sources,
#                   else http://deb.debian.org/debian)
#   SECURITY_MIRROR security mirror written into the base image's sources
#   WORKDIR         scratch folder (default /var/tmp/maskd-image)
#   STORAGE_DRIVER  buildah storage driver (default vfs: works without overlay mounts in a sandbox)
#   JOBS            parallel compile jobs inside the image (default 2)
#   TAG             image name (default localhost/maskd:dev, localhost/maskd:dev-cuda with --cuda)
# Needs: apt packages buildah and debootstrap (scripts/deploy_deps.sh --image installs them).
# Writes a short report to $WORKDIR/report.txt (image id, size, timings).
set -euo pipefail

STEP=all
CUDA=0
for a in "$@"; do
  case "$a" in
    all|base|image) STEP=$a ;;
    --cuda) CUDA=1 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "build-local: unknown argument $a" >&2; exit 2 ;;
  esac
done

REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORKDIR=${WORKDIR:-/var/tmp/maskd-image}
STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}
JOBS=${JOBS:-2}
BASE_TAG=localhost/debian:bookworm-local
if [ "$CUDA" = 1 ]; then TAG=${TAG:-localhost/maskd:dev-cuda}; else TAG=${TAG:-localhost/maskd:dev}; fi
if [ -z "${MIRROR:-}" ]; then
  MIRROR=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  MIRROR=${MIRROR:-http://deb.debian.org/debian}
fi
SECURITY_MIRROR=${SECURITY_MIRROR:-${MIRROR%/debian}/debian-security}
BUILDAH=(buildah --storage-driver "$STORAGE_DRIVER")

for tool in buildah debootstrap; do
  command -v "$tool" >/dev/null || { echo "build-local: $tool not found (apt-get install $tool, or scripts/deploy_deps.sh --image)" >&2; exit 3; }
done
[ "$(id -u)" = 0 ] || { echo "build-local: run as root (debootstrap and buildah's chroot isolation need it)" >&2; exit 3; }
mkdir -p "$WORKDIR"
REPORT=$WORKDIR/report.txt
log() { echo "[build-local $(date -u +%H:%M:%S)] $*" | tee -a "$REPORT"; }

build_base() {
  local rootfs=$WORKDIR/rootfs
  if "${BUILDAH[@]}" inspect --type image "$BASE_TAG" >/dev/null 2>&1; then
    log "base image $BASE_TAG already present: reused (buildah rmi $BASE_TAG to rebuild)"
    return
  fi
  rm -rf "$rootfs"
  log "debootstrap --variant=minbase bookworm from $MIRROR"
  local t0=$SECONDS
  nice debootstrap --variant=minbase --include=ca-certificates bookworm "$rootfs" "$MIRROR"
  # Same suites as a stock debian:bookworm image; apt lists and caches removed to keep it small.
  cat > "$rootfs/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY_MIRROR bookworm-security main
EOF
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
  tar -C "$rootfs" --numeric-owner -cf "$WORKDIR/rootfs.tar" .
  log "debootstrap done in $((SECONDS - t0)) s; rootfs tar $(du -h "$WORKDIR/rootfs.tar" | cut -f1)"
  local ctr
  ctr=$("${BUILDAH[@]}" from scratch)
  "${BUILDAH[@]}" add "$ctr" "$WORKDIR/rootfs.tar" /
  "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd /bin/bash --label org.opencontainers.image.description="debootstrap bookworm minbase ($MIRROR)" "$ctr"
  "${BUILDAH[@]}" commit --rm "$ctr" "$BASE_TAG"
  rm -rf "$rootfs" "$WORKDIR/rootfs.tar"
  log "base image $BASE_TAG committed"
}

build_image() {
  "${BUILDAH[@]}" inspect --type image "$BASE_TAG" >/dev/null 2>&1 || { echo "build-local: no $BASE_TAG: run '$0 base' first" >&2; exit 3; }
  log "buildah bud --isolation chroot -t $TAG (WITH_CUDA=$CUDA, JOBS=$JOBS)"
  local t0=$SECONDS
  nice "${BUILDAH[@]}" bud --isolation chroot --layers=false \
    --ignorefile "$REPO/deploy/docker/maskd.dockerignore" \
    -f "$REPO/deploy/docker/Dockerfile" \
    --build-arg BASE_IMAGE="$BASE_TAG" --build-arg WITH_CUDA="$CUDA" --build-arg JOBS="$JOBS" \
    -t "$TAG" "$REPO" 2>&1 | tee "$WORKDIR/bud.log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || { log "buildah bud FAILED (rc $rc) after $((SECONDS - t0)) s; log: $WORKDIR/bud.log"; exit "$rc"; }
  log "buildah bud done in $((SECONDS - t0)) s"
  "${BUILDAH[@]}" images --format '{{.Name}}:{{.Tag}} {{.ID}} {{.Size}}' | grep -E 'maskd|bookworm-local' | tee -a "$REPORT"
  # Smoke test inside the image, as its own non-root user: the binaries start and find their libraries.
  local ctr
  ctr=$("${BUILDAH[@]}" from "$TAG")
  "${BUILDAH[@]}" run --isolation chroot --user maskd "$ctr" -- sh -c '
    set -u; id
    for c in gcc cc g++ c++ clang cmake make; do command -v "$c" >/dev/null && { echo "compiler found: $c"; exit 1; }; done
    echo "no compiler: ok"; ls /usr/local/share/maskd/tokenizers
    maskd --listen=unix:///tmp/smoke.sock --metrics_listen= > /tmp/maskd.log 2>&1 & pid=$!
    rc=1; i=0
    while [ $i -lt 60 ]; do
      if maskctl --addr unix:///tmp/smoke.sock health; then rc=0; break; fi
      i=$((i+1)); sleep 1
    done
    kill -TERM $pid
    i=0; while kill -0 $pid 2>/dev/null && [ $i -lt 30 ]; do i=$((i+1)); sleep 1; done
    if kill -0 $pid 2>/dev/null; then echo "maskd still running 30 s after SIGTERM"; kill -KILL $pid; rc=1; else echo "maskd exited on SIGTERM: ok"; fi
    cat /tmp/maskd.log; exit $rc' 2>&1 | tee -a "$REPORT"
  local smoke=${PIPESTATUS[0]}
  log "smoke test in the image (maskd serves health as uid 10001 from the bundled tokenizers, exits on SIGTERM): rc $smoke"
  "${BUILDAH[@]}" rm "$ctr" >/dev/null
  [ "$smoke" = 0 ] || exit 1
}

case "$STEP" in
  base) build_base ;;
  image) build_image ;;
  all) build_base; build_image ;;
esac
log "finished ($STEP)"
