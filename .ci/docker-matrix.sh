#!/usr/bin/env bash
# The escape suite (with the functional tests) and the probe's foreign-ABI
# tests inside a real Docker container: Debian's docker.io, its default
# seccomp profile, no added capabilities, --network none; once as root (the
# suite then runs every vector as root and as uid 65534) and once as
# --user 1000:1000 (with a second group, 1001, which the chown fixtures need).
#
# No registry is reachable, so the image is imported from a local tarball:
# an empty skeleton plus a copy of the host's /etc; the toolchains (gcc, go,
# python3, node, git) come from read-only bind mounts of the host's /usr.
# dockerd runs without networking (--iptables=false --bridge=none), with
# its own socket, data and pid file under the work directory, and is
# stopped by that pid at the end.
#
# Run from the repository root as root. Environment:
#   CONFINE_CI_DOCKER=0             skip (prints why)
#   CONFINE_CI_DOCKER_WORK          work directory, default /var/tmp/confine-ci-docker
#   CONFINE_CI_DOCKER_TIMEOUT       seconds per container run, default 1200
#   CONFINE_CI_MATRIX_SCOPE         ci (default: the CI-sized test selection, .ci/matrix-lib.sh) or full
#   CONFINE_CI_MATRIX_RUN           -test.run pattern for escape.test (default: the scope's)
#   CONFINE_CI_MATRIX_SKIP          -test.skip pattern for escape.test (default: the scope's)
# Exit status: 0 when every cell passed, 1 when any failed or could not run.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)
. .ci/matrix-lib.sh

if [ "${CONFINE_CI_DOCKER:-1}" = 0 ]; then
  echo "docker matrix: skipped: CONFINE_CI_DOCKER=0"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "docker matrix: FAIL: must run as root (to start dockerd)"
  exit 1
fi
work=${CONFINE_CI_DOCKER_WORK:-/var/tmp/confine-ci-docker}
run_timeout=${CONFINE_CI_DOCKER_TIMEOUT:-1200}
mkdir -p "$work"
work=$(cd "$work" && pwd -P)

# Debian's docker.io (dockerd, containerd, runc).
if ! [ -x /usr/sbin/dockerd ] || ! [ -x /usr/bin/docker ]; then
  if ! apt_install_no_start docker.io; then
    echo "docker matrix: FAIL: cannot install docker.io (no network to Debian's archive?)"
    exit 1
  fi
fi

export PATH="/usr/local/go/bin:$PATH"
echo "docker matrix: building the test binaries"
mkdir -p "$work/bin"
CGO_ENABLED=0 go test -c -o "$work/bin/escape.test" ./escape
CGO_ENABLED=0 go test -c -o "$work/bin/probe.test" ./internal/probe
CGO_ENABLED=0 go build -o "$work/bin/probe" ./escape/probe
goroot=$(go env GOROOT)

# dockerd: started here, stopped by its pid on every exit path.
trap stop_dockerd EXIT
start_dockerd "docker matrix" "$work" || exit 1
echo "docker matrix: $("${docker[@]}" version --format 'docker {{.Server.Version}}'), seccomp: $("${docker[@]}" info --format '{{.SecurityOptions}}')"

# The image: the host's top-level layout (merged-/usr symlinks as they
# are, empty mount points otherwise) and a copy of its /etc.
img=confine-ci-root:latest
skel="$work/skel"
rm -rf "$skel"; mkdir -p "$skel"
for e in /*; do
  n=${e#/}
  case "$n" in proc|sys|dev|run|tmp|mnt|media|boot|lost+found) continue ;; esac
  if [ -L "$e" ]; then ln -s "$(readlink "$e")" "$skel/$n"
  elif [ -d "$e" ] && [ "$n" != etc ]; then mkdir -p "$skel/$n"
  fi
done
mkdir -p "$skel/tmp" "$skel/home" "$skel/proc" "$skel/sys" "$skel/dev" "$skel/run" "$skel/out"
# /home open to all, as the suite (run as 1000 too) makes home directories
# there to hide from the command.
chmod 1777 "$skel/tmp" "$skel/home"
cp -a /etc "$skel/etc"
tar -C "$skel" -cf "$work/root.tar" .
"${docker[@]}" rmi -f "$img" >/dev/null 2>&1 || true
"${docker[@]}" import "$work/root.tar" "$img" >/dev/null
rm -rf "$skel" "$work/root.tar"

# The host's directories the tests need, read-only: /usr (and /opt) hold
# the toolchains, the repository the sources the suite reads. The rest of
# the image (/home, /var, /root, /tmp) stays writable, as in a real image.
mounts=()
for d in /usr /opt; do
  [ -d "$d" ] && ! [ -L "$d" ] && mounts+=(-v "$d:$d:ro")
done
mounts+=(-v "$repo:$repo:ro" -v "$work/bin:$work/bin:ro")

rows=()
for who in root 1000; do
  cdir="$work/cells/$who"
  rm -rf "$cdir"; mkdir -p "$cdir"; chmod 777 "$cdir"
  name="confine-ci-$who-$$"
  user=()
  if [ "$who" != root ]; then user=(--user "$who:$who" --group-add 1001); fi
  echo "docker matrix: running the suite as $who"
  t0=$(date +%s)
  rc=0
  timeout -k 30 "$run_timeout" "${docker[@]}" run --name "$name" --network none "${user[@]}" \
    "${mounts[@]}" -v "$cdir:/out" -w "$repo/escape" \
    -e PATH="$goroot/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    -e HOME=/tmp -e GOCACHE=/tmp/gocache -e GOFLAGS=-buildvcs=false -e GOTOOLCHAIN=local -e GOPROXY=off \
    -e LANG=C.UTF-8 -e CONFINE_ESCAPE_PROBE="$work/bin/probe" -e RUN="$ci_run" -e SKIP="$ci_skip" \
    "$img" /bin/sh -c "
      cat /proc/self/status | grep -E '^(Uid|CapEff|Seccomp|NoNewPrivs):' > /out/guest-info
      \"$work/bin/probe.test\" -test.v -test.count=1 -test.run 'TestForeignABI|TestGateMissing' > /out/probe.log 2>&1; echo \$? > /out/probe.rc
      set --
      if [ -n \"\$RUN\" ]; then set -- \"\$@\" -test.run \"\$RUN\"; fi
      if [ -n \"\$SKIP\" ]; then set -- \"\$@\" -test.skip \"\$SKIP\"; fi
      \"$work/bin/escape.test\" -test.v -test.count=1 -test.timeout=20m \"\$@\" > /out/escape.log 2>&1; echo \$? > /out/escape.rc
    " > "$cdir/docker.log" 2>&1 || rc=$?
  echo "$(( $(date +%s) - t0 ))" > "$cdir/wall"
  "${docker[@]}" rm -f "$name" >/dev/null 2>&1 || true
  if [ ! -f "$cdir/escape.rc" ]; then
    echo "docker run exit $rc$([ "$rc" = 124 ] && echo ", timed out after ${run_timeout}s"): $(tail -n 1 "$cdir/docker.log")" > "$cdir/error"
  fi
  if [ "$who" = root ]; then
    rows+=("$(summarize_cell "$cdir" root "docker" default-seccomp)")
    rows+=("$(summarize_cell "$cdir" nobody "docker" default-seccomp)")
  else
    r=$(summarize_cell "$cdir" self "docker" default-seccomp)
    rows+=("${r/|self|/|1000|}")
  fi
done

status=0
print_refusals "$work/cells/root" "$work/cells/1000"
print_matrix "real Docker container ($(uname -r))" "${rows[@]}" || status=1
exit "$status"
