#!/usr/bin/env bash
# arm64, live (issue 14): confine built for linux/arm64 and run under
# Debian's arm64 6.1 kernel in qemu-system-aarch64 (-M virt -cpu max, TCG:
# software emulation of every instruction). The amd64 kernel matrix
# (.ci/kernel-matrix.sh) boots its guests the same way; the shared parts
# (kernel package, initramfs, first init stage) are .ci/matrix-lib.sh's.
#
# The guest has no arm64 userland but a static busybox (arm64), so it runs
# what needs only that and the binaries built here:
#   - `confine check` and `confine selftest`, as root and as uid 65534;
#   - escape.test -test.run '^TestEscape$' (every vector, as root and as
#     65534: the suite drops by itself), with the prebuilt probe;
#   - notify.test, the notification handler's tests (as root and 65534:
#     they drop by themselves); arm64 has no chmod, chown, rename, link...,
#     so those rows run as the *at calls a C library makes here, and the
#     utime, utimes and futimesat rows are skipped, saying why;
#   - the AArch32 rows: a 32-bit ARM busybox (busybox-static:armhf) runs
#     unconfined, then confined under the core backend, where the filter's
#     arch check is all that stands between it and a loopback listener.
# Not run there (no arm64 gcc, go, python or node in the guest): the
# functional tests, the recipes and everything else that drives a
# toolchain; TestEscapeEgress and TestEscapeBwrap (no bwrap); probe.test
# (its foreign-ABI tests are amd64's: i386 and x32). The amd64 runs cover
# those.
#
# The guest writes its logs to a 9p share and prints a marker line on the
# serial console; the host judges from both (the qemu exit status alone
# proves nothing) and prints a summary table.
#
# Run from the repository root as root: `.ci/arm64.sh [STAGE]`, STAGE one
# of prepare (the packages, the kernel, the cross-build and the initramfs:
# everything that uses apt or go), boot (the boot and its summary, from
# what prepare left in the work directory) or all (the default: both).
# .ci/run prepares after the kernel matrix, then boots in the background
# beside the Docker cells, the image and the fuzz targets (prepare is
# apart because apt and dpkg cannot serve two scripts at once).
# Environment:
#   CONFINE_CI_ARM64_WORK      work directory, default /var/tmp/confine-ci-arm64
#   CONFINE_CI_ARM64_TIMEOUT   seconds for the boot, default 3600
#   CONFINE_CI_ARM64_RUN       -test.run pattern for escape.test, default ^TestEscape$
#   CONFINE_CI_ARM64_KERNEL    kernel line, default 6.1
#   CONFINE_CI_ARM64_REPORT    1: no build and no boot, only the summary of
#                              the last boot's logs in the work directory
# Exit status: 0 when everything passed, 1 otherwise (a missing kernel
# package or qemu fails: what was asked for runs).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)
. .ci/matrix-lib.sh

if [ "$(id -u)" != 0 ]; then
  echo "arm64: FAIL: must run as root (qemu's 9p passthrough and the suite's uid drop need it)"
  exit 1
