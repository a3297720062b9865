#!/usr/bin/env bash
# Kernel matrix: the escape suite (which holds the functional tests too) and
# the probe's foreign-ABI tests under Debian's 6.1 (Landlock ABI 2) and 6.12
# (ABI 6) kernels, booted under qemu, with user namespaces allowed and with
# user.max_user_namespaces=0. Each boot runs the suite as root, which runs
# every vector as root and again as uid 65534; the table has one cell per
# kernel x uid x namespaces.
#
# The cgroup v2 boots (cgv2) boot the same kernel with cgroup v1 off
# (cgroup_no_v1=all): memory and pids on the unified hierarchy only, as on
# a systemd host. The guest lays the hierarchy out as systemd does (root's
# tests in system.slice/ci-root.service, uid 1000's in a user@1000.service
# delegated to it, chowned, in app.slice/ci.scope) and runs there, as root
# (and so uid 65534) and as uid 1000, the memory and process-count escape
# rows, the CLI's whole-tree memory test, the library's test that an OOM
# kill spares the launcher, the host package's tests and a literal
# `confine run --memory 64MiB` of a python3 that takes 256 MiB.
#
# The guest boots a busybox initramfs that loads the 9p modules of its own
# kernel, switches into a tmpfs root (the initramfs root cannot be
# pivot_root()ed away, and the namespaces backend pivots), binds the host's
# root read-only over 9p (toolchains: gcc, go, python3, node, git), and
# writes its logs into a writable 9p share. The host reads the result from
# there and from a marker line on the serial console: the qemu exit status
# alone proves nothing.
#
# Run from the repository root as root. Environment:
#   CONFINE_CI_MATRIX=0              skip (prints why)
#   CONFINE_CI_MATRIX_SCOPE          ci (default): 6.1 only and the CI-sized test selection
#                                    (.ci/matrix-lib.sh); full: 6.1 and 6.12, every test, and
#                                    the 6.12 boot without INT $0x80
#   CONFINE_CI_MATRIX_KERNELS        kernel lines, default "6.1" (ci) or "6.1 6.12" (full)
#   CONFINE_CI_MATRIX_ACCEL          auto (KVM if /dev/kvm is usable), kvm, tcg
#   CONFINE_CI_MATRIX_WORK           work directory, default /var/tmp/confine-ci-matrix
#   CONFINE_CI_MATRIX_CELL_TIMEOUT   seconds per boot, default 2700 (a 6.12 boot with user namespaces ran over 22 minutes under TCG)
#   CONFINE_CI_MATRIX_JOBS           boots at a time, default 2
#   CONFINE_CI_MATRIX_RUN            -test.run pattern for escape.test (default: the scope's)
#   CONFINE_CI_MATRIX_SKIP           -test.skip pattern for escape.test (default: the scope's)
#   CONFINE_CI_MATRIX_NS             the user-namespace settings booted, default "on off"
#                                    ("on" alone: one boot of each kernel line, to time it)
#   CONFINE_CI_MATRIX_CGV2           1 (default): the cgroup v2 boots of each kernel line too
#                                    (user namespaces on and off); 0: none; only: those alone
# Exit status: 0 when every cell that ran passed (a kernel that cannot be
# fetched is skipped, saying why), 1 when any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)
. .ci/matrix-lib.sh

if [ "${CONFINE_CI_MATRIX:-1}" = 0 ]; then
  echo "kernel matrix: skipped: CONFINE_CI_MATRIX=0"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "kernel matrix: FAIL: must run as root (qemu's 9p passthrough and the suite's uid drop need it)"
  exit 1
fi

if [ "$matrix_scope" = full ]; then kernels_default="6.1 6.12"; else kernels_default="6.1"; fi
kernels=${CONFINE_CI_MATRIX_KERNELS:-$kernels_default}
cgv2=${CONFINE_CI_MATRIX_CGV2:-1}
nsl=${CONFINE_CI_MATRIX_NS:-on off}
for ns in $nsl; do
  case "$ns" in on|off) ;; *) echo "kernel matrix: FAIL: CONFINE_CI_MATRIX_NS=$nsl (want on, off or both)"; exit 1 ;; esac
