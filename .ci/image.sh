#!/usr/bin/env bash
# The container image (Dockerfile) built and run under a real dockerd:
# Debian's docker.io, no registry, so both of the Dockerfile's images come
# from local root filesystems: a busybox-static skeleton (the base), and
# the same plus the host's Go (the build stage). The Go modules come from a
# file:// proxy in the build context, filled from the host's module cache.
# Then, under Docker's default seccomp profile, --network none and no added
# capabilities, as root and as --user 1000:1000:
#   confine run --json -- true      must exit 0 with every guarantee held
#   the Kubernetes Job's script     (deploy/kubernetes/confine-job.yaml) in
#                                   a go image, with the Job's restrictions
#                                   (--read-only, --cap-drop ALL,
#                                   no-new-privileges, tmpfs /tmp and /work)
# and the man page must be installed.
#
# .ci/run runs it (CONFINE_CI_IMAGE=1 there by default; 0 skips it); run
# alone it is off unless CONFINE_CI_IMAGE=1.
# Its dockerd is its own (socket, data, exec root and pid file under
# CONFINE_CI_IMAGE_WORK, default /var/tmp/confine-ci-image), stopped by its
# pid at the end, so it does not touch .ci/docker-matrix.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)

if [ "${CONFINE_CI_IMAGE:-0}" != 1 ]; then
  echo "image: skipped: CONFINE_CI_IMAGE is not 1 (off by default)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "image: FAIL: must run as root (to start dockerd)"
  exit 1
fi
. .ci/matrix-lib.sh
start=$SECONDS
work=${CONFINE_CI_IMAGE_WORK:-/var/tmp/confine-ci-image}
mkdir -p "$work"
work=$(cd "$work" && pwd -P)
export PATH="/usr/local/go/bin:$PATH"

need=()
{ [ -x /usr/sbin/dockerd ] && [ -x /usr/bin/docker ]; } || need+=(docker.io)
[ -x /bin/busybox ] || need+=(busybox-static)
if [ "${#need[@]}" -gt 0 ]; then
  apt_install_no_start "${need[@]}" || { echo "image: FAIL: cannot install ${need[*]}"; exit 1; }
fi