fi
work=${CONFINE_CI_ARM64_WORK:-/var/tmp/confine-ci-arm64}
boot_timeout=${CONFINE_CI_ARM64_TIMEOUT:-3600}
run=${CONFINE_CI_ARM64_RUN:-^TestEscape\$}
line=${CONFINE_CI_ARM64_KERNEL:-6.1}
mkdir -p "$work"
work=$(cd "$work" && pwd -P)
case "$work/" in
  "$repo"/*) echo "arm64: FAIL: the work directory $work must be outside the repository"; exit 1 ;;
esac

# report: the summary of the last boot, from the console's marker and the
# logs in $work/out. Returns 1 when anything failed.
report() {
  local out="$work/out" status=0 wall rc pkg
  read -r wall rc pkg < "$work/boot" 2>/dev/null || { echo "arm64: FAIL: no boot recorded in $work"; return 1; }
  if ! grep -q '^CONFINE-ARM64-DONE' "$work/console.log" 2>/dev/null; then
    echo "arm64: FAIL: no completion marker on the console (qemu exit $rc after ${wall}s); console tail:"
    tail -n 40 "$work/console.log" 2>/dev/null | sed 's/^/    /'
    return 1
  fi
  grep '^CONFINE-ARM64:' "$work/console.log" | sed 's/^/  /'
  sed 's/^/  guest /' "$out/guest-info" 2>/dev/null
  # row NAME RC-FILE DETAIL: one summary line; a missing or non-zero rc fails.
  row() {
    local r
    r=$(cat "$2" 2>/dev/null || echo missing)
    if [ "$r" = 0 ]; then printf '  %-26s PASS  %s\n' "$1" "$3"; else printf '  %-26s FAIL  exit %s  %s\n' "$1" "$r" "$3"; status=1; fi
  }
  echo
  echo "== arm64 ($pkg, qemu TCG, boot ${wall}s) =="
  row "confine check" "$out/check.rc" "$(grep -m1 -i 'backend' "$out/check.log" 2>/dev/null | tr -s ' ' | cut -c1-80)"
  for u in root nobody; do
    row "confine selftest ($u)" "$out/selftest-$u.rc" "$(grep -m1 -E '^[0-9]+ vectors:' "$out/selftest-$u.log" 2>/dev/null | cut -c1-100)"
  done
  row "escape.test" "$out/escape.rc" "$(grep -m1 -E '^--- (PASS|FAIL): TestEscape ' "$out/escape.log" 2>/dev/null)"
  # The notification handler's tests: top-level tests passed, skipped
  # (each says why in notify.log) and failed.
  row "notify.test" "$out/notify.rc" "$(for r in PASS SKIP FAIL; do printf '%s %s ' "$r" "$(grep -cE "^--- $r: " "$out/notify.log" 2>/dev/null || true)"; done)"
  # The escape rows per uid: blocked (the control escaped, the confined run
  # did not), not applicable (the control did not escape: skipped with the
  # reason), known gaps (the ledger's; skipped, saying KNOWN GAP), escaped
  # or broken (failed).
  for u in root nobody; do
    b=$(grep -cE "^ +--- PASS: TestEscape/$u/[^ /]+ " "$out/escape.log" || true)
    s=$(grep -cE "^ +--- SKIP: TestEscape/$u/[^ /]+ " "$out/escape.log" || true)
    g=$(awk -v P="TestEscape/$u/" '/^=== RUN/{t=$3} /KNOWN GAP/ && index(t, P) == 1 {n[t]=1} END{print length(n)}' "$out/escape.log" 2>/dev/null)
    f=$(grep -cE "^ +--- FAIL: TestEscape/$u/[^ /]+ " "$out/escape.log" || true)
    printf '  %-26s blocked %s, not applicable %s, known gap %s, escaped or broken %s\n' "TestEscape as $u" "$b" "$((s - g))" "$g" "$f"
    [ "$f" = 0 ] || status=1
    [ "$b" != 0 ] || { echo "    no row of $u was blocked: the suite did not run as $u"; status=1; }
  done
  # The AArch32 rows: ESCAPED fails, n/a says why.
  while read -r name rest; do
    v=${rest##*] }
    printf '  %-26s %s\n' "$name" "$v"
    case "$v" in blocked|n/a*) ;; *) status=1; echo "    $rest" ;; esac
  done < <(grep '^a32-' "$out/a32.log" 2>/dev/null || echo "a32 ] FAIL: no AArch32 rows in $out/a32.log")
  if [ "$status" != 0 ]; then
    echo "-- failures:"
    grep -hE -e '--- FAIL' -e '^FAIL' "$out/escape.log" "$out/notify.log" 2>/dev/null | head -n 40 | sed 's/^/   /'
    for f in check selftest-root selftest-nobody a32; do
      [ "$(cat "$out/$f.rc" 2>/dev/null || echo 0)" = 0 ] || { echo "-- $f.log tail:"; tail -n 15 "$out/$f.log" 2>/dev/null | sed 's/^/   /'; }
    done
  fi
  return "$status"
}
if [ "${CONFINE_CI_ARM64_REPORT:-0}" = 1 ]; then
  report; exit
fi
stage=${1:-all}
case "$stage" in prepare|boot|all) ;; *) echo "arm64: FAIL: stage $stage (want prepare, boot or all)"; exit 1 ;; esac

# boot: the boot prepare made ready, then its summary.
boot() {
  local rc t0 pkg
  pkg=$(cat "$work/package" 2>/dev/null) && [ -f "$work/vmlinuz" ] && [ -f "$work/initrd.cpio.gz" ] ||
    { echo "arm64: FAIL: nothing prepared in $work (run .ci/arm64.sh prepare first)"; return 1; }
  rm -rf "$work/out" "$work/console.log" "$work/boot"
  echo "arm64: booting $pkg under qemu-system-aarch64 -M virt -cpu max (TCG)"
  t0=$(date +%s)
  rc=0
  # The first init stage mounts the host's root read-only at /host (it is
  # shared with the amd64 matrix); this guest reads only notify's sources
  # there.
  timeout -k 20 "$boot_timeout" qemu-system-aarch64 -M virt -cpu max -accel tcg -smp 2 -m 2048 \
    -nodefaults -display none -no-reboot -monitor none \
    -serial "file:$work/console.log" \
    -kernel "$work/vmlinuz" -initrd "$work/initrd.cpio.gz" \
    -append "console=ttyAMA0 panic=-1 quiet" \
    -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
    -virtfs "local,path=$work,mount_tag=work,security_model=none,multidevs=remap" &
  qpid=$!
  # SIGTERM (.ci/run stops a boot CI no longer waits for) ends the boot:
  # timeout passes it on to qemu. wait, unlike a foreground command, lets
  # the trap run at once; then wait again for both to be gone.
  trap 'kill -TERM "$qpid" 2>/dev/null' TERM
  wait "$qpid" || rc=$?
  while kill -0 "$qpid" 2>/dev/null; do wait "$qpid" || rc=$?; done
  trap - TERM
  echo "$(($(date +%s) - t0)) $rc $pkg" > "$work/boot"
  report
}
if [ "$stage" = boot ]; then
  boot; exit
fi
rm -f "$work/package" "$work/vmlinuz" "$work/initrd.cpio.gz"

# qemu-system-aarch64, and the arm64 architecture in apt for the kernel
# package and busybox-static:arm64.
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  dpkg --add-architecture arm64
  apt-get update -qq
fi
if ! command -v qemu-system-aarch64 >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-arm ||
    { echo "arm64: FAIL: cannot install qemu-system-arm"; exit 1; }
fi
# get_busybox ARCH MACHINE: busybox-static:ARCH unpacked under
# $work/busybox-ARCH; MACHINE is its ELF e_machine (little-endian hex).
get_busybox() {
  local d="$work/busybox-$1"
  if ! [ -x "$d/bin/busybox" ]; then
    rm -rf "$d" "$work/bbdeb"; mkdir -p "$work/bbdeb"
    (cd "$work/bbdeb" && apt-get download "busybox-static:$1") >/dev/null 2>&1 ||
      { apt-get update -qq; (cd "$work/bbdeb" && apt-get download "busybox-static:$1"); } ||
      { echo "arm64: FAIL: cannot download busybox-static:$1"; exit 1; }
    dpkg-deb -x "$work"/bbdeb/*.deb "$d"
    rm -rf "$work/bbdeb"
  fi
  [ "$(od -An -tx1 -j18 -N2 "$d/bin/busybox" | tr -d ' ')" = "$2" ] ||
    { echo "arm64: FAIL: $d/bin/busybox is not a busybox for $1"; exit 1; }
}
# The 32-bit ARM one (armhf) is the AArch32 rows' attacker.
if ! dpkg --print-foreign-architectures | grep -qx armhf; then
  dpkg --add-architecture armhf
  apt-get update -qq
fi
get_busybox arm64 b700 # EM_AARCH64
get_busybox armhf 2800 # EM_ARM
bbdir="$work/busybox-arm64"
cp "$work/busybox-armhf/bin/busybox" "$work/busybox-armhf.bin"
kdir=$(fetch_kernel "$line" "$work/kernels" arm64) || { echo "arm64: FAIL: no arm64 $line kernel package"; exit 1; }

# Everything the guest runs, built here (a Go build under TCG would take
# many minutes).
export PATH="/usr/local/go/bin:$PATH"
echo "arm64: cross-building confine, escape.test and the probe (linux/arm64, static)"
t0=$(date +%s)
export CGO_ENABLED=0 GOOS=linux GOARCH=arm64
go build -o "$work/confine" ./cmd/confine
go test -c -o "$work/escape.test" ./escape
go build -o "$work/probe" ./escape/probe
go test -c -o "$work/notify.test" ./internal/notify
unset GOOS GOARCH
echo "arm64: built in $(($(date +%s) - t0))s"

# guest_init2_arm64: PID 1 in the guest's tmpfs root. A busybox system (its
# applets in /bin and /usr/bin, an /etc/passwd with root and nobody), the
# work share at the host's path, then the runs.
guest_init2_arm64() {
  guest_init2_preamble /bin /sbin /usr/bin /usr/sbin /etc /var/tmp /home /root
  cat <<'EOF'
$B mount -t tmpfs -o mode=1777 tmp /tmp
$B mount -t tmpfs -o mode=1777 vartmp /var/tmp
$B cp /ci/busybox /bin/busybox
/bin/busybox --install -s
# The links devtmpfs leaves to udev (notify's tests use /dev/fd/N).
ln -s /proc/self/fd /dev/fd
for i in 0:stdin 1:stdout 2:stderr; do ln -s "/proc/self/fd/${i%%:*}" "/dev/${i#*:}"; done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' > /etc/passwd
printf 'root:x:0:\nnogroup:x:65534:\n' > /etc/group
say() { echo "CONFINE-ARM64: [uptime $(cut -d' ' -f1 /proc/uptime)s] $*"; }
done_() { say "$*"; echo "CONFINE-ARM64-DONE"; sync; poweroff -f; }
mkdir -p /ci/work
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 work /ci/work || done_ "FAIL: cannot mount the work share"
. /ci/work/config
mkdir -p "$WORK"
mount --bind /ci/work "$WORK"
out=$WORK/out
mkdir -p "$out"
ip link set lo up
hostname confine-arm64
echo +pids > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
{
  echo "kernel: $(uname -r) $(uname -m)"
  echo "lsm: $(cat /sys/kernel/security/lsm)"
  echo "cpu: $(grep -m1 -i -E '^(CPU part|Features)' /proc/cpuinfo)"
  echo "nproc: $(nproc)"
} > "$out/guest-info"
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
export CONFINE_ESCAPE_PROBE=$WORK/probe CONFINE_TEST_RUN_LIMIT=10m
cp "$WORK/confine" /usr/local/bin/confine 2>/dev/null || { mkdir -p /usr/local/bin && cp "$WORK/confine" /usr/local/bin/confine; }
chmod 755 /usr/local/bin/confine
# a32: the AArch32 (compat) ABI, which the filter's arch check must kill:
# a 32-bit ARM busybox runs unconfined (the control), then under the core
# backend (seccomp is the only layer between it and the loopback listener
# there). One line per row: "ROW control=... confined=... VERDICT".
a32() {
  bb32=/opt/a32/busybox
  mkdir -p /opt/a32 /tmp/a32wd
  cp "$WORK/busybox-armhf.bin" $bb32 && chmod 755 $bb32
  c=$($bb32 echo a32-alive 2>&1); crc=$?
  f=$(cd /tmp/a32wd && confine run --backend core --ro /opt/a32 -- $bb32 echo a32-alive 2>&1); frc=$?
  if [ "$crc" != 0 ] || [ "$c" != a32-alive ]; then v="n/a (the control did not run: $c)"
  elif [ "$frc" != 0 ] && ! echo "$f" | grep -q a32-alive; then v=blocked
  else v=ESCAPED; fi
  echo "a32-exec control=[rc $crc: $c] confined=[rc $frc: $(echo "$f" | tr '\n' ' ' | cut -c1-200)] $v"
  # a32net MODE: the bytes the listener got from the 32-bit nc, run
  # unconfined (control) or confined; MODE.rc holds nc's or confine's status.
  a32net() {
    : > /tmp/a32-$1.got
    nc -l -p 17032 > /tmp/a32-$1.got & lp=$!
    sleep 1
    if [ $1 = control ]; then
      echo a32-net | timeout 10 $bb32 nc 127.0.0.1 17032 > /tmp/a32-$1.out 2>&1; echo $? > /tmp/a32-$1.rc
    else
      (cd /tmp/a32wd && echo a32-net | confine run --backend core --timeout 20s --ro /opt/a32 -- $bb32 nc 127.0.0.1 17032) > /tmp/a32-$1.out 2>&1; echo $? > /tmp/a32-$1.rc
    fi
    sleep 1
    kill $lp 2>/dev/null; wait $lp 2>/dev/null
  }
  a32net control; a32net confined
  control_got=$(cat /tmp/a32-control.got); confined_got=$(cat /tmp/a32-confined.got)
  control_rc=$(cat /tmp/a32-control.rc); confined_rc=$(cat /tmp/a32-confined.rc)
  control_out=$(tr '\n' ' ' < /tmp/a32-control.out | cut -c1-200); confined_out=$(tr '\n' ' ' < /tmp/a32-confined.out | cut -c1-200)
  if [ "$control_got" != a32-net ]; then v="n/a (the control's bytes did not arrive: [$control_got] rc $control_rc $control_out)"
  elif [ -z "$confined_got" ]; then v=blocked
  else v=ESCAPED; fi
  echo "a32-tcp-connect control=[rc $control_rc: got $control_got] confined=[rc $confined_rc: got '$confined_got': $confined_out] $v"
}
cd /tmp
say "confine check"
confine check > "$out/check.log" 2>&1; echo $? > "$out/check.rc"
say "AArch32 rows"
a32 > "$out/a32.log" 2>&1
say "escape.test -test.run $RUN"
timeout 3000 "$WORK/escape.test" -test.v -test.count=1 -test.timeout=50m -test.run "$RUN" > "$out/escape.log" 2>&1
echo $? > "$out/escape.rc"
say "notify.test"
# From its package's directory, as go test runs it (a test reads kinds.go):
# the host's root is at /host, read-only. The races repeat each call 200
# times, not 2000: under TCG 2000 took over 7 minutes.
(cd "/host$REPO/internal/notify" && NOTIFY_TEST_RACE_ITER=200 timeout 1200 "$WORK/notify.test" -test.v -test.count=1 -test.timeout=20m) > "$out/notify.log" 2>&1
echo $? > "$out/notify.rc"
say "confine selftest (root)"
confine selftest > "$out/selftest-root.log" 2>&1; echo $? > "$out/selftest-root.rc"
say "confine selftest (uid 65534)"
su -s /bin/sh nobody -c 'cd /tmp && HOME=/tmp confine selftest' > "$out/selftest-nobody.log" 2>&1; echo $? > "$out/selftest-nobody.rc"
dmesg > "$out/dmesg" 2>&1
done_ "finished"
EOF
}

build_initramfs "$kdir" "$work/initrd.cpio.gz" "$bbdir/bin/busybox" guest_init2_arm64
{ shvar WORK "$work"; shvar RUN "$run"; shvar REPO "$repo"; } > "$work/config"
cp "$kdir/vmlinuz" "$work/vmlinuz"
# Written last: boot takes a work directory with a package for prepared.
cat "$kdir/package" > "$work/package"
echo "arm64: prepared in $work"
if [ "$stage" = all ]; then
  boot; exit
fi