done
case "$cgv2" in 0|1|only) ;; *) echo "kernel matrix: FAIL: CONFINE_CI_MATRIX_CGV2=$cgv2 (want 1, 0 or only)"; exit 1 ;; esac
work=${CONFINE_CI_MATRIX_WORK:-/var/tmp/confine-ci-matrix}
cell_timeout=${CONFINE_CI_MATRIX_CELL_TIMEOUT:-2700}
jobs=${CONFINE_CI_MATRIX_JOBS:-2}
mkdir -p "$work"
work=$(cd "$work" && pwd -P)
case "$work/" in
  "$repo"/*) echo "kernel matrix: FAIL: the work directory $work must be outside the repository"; exit 1 ;;
esac

# Tools: qemu and a static busybox for the initramfs.
need=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
if ! [ -x /bin/busybox ] || ! file_is_static /bin/busybox; then need+=(busybox-static); fi
if [ "${#need[@]}" -gt 0 ]; then
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"; }; then
    echo "kernel matrix: FAIL: cannot install ${need[*]} (no network to Debian's archive?)"
    exit 1
  fi
fi
busybox=/bin/busybox
file_is_static "$busybox" || { echo "kernel matrix: FAIL: $busybox is not static"; exit 1; }

accel=${CONFINE_CI_MATRIX_ACCEL:-auto}
case "$accel" in auto|kvm|tcg) ;; *) echo "kernel matrix: FAIL: CONFINE_CI_MATRIX_ACCEL=$accel (want auto, kvm or tcg)"; exit 1 ;; esac
# detect_accel KDIR INITRD: KVM if a guest really boots with it (a usable
# /dev/kvm can still hang under nested virtualization), else TCG.
detect_accel() {
  local log="$work/kvmcheck.log"
  accel=tcg
  if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
    rm -f "$log"
    timeout -k 5 60 qemu-system-x86_64 -accel kvm -cpu host -smp 1 -m 512 -nodefaults -display none -no-reboot \
      -monitor none -serial "file:$log" -kernel "$1/vmlinuz" -initrd "$2" \
      -append "console=ttyS0 panic=-1 quiet confine.kvmcheck=1" >/dev/null 2>&1 || true
    if grep -q '^CONFINE-KVM-OK' "$log" 2>/dev/null; then accel=kvm; fi
  fi
  [ "$accel" = tcg ] && echo "kernel matrix: /dev/kvm is missing or does not boot a guest here: TCG (software emulation)"
  return 0
}
qaccel() {
  case "$accel" in
    kvm) echo "-accel kvm -cpu host" ;;
    # One host thread per guest: multi-threaded TCG raced the kernel's
    # int3-based code patching (a 6.12 guest died of "Oops: int3" in
    # finish_task_switch), and two guests run side by side anyway.
    tcg) echo "-accel tcg,thread=single -cpu max" ;;
  esac
}

# The test binaries and the probe, built here: the suite would otherwise
# build the probe in every boot (a minute each under TCG).
export PATH="/usr/local/go/bin:$PATH"
goroot=$(go env GOROOT)
gomodcache=$(go env GOMODCACHE)
echo "kernel matrix: building the test binaries"
CGO_ENABLED=0 go test -c -o "$work/escape.test" ./escape
CGO_ENABLED=0 go test -c -o "$work/probe.test" ./internal/probe
CGO_ENABLED=0 go build -o "$work/probe" ./escape/probe
# The functional test's go build compiles the standard library with a cold
# cache: 3.5 to 4 minutes per uid under TCG, a third of a boot. Its
# packages, compiled here by the same toolchain at the same GOROOT, seed
# each uid's cache in the guest (CONFINE_ESCAPE_GOCACHE_SEED): the build
# still runs in the sandbox and compiles the job's own package.
rm -rf "$work/gocache-seed"
GOCACHE="$work/gocache-seed" GOTOOLCHAIN=local go build fmt sync
if [ "$cgv2" != 0 ]; then
  CGO_ENABLED=0 go test -c -o "$work/cli.test" ./internal/cli
  CGO_ENABLED=0 go test -c -o "$work/host.test" ./internal/host
  CGO_ENABLED=0 go test -c -o "$work/root.test" .
  CGO_ENABLED=0 go build -o "$work/confine" ./cmd/confine
fi

# variant_args VARIANT: the kernel command line a boot variant adds.
variant_args() {
  case "$1" in
    noia32) echo "ia32_emulation=0" ;;
    cgv2) echo "systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all" ;;
  esac
}

# A cell is one boot: kernel line x namespaces (on, off), plus, on 6.12, a
# boot with ia32_emulation=0 (variant noia32): a host without the INT $0x80
# gate, where the foreign-ABI tests must say "not applicable" rather than
# fail; and the cgroup v2 boots (variant cgv2, namespaces on and off). Boots run
# $jobs at a time: much of the suite waits (settle times, timeouts), so two
# guests share two cores well.
rows=()
cells=()
for line in $kernels; do
  if ! kdir=$(fetch_kernel "$line" "$work/kernels"); then
    for ns in on off; do
      for u in root nobody; do rows+=("$line|$u|$ns|SKIPPED|kernel package unavailable (see above)||"); done
    done
    continue
  fi
  initrd="$kdir/initrd.cpio.gz"
  build_initramfs "$kdir" "$initrd"
  if [ "$accel" = auto ]; then detect_accel "$kdir" "$initrd"; fi
  if [ "$cgv2" != only ]; then
    for ns in $nsl; do cells+=("$line|$ns||$kdir"); done
    if [ "$matrix_scope" = full ]; then
      case "$line" in 6.1[2-9]*|6.[2-9]*|[7-9].*) cells+=("$line|on|noia32|$kdir") ;; esac
    fi
  fi
  if [ "$cgv2" != 0 ]; then for ns in $nsl; do cells+=("$line|$ns|cgv2|$kdir"); done; fi
done

# run_cell LINE NS VARIANT KDIR: one boot, its files in cells/NAME.
run_cell() {
  local line=$1 ns=$2 variant=$3 kdir=$4 name cdir rc t0 why extra
  name="$line-ns$ns${variant:+-$variant}"
  extra=$(variant_args "$variant")
  cdir="$work/cells/$name"
  rm -rf "$cdir"; mkdir -p "$cdir"
  {
    shvar CELL "$name"; shvar NS "$ns"; shvar REPO "$repo"; shvar WORK "$work"
    shvar GOROOT "$goroot"; shvar GOMODCACHE "$gomodcache"
    shvar RUN "$ci_run"; shvar SKIP "$ci_skip"
    shvar ONLY_FOREIGN_ABI "$([ "$variant" = noia32 ] && echo 1)"
    shvar CGV2 "$([ "$variant" = cgv2 ] && echo 1)"
  } > "$cdir/config"
  echo "kernel matrix: booting $name ($accel)"
  t0=$(date +%s)
  rc=0
  timeout -k 20 "$cell_timeout" qemu-system-x86_64 $(qaccel) -smp 2 -m 2560 \
    -nodefaults -display none -no-reboot -monitor none \
    -serial "file:$cdir/console.log" \
    -kernel "$kdir/vmlinuz" -initrd "$kdir/initrd.cpio.gz" \
    -append "console=ttyS0 panic=-1 quiet syscall.x32=y confine.cell=$name $extra" \
    -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
    -virtfs "local,path=$work,mount_tag=work,security_model=none,multidevs=remap" \
    || rc=$?
  echo "$(($(date +%s) - t0))" > "$cdir/wall"
  if ! grep -q "^CONFINE-MATRIX-DONE $name" "$cdir/console.log" 2>/dev/null; then
    why="no completion marker on the console (qemu exit $rc"
    if [ "$rc" = 124 ]; then why="$why, timed out after ${cell_timeout}s"; fi
    why="$why)"
    if grep -q 'Kernel panic' "$cdir/console.log" 2>/dev/null; then
      why="$why: the guest kernel panicked: $(grep -m1 -E 'Oops|BUG|Kernel panic' "$cdir/console.log" | cut -c1-160)"
    fi
    { echo "kernel matrix: $name: $why; console tail:"; tail -n 30 "$cdir/console.log" 2>/dev/null | sed 's/^/    /'; } || true
    [ -f "$cdir/error" ] || echo "$why" > "$cdir/error"
  fi
  if [ "$variant" = noia32 ] && [ ! -f "$cdir/error" ] && ! grep -q 'no i386 system call gate' "$cdir/probe.log" 2>/dev/null; then
    # The boot exists to exercise the "not applicable" path: it must have.
    echo "$extra did not take INT \$0x80 away (the foreign-ABI tests did not say not applicable)" > "$cdir/error"
  fi
  echo "kernel matrix: $name done in $(cat "$cdir/wall")s"
}

running=0
for c in "${cells[@]}"; do
  IFS='|' read -r line ns variant kdir <<<"$c"
  if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
  run_cell "$line" "$ns" "$variant" "$kdir" &
  running=$((running + 1))
done
wait || true

status=0
for c in "${cells[@]}"; do
  IFS='|' read -r line ns variant kdir <<<"$c"
  cdir="$work/cells/$line-ns$ns${variant:+-$variant}"
  if [ "$variant" = cgv2 ]; then
    # uid 1000's tests ran as themselves ("self"), their logs in u1000/;
    # the boot's wall time and failure are the cell's.
    mkdir -p "$cdir/u1000"
    for f in wall error; do [ -f "$cdir/$f" ] && cp "$cdir/$f" "$cdir/u1000/"; done
    rows+=("$(summarize_cell "$cdir" root "$line (cgroup v2)" "$ns")")
    rows+=("$(summarize_cell "$cdir" nobody "$line (cgroup v2)" "$ns")")
    rows+=("$(summarize_cell "$cdir/u1000" self "$line (cgroup v2)" "$ns" uid1000)")
    continue
  fi
  for u in root nobody; do
    rows+=("$(summarize_cell "$cdir" "$u" "$line${variant:+ ($(variant_args "$variant"))}" "$ns")")
  done
done

dirs=()
for c in "${cells[@]}"; do
  IFS='|' read -r line ns variant kdir <<<"$c"
  dirs+=("$work/cells/$line-ns$ns${variant:+-$variant}")
  [ "$variant" = cgv2 ] && dirs+=("$work/cells/$line-ns$ns-$variant/u1000")
done
[ "${#dirs[@]}" -gt 0 ] && print_refusals "${dirs[@]}"
print_matrix "kernel matrix (${accel/auto/no kernel booted})" "${rows[@]}" || status=1
exit "$status"