cleanup() {
  stop_dockerd
  # The images (vfs: every layer a full copy, 1.8 GB) are not kept.
  rm -rf "$work/ctx" "$work/rootfs" "$work"/*.tar "$work/data" "$work/exec"
}
trap cleanup EXIT
start_dockerd image "$work" || exit 1
t_dockerd=$((SECONDS - start))

# The base: busybox-static as every tool, merged-/usr layout, users root
# and 1000 (no home for 1000, as in most images run with --user).
rootfs="$work/rootfs"
rm -rf "$rootfs"; mkdir -p "$rootfs"/{usr/bin,usr/lib,etc,root,tmp,proc,sys,dev,run,var/log}
ln -s usr/bin "$rootfs/bin"; ln -s usr/bin "$rootfs/sbin"; ln -s usr/lib "$rootfs/lib"
chmod 1777 "$rootfs/tmp"
cp /bin/busybox "$rootfs/usr/bin/busybox"
for a in $(/bin/busybox --list); do
  [ -e "$rootfs/usr/bin/$a" ] || ln -s busybox "$rootfs/usr/bin/$a"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$rootfs/etc/group"
tar -C "$rootfs" -cf "$work/base.tar" .
# The Go image: the base plus the host's Go.
goroot=$(go env GOROOT)
mkdir -p "$rootfs/usr/local"
cp -a "$goroot" "$rootfs/usr/local/go"
tar -C "$rootfs" -cf "$work/go.tar" .
rm -rf "$rootfs"
"${docker[@]}" import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  "$work/base.tar" confine-ci-base:latest >/dev/null
"${docker[@]}" import -c 'ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'ENV HOME=/root' "$work/go.tar" confine-ci-go:latest >/dev/null
rm -f "$work"/*.tar

# The build context: the repository's files (tracked and new, not
# ignored) and a module proxy holding exactly the modules the build needs.
ctx="$work/ctx"
rm -rf "$ctx"; mkdir -p "$ctx"
git ls-files -z -co --exclude-standard | xargs -0 cp --parents -t "$ctx"
# (What `go build` fetches, not `go mod download`: that wants every
# module in the graph, test dependencies of dependencies included.)
# Both binaries: confine-mcp links the MCP SDK, which confine leaves out.
for b in ./cmd/confine ./cmd/confine-mcp; do
  GOFLAGS=-mod=mod GOPROXY="file://$(go env GOMODCACHE)/cache/download" GOMODCACHE="$work/modcache" \
    GOCACHE="$work/gocache" CGO_ENABLED=0 go build -o /dev/null "$b"
done
cp -a "$work/modcache/cache/download" "$ctx/.modproxy"
chmod -R u+w "$work/modcache"; rm -rf "$work/modcache" "$work/gocache"
t_prep=$((SECONDS - start))

build() { # tag base
  DOCKER_BUILDKIT=0 "${docker[@]}" build -q --network none --build-arg GO_IMAGE=confine-ci-go:latest \
    --build-arg BASE_IMAGE="$2" --build-arg GOPROXY=file:///src/.modproxy -t "$1" "$ctx" >/dev/null
}
build confine-ci-image:latest confine-ci-base:latest
t_build=$((SECONDS - start))
build confine-ci-image-go:latest confine-ci-go:latest
t_build_go=$((SECONDS - start))

status=0
fail() { echo "image: FAIL: $*"; status=1; }

# Docker's defaults: its seccomp profile, no added capabilities.
for who in root 1000; do
  user=(--user 0:0); [ "$who" = root ] || user=(--user 1000:1000)
  out=$("${docker[@]}" run --rm --network none "${user[@]}" confine-ci-image:latest \
    confine run --json -- sh -c 'echo hi from $(id -u)' 2>"$work/stderr.$who") || {
    fail "$who: confine run exited $?: $(tail -n 3 "$work/stderr.$who")"; continue; }
  verdict=$(printf '%s' "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
bad = [g["name"] for g in r["guarantees"] if not g.get("mechanism")]
ok = r["exit_code"] == 0 and r["stdout"]["head"] == "hi from '"$( [ "$who" = root ] && echo 0 || echo 1000)"'\n" and not bad
print(("ok" if ok else "BAD") + " backend=%s guarantees=%d unenforced=%s event_log_skipped=%r" % (
    r["backend"], len(r["guarantees"]), bad, r.get("event_log_skipped", "")))')
  echo "image: as $who: confine run --json: $verdict"
  case "$verdict" in ok*) ;; *) fail "$who: $out" ;; esac
done
man=$("${docker[@]}" run --rm --network none confine-ci-image:latest head -n 1 /usr/local/share/man/man1/confine.1) || true
case "$man" in .TH*) echo "image: man page installed" ;; *) fail "man page missing: $man" ;; esac

# The Kubernetes Job's script with the Job's restrictions.
script=$(python3 - "$repo/deploy/kubernetes/confine-job.yaml" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
i = next(n for n, l in enumerate(lines) if l.strip() == "- |")
ind = len(lines[i + 1]) - len(lines[i + 1].lstrip())
out = []
for l in lines[i + 1:]:
    if l.strip() and len(l) - len(l.lstrip()) < ind:
        break
    out.append(l[ind:])
print("\n".join(out))
PY
)
if "${docker[@]}" run --rm --network none --user 1000:1000 --read-only --cap-drop ALL \
    --security-opt no-new-privileges --tmpfs /tmp:exec,mode=1777 --tmpfs /work:exec,mode=1777 \
    --tmpfs /var/log/confine:mode=1777 -e CONFINE_EVENT_LOG=/var/log/confine/events.jsonl -w /work \
    confine-ci-image-go:latest /bin/sh -c "$script" > "$work/job.log" 2>&1; then
  if grep -q '"exit_code":0' "$work/job.log" && grep -q 'built and run confined' "$work/job.log"; then
    echo "image: the Kubernetes Job's script: ok (a confined go build, then the binary run confined)"
  else
    fail "the Job's script did not report its run: $(tail -n 5 "$work/job.log")"
  fi
else
  fail "the Job's script failed: $(tail -n 8 "$work/job.log")"
fi

echo "image: dockerd up after $t_dockerd s, images and context ready at $t_prep s, image built at $t_build s, go image at $t_build_go s, total $((SECONDS - start)) s"
exit "$status"
