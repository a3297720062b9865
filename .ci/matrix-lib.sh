# Shared by .ci/kernel-matrix.sh, .ci/docker-matrix.sh and .ci/image.sh
# (sourced, not run). Kernel fetching and the guest's initramfs, the matrix
# table built from the `-test.v` logs of the test binaries, and a dockerd
# of the caller's own.

# The CI-sized selection (CONFINE_CI_MATRIX_SCOPE=ci, the default): the
# escape rows (not the bubblewrap backend's pass), the functional tests
# without their bubblewrap pass, the file-work and own-process tests and
# the backend selection test. Under TCG on 2 cores the whole suite takes
# about 50 minutes over both kernels; this takes about 20 with the Docker
# cells. CONFINE_CI_MATRIX_SCOPE=full runs everything.
matrix_scope=${CONFINE_CI_MATRIX_SCOPE:-ci}
case "$matrix_scope" in
  ci)
    ci_run_default='^(TestEscape|TestEscapeEgress|TestFunctional|TestFunctionalOwnProcesses|TestFunctionalForkUnderSupervisor|TestFileWork|TestBackends)$'
    ci_skip_default='^TestFunctional$/./^bwrap$'
    ;;
  full) ci_run_default=; ci_skip_default= ;;
  *) echo "matrix: FAIL: CONFINE_CI_MATRIX_SCOPE=$matrix_scope (want ci or full)"; exit 1 ;;
esac
# -test.run and -test.skip patterns for escape.test.
ci_run=${CONFINE_CI_MATRIX_RUN-$ci_run_default}
ci_skip=${CONFINE_CI_MATRIX_SKIP-$ci_skip_default}

# file_is_static PATH: true if PATH is a statically linked ELF executable.
file_is_static() {
  [ -x "$1" ] || return 1
  # A dynamic executable has a PT_INTERP program header (readelf is in
  # binutils, which gcc brings).
  ! readelf -lW "$1" 2>/dev/null | grep -q 'INTERP' && readelf -h "$1" >/dev/null 2>&1
}

# shvar NAME VALUE: a shell assignment the guest's busybox sh sources.
shvar() {
  local q=\'
  printf "%s='%s'\n" "$1" "${2//$q/$q\\$q$q}"
}

# fetch_kernel LINE DIR [ARCH]: downloads the newest Debian package of
# kernel LINE (6.1, 6.12) for ARCH (amd64, or arm64 after `dpkg
# --add-architecture arm64`), unpacks its vmlinuz and the modules the guest
# needs into DIR/LINE, and prints that directory. Reuses an earlier unpack
# of the same package.
fetch_kernel() {
  local line=$1 dir=$2 arch=${3:-amd64} re pkgs pkg out
  re="^linux-image-${line//./\\.}[.-][0-9].*-${arch}-unsigned\$"
  pkgs=$(apt-cache search --names-only "$re" 2>/dev/null | awk '{print $1}' | grep -v -e -cloud- -e -rt- | sort -V -r || true)
  if [ -z "$pkgs" ]; then
    apt-get update -qq >&2 || true
    pkgs=$(apt-cache search --names-only "$re" 2>/dev/null | awk '{print $1}' | grep -v -e -cloud- -e -rt- | sort -V -r || true)
  fi
  if [ -z "$pkgs" ]; then
    echo "kernel matrix: SKIP $line: no package matches $re in the apt lists (is Debian's archive, or bookworm-security for 6.12, in the sources?)" >&2
    return 1
  fi
  out="$dir/$line"
  mkdir -p "$out"
  for pkg in $pkgs; do
    if [ -f "$out/package" ] && [ "$(cat "$out/package")" = "$pkg" ] && [ -f "$out/vmlinuz" ]; then
      echo "kernel matrix: $line: reusing $pkg" >&2
      echo "$out"; return 0
    fi
    rm -rf "$out/deb"; mkdir -p "$out/deb"
    if (cd "$out/deb" && timeout 600 apt-get download "$pkg:$arch" >&2 2>"$out/download.err"); then
      rm -rf "$out/root"; mkdir -p "$out/root"
      dpkg-deb --fsys-tarfile "$out"/deb/*.deb | tar -x -C "$out/root" --wildcards --no-wildcards-match-slash \
        './boot/vmlinuz-*' './lib/modules/*/modules.builtin' \
        './lib/modules/*/kernel/fs/9p' './lib/modules/*/kernel/fs/netfs' './lib/modules/*/kernel/fs/fscache' \
        './lib/modules/*/kernel/net/9p' './lib/modules/*/kernel/drivers/virtio' './lib/modules/*/kernel/net/vmw_vsock' \
        2>/dev/null || true
      cp "$out"/root/boot/vmlinuz-* "$out/vmlinuz" || { echo "kernel matrix: $pkg has no vmlinuz" >&2; return 1; }
      rm -rf "$out/deb"
      echo "$pkg" > "$out/package"
      echo "kernel matrix: $line: $pkg" >&2
      echo "$out"; return 0
    fi
    echo "kernel matrix: apt-get download $pkg failed: $(tail -n 1 "$out/download.err")" >&2
  done
  echo "kernel matrix: SKIP $line: no package of it could be downloaded" >&2
  return 1
}

# Modules the guest loads (with their dependencies, in order): the PCI
# virtio transport, 9p over virtio, and the vsock loopback transport (so
# that AF_VSOCK is live for the vsock vector).
guest_modules="virtio_pci 9pnet_virtio 9p vsock_loopback"

# build_initramfs KDIR OUT [BUSYBOX [INIT2]]: a gzip'd newc cpio with
# BUSYBOX (default /bin/busybox; the guest's architecture), the first init
# stage, the second (the output of the function INIT2, default
# guest_init2) and KDIR's modules, decompressed, with their load order.
build_initramfs() {
  local kdir=$1 out=$2 bb=${3:-/bin/busybox} init2=${4:-guest_init2} tmp moddir builtin m
  tmp=$(mktemp -d)
  mkdir -p "$tmp/bin" "$tmp/modules" "$tmp/ci" "$tmp/proc" "$tmp/sys" "$tmp/dev" "$tmp/newroot"
  cp "$bb" "$tmp/bin/busybox"
  moddir=$(echo "$kdir"/root/lib/modules/*)
  builtin="$moddir/modules.builtin"
  : > "$tmp/modules/order"
  local -A done_mods=()
  _load() { # _load NAME: appends NAME's dependencies, then NAME, once
    local name=${1//-/_} f deps d
    [ -n "${done_mods[$name]:-}" ] && return 0
    done_mods[$name]=1
    if sed 's#.*/##; s#\.ko.*##; s#-#_#g' "$builtin" | grep -qx "$name"; then return 0; fi
    f=$(find "$moddir/kernel" -name "$name.ko*" -o -name "${name//_/-}.ko*" | head -n 1)
    if [ -z "$f" ]; then
      echo "kernel matrix: module $name is neither built in nor in the unpacked package" >&2
      return 1
    fi
    case "$f" in
      *.xz) xz -dc "$f" > "$tmp/modules/$name.ko" ;;
      *.zst) zstd -dc "$f" > "$tmp/modules/$name.ko" ;;
      *) cp "$f" "$tmp/modules/$name.ko" ;;
    esac
    deps=$(tr '\0' '\n' < "$tmp/modules/$name.ko" | sed -n 's/^depends=//p' | head -n 1 | tr ',' ' ')
    for d in $deps; do _load "$d" || return 1; done
    echo "$name.ko" >> "$tmp/modules/order"
  }
  for m in $guest_modules; do _load "$m"; done
  guest_init1 > "$tmp/init"
  "$init2" > "$tmp/ci/init2"
  chmod 755 "$tmp/init" "$tmp/ci/init2"
  (cd "$tmp" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) > "$out"
  rm -rf "$tmp"
}

# guest_init1: PID 1 in the initramfs. Loads the modules, mounts the 9p
# shares under a tmpfs and switches root into it.
guest_init1() {
  cat <<'EOF'
#!/bin/busybox sh
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
if $B grep -q confine.kvmcheck /proc/cmdline; then echo CONFINE-KVM-OK; $B poweroff -f; fi
for m in $($B cat /modules/order); do
  $B insmod /modules/$m || echo "CONFINE-MATRIX: insmod $m failed"
done
$B mount -t tmpfs -o mode=0755 root /newroot
$B mkdir -p /newroot/host /newroot/ci
if ! $B mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=262144 hostroot /newroot/host; then
  echo "CONFINE-MATRIX: FAIL: cannot mount the host's root over 9p"; $B poweroff -f
fi
$B cp /bin/busybox /ci/init2 /newroot/ci/
$B umount /proc /sys
$B umount /dev
exec $B switch_root /newroot /ci/init2
EOF
}

# guest_init2_preamble [DIR...]: the start of every second init stage (the
# kernel matrix's and .ci/arm64.sh's): the shebang, B (the busybox), the
# directories the mounts need and DIRs, and the kernel's file systems: proc,
# sysfs, devtmpfs, devpts, /dev/shm, cgroup2 and securityfs.
guest_init2_preamble() {
  printf '#!/ci/busybox sh\nB=/ci/busybox\n$B mkdir -p /proc /sys /dev /tmp /run%s\n' "${1:+ $*}"
  cat <<'EOF'
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
$B mkdir -p /dev/pts /dev/shm
$B mount -t devpts -o mode=620,ptmxmode=666,gid=5 devpts /dev/pts
$B mount -t tmpfs -o mode=1777 shm /dev/shm
$B mount -t cgroup2 cgroup2 /sys/fs/cgroup
$B mount -t securityfs securityfs /sys/kernel/security
EOF
}

# guest_init2: PID 1 in the tmpfs root. Builds the system the tests see (the
# host's directories read-only, tmpfs where they write), sets the cell's
# namespace policy, runs the test binaries and reports.
guest_init2() {
  guest_init2_preamble
  cat <<'EOF'
cell=$($B sed -n 's/.*confine\.cell=\([^ ]*\).*/\1/p' /proc/cmdline)
say() { echo "CONFINE-MATRIX: [uptime $($B cut -d' ' -f1 /proc/uptime)s] $*"; }
done_() { say "$*"; echo "CONFINE-MATRIX-DONE $cell"; $B sync; $B poweroff -f; }

# cgv2_cell: the cgroup v2 boot's tests (see .ci/kernel-matrix.sh). The
# hierarchy is laid out as systemd lays it out: controllers enabled from
# the root down, root's tests in a service of system.slice, uid 1000's in
# a scope of app.slice inside user@1000.service, which is delegated to it
# (the directory and its cgroup.procs, cgroup.subtree_control and
# cgroup.threads chowned) and below which uid 1000 makes the rest itself.
# Each test binary's log and exit status go to NAME.log and NAME.rc, uid
# 1000's under u1000/; guest.log holds this script's own checks in go
# test's format (the matrix table reads them as tests).
cgv2_cell() {
  G=/sys/fs/cgroup
  mkdir_cg() { $B mkdir -p "$1" && echo "+memory +pids" > "$1/cgroup.subtree_control"; }
  if ! $B grep -qw memory $G/cgroup.controllers; then
    echo "the memory controller is not on the unified hierarchy: $($B cat $G/cgroup.controllers)" > "$out/error"
    done_ "FAIL: no memory controller in cgroup v2"
  fi
  # systemd mounts the hierarchy with nsdelegate.
  $B mount -o remount,nsdelegate $G || say "cannot remount $G with nsdelegate"
  U=$G/user.slice/user-1000.slice/user@1000.service
  if ! { mkdir_cg $G && mkdir_cg $G/system.slice && $B mkdir -p $G/system.slice/ci-root.service &&
         mkdir_cg $G/user.slice && mkdir_cg $G/user.slice/user-1000.slice && $B mkdir -p $U &&
         $B chown 1000:1000 $U $U/cgroup.procs $U/cgroup.subtree_control $U/cgroup.threads; }; then
    echo "cannot lay out the cgroup v2 hierarchy" > "$out/error"; done_ "FAIL: cgroup v2 layout"
  fi
  as1000="/usr/bin/setpriv --reuid 1000 --regid 1000 --clear-groups --inh-caps=-all"
  if ! $as1000 $B sh -c "set -e; echo '+memory +pids' > $U/cgroup.subtree_control; $B mkdir -p $U/app.slice;
       echo '+memory +pids' > $U/app.slice/cgroup.subtree_control; $B mkdir $U/app.slice/ci.scope"; then
    echo "uid 1000 cannot make its cgroups in its delegated user@1000.service" > "$out/error"; done_ "FAIL: delegation"
  fi
  $B mkdir -p "$out/u1000" /home/ci1000 /tmp/runwd /tmp/runwd1000
  $B chown 1000:1000 /home/ci1000 /tmp/runwd1000
  {
    echo "cgroup.controllers: $($B cat $G/cgroup.controllers)"
    echo "mount: $($B grep cgroup /proc/self/mounts)"
    echo "swaps: $($B tail -n +2 /proc/swaps | $B wc -l)"
  } >> "$out/guest-info"
  # tests DIR SCOPE WHO: every test binary, from a subshell that moves itself
  # into SCOPE first (uid 1000's is moved by root: the move needs write
  # access to the common ancestor's cgroup.procs, the root cgroup here).
  tests() {
    local d=$1 scope=$2 who=$3
    say "running the cgroup v2 tests in $scope as $who"
    (
      echo 0 > "$scope/cgroup.procs" || exit 1
      if [ "$who" = uid1000 ]; then
        export HOME=/home/ci1000 GOCACHE=/tmp/gocache1000
        pre=$as1000; wd=/tmp/runwd1000
      else
        pre=; wd=/tmp/runwd
      fi
      $B timeout 1200 $pre "$WORK/escape.test" -test.v -test.count=1 -test.run '^TestEscape$/.*/(memory-bomb.*|fork-.*)$' > "$d/escape.log" 2>&1
      echo $? > "$d/escape.rc"
      $B timeout 900 $pre "$WORK/cli.test" -test.v -test.count=1 -test.run '^TestMemoryBoundsTheTree$' > "$d/cli.log" 2>&1
      echo $? > "$d/cli.rc"
      $B timeout 300 $pre "$WORK/host.test" -test.v -test.count=1 > "$d/host.log" 2>&1
      echo $? > "$d/host.rc"
      $B timeout 300 $pre "$WORK/root.test" -test.v -test.count=1 -test.run '^TestMemoryBoundSparesLauncher$' > "$d/root.log" 2>&1
      echo $? > "$d/root.rc"
      # The command the brief names, as a user types it.
      cd "$wd"
      $B timeout 300 $pre "$WORK/confine" run --json --memory 64MiB -- python3 -c 'b=bytearray(256<<20)' > "$d/run.json" 2> "$d/run.err"
      echo $? > "$d/run.exit"
    )
    # guest.log: what the cell itself demands. A cgroup v2 boot whose runs
    # did not get a memory cgroup proves nothing: it fails here rather
    # than pass on the tests' "not applicable" skips.
    {
      echo "=== RUN   GuestCgroupV2"
      check() { if [ "$2" = ok ]; then echo "    --- PASS: GuestCgroupV2/$1 (0.00s)"; else echo "=== NAME  GuestCgroupV2/$1"; echo "    guest.sh:1: $2"; echo "    --- FAIL: GuestCgroupV2/$1 (0.00s)"; fi; }
      j=$($B cat "$d/run.json" 2>/dev/null | $B tr -d ' \n')
      case "$j" in *'"memory_bound":"memory-cgroup"'*) r=ok ;; *) r="confine run did not use a memory cgroup: exit $($B cat "$d/run.exit"), $($B head -c 300 "$d/run.err") $($B head -c 600 "$d/run.json")" ;; esac
      check run-memory-cgroup "$r"
      case "$j" in *'"oom_killed":true'*) r=ok ;; *) r="oom_killed is not true: $($B head -c 600 "$d/run.json")" ;; esac
      check run-oom-killed "$r"
      peak=$(echo "$j" | $B sed -n 's/.*"peak_memory_bytes":\([0-9]*\).*/\1/p')
      if [ -n "$peak" ] && [ "$peak" -gt 0 ] && [ "$peak" -le $((65 << 20)) ]; then r=ok; else r="peak_memory_bytes ${peak:-missing}, want (0, 65 MiB]"; fi
      check run-peak "$r"
      # The tests that need the memory cgroup must have run, not skipped.
      u=root; [ "$who" = uid1000 ] && u=self
      # uid 0's process bound with a memory cgroup: on v2 the run leaves
      # its pids cgroup for it.
      [ "$u" = root ] && set -- escape:TestEscape/root/fork-race-core || set --
      for t in cli:TestMemoryBoundsTheTree/cgroup root:TestMemoryBoundSparesLauncher \
               escape:TestEscape/$u/memory-bomb-tree escape:TestEscape/$u/memory-bomb-shared "$@"; do
        f=${t%%:*}; n=${t#*:}
        if $B grep -qE "^ *--- PASS: $n " "$d/$f.log"; then r=ok; else r="$n did not pass (skipped?): $($B grep -E -B1 "^ *--- [A-Z]+: $n " "$d/$f.log" | $B tr '\n' ' ' | $B cut -c1-300)"; fi
        check "ran-${n##*/}" "$r"
      done
      left=$($B find $G -name 'confine-*' -type d 2>/dev/null | $B tr '\n' ' ')
      if [ -z "$left" ]; then r=ok; else r="cgroups left behind: $left"; fi
      check no-cgroup-left "$r"
      echo "--- PASS: GuestCgroupV2 (0.00s)"
    } > "$d/guest.log"
    echo 0 > "$d/guest.rc"
  }
  tests "$out" $G/system.slice/ci-root.service root
  tests "$out/u1000" $U/app.slice/ci.scope uid1000
  echo "escape cli host root guest" > "$out/logs"
  echo "escape" > "$out/logs.nobody"
  echo "escape cli host root guest" > "$out/u1000/logs"
}

# The host's root, read-only: every top-level directory but the kernel's
# and the scratch ones; symlinks (merged /usr) as they are.
for e in /host/* /host/.[!.]*; do
  n=${e#/host/}
  case "$n" in proc|sys|dev|tmp|run|host|ci|lost+found|mnt|media|boot|'.[!.]*'|'*') continue ;; esac
  if [ -L "$e" ]; then
    $B ln -s "$($B readlink "$e")" "/$n"
  elif [ -d "$e" ]; then
    $B mkdir -p "/$n" && $B mount --bind "$e" "/$n"
  fi
done
$B mount -t tmpfs -o mode=1777 tmp /tmp
$B mount -t tmpfs -o mode=0755 run /run
[ -d /var/tmp ] && $B mount -t tmpfs -o mode=1777 vartmp /var/tmp
# A writable /home, as on a real system (the suite makes home directories
# there to hide from the command).
[ -d /home ] && $B mount -t tmpfs -o mode=0755 home /home

# The cell's configuration and the writable share, at the host's path.
$B mkdir -p /ci/work
$B mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 work /ci/work || done_ "FAIL: cannot mount the work share"
cfg=/ci/work/cells/$cell/config
[ -f "$cfg" ] || done_ "FAIL: no $cfg"
. "$cfg"
$B mkdir -p "$WORK" "$REPO"
$B mount --bind /ci/work "$WORK"
$B mount --bind "/host$REPO" "$REPO"
out=$WORK/cells/$cell

say "system ready"
$B ip link set lo up
$B hostname confine-ci
echo +pids > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
{
  echo "kernel: $($B uname -r)"
  echo "cmdline: $($B cat /proc/cmdline)"
  echo "lsm: $($B cat /sys/kernel/security/lsm)"
  echo "max_user_namespaces: $($B cat /proc/sys/user/max_user_namespaces)"
  echo "x32/ia32: $($B cat /proc/sys/abi/* 2>/dev/null | $B tr '\n' ' ')"
} > "$out/guest-info"
case ",$($B cat /sys/kernel/security/lsm)," in
  *,landlock,*) ;;
  *) echo "landlock is not in /sys/kernel/security/lsm: $($B cat /sys/kernel/security/lsm)" > "$out/error"
     done_ "FAIL: landlock is not an active LSM in this kernel" ;;
esac
if [ "$NS" = off ]; then
  echo 0 > /proc/sys/user/max_user_namespaces || done_ "FAIL: cannot set user.max_user_namespaces=0"
fi

export PATH="$GOROOT/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
export CONFINE_ESCAPE_PROBE=$WORK/probe
# The standard library's packages compiled on the host (.ci/kernel-matrix.sh).
[ -d "$WORK/gocache-seed" ] && export CONFINE_ESCAPE_GOCACHE_SEED=$WORK/gocache-seed
# A cold `go build` under TCG takes about 4 minutes (the seed above makes
# it a warm one, under a minute): more than the harness's default 3-minute
# limit on one run, and close to the functional tests' --timeout 5m on a
# loaded machine. 10m raises that --timeout to 9m
# (escape/runlimit_test.go): confine's own timeout, which says so, ends a
# run that is too slow, not the harness's SIGKILL.
export CONFINE_TEST_RUN_LIMIT=10m
export HOME=/tmp/home GOCACHE=/tmp/gocache GOMODCACHE GOROOT GOFLAGS=-buildvcs=false GOTOOLCHAIN=local GOPROXY=off LANG=C.UTF-8
$B mkdir -p "$HOME"
cd "$REPO/escape"
if [ -n "${CGV2:-}" ]; then
  cgv2_cell
  $B dmesg > "$out/dmesg" 2>&1
  done_ "finished"
fi
say "running probe.test (foreign ABI)"
$B timeout 300 "$WORK/probe.test" -test.v -test.count=1 -test.run 'TestForeignABI|TestGateMissing' > "$out/probe.log" 2>&1
echo $? > "$out/probe.rc"
if [ -z "${ONLY_FOREIGN_ABI:-}" ]; then
  say "running escape.test"
  set --
  if [ -n "$RUN" ]; then set -- "$@" -test.run "$RUN"; fi
  if [ -n "${SKIP:-}" ]; then set -- "$@" -test.skip "$SKIP"; fi
  $B timeout 2460 "$WORK/escape.test" -test.v -test.count=1 -test.timeout=40m "$@" > "$out/escape.log" 2>&1
  echo $? > "$out/escape.rc"
else
  say "running escape.test (socketcall32 rows only)"
  $B timeout 600 "$WORK/escape.test" -test.v -test.count=1 -test.run 'TestEscape/.*/(socketcall32|x32-syscall)$' > "$out/escape.log" 2>&1
  echo $? > "$out/escape.rc"
fi
# The kernel's log: an OOM kill or a hung task shows here (the console is
# quiet).
$B dmesg > "$out/dmesg" 2>&1
$B free -m > "$out/free" 2>&1
done_ "finished"
EOF
}

# summarize_cell DIR USER KERNEL NS [LABEL]: one table row,
# "KERNEL|LABEL|NS|STATUS|DETAIL|WALL|FAILURES", from DIR's logs (the test
# binaries DIR/logs names, by default probe and escape: NAME.log and
# NAME.rc each; DIR/logs.USER for USER alone). The leaves of the test tree count: a test TestX/USER/...
# belongs to USER; a test without a user component belongs to the uid the
# binary ran as (root, or "self" when it ran unprivileged). LABEL names
# USER in the table (default USER).
summarize_cell() {
  local dir=$1 user=$2 kernel=$3 ns=$4 label=${5:-$2} wall="" status detail fails rc f logs=() bins
  [ -f "$dir/wall" ] && wall="$(cat "$dir/wall")s"
  if [ -f "$dir/error" ]; then
    echo "$kernel|$label|$ns|FAIL|$(head -n 1 "$dir/error")|$wall|"; return
  fi
  bins="probe escape"
  if [ -f "$dir/logs.$user" ]; then bins=$(cat "$dir/logs.$user"); elif [ -f "$dir/logs" ]; then bins=$(cat "$dir/logs"); fi
  for f in $bins; do logs+=("$dir/$f.log"); done
  local stats
  stats=$(cat "${logs[@]}" 2>/dev/null | awk -v U="$user" -f .ci/matrix-summary.awk)
  # stats: "pass skip fail seconds" on line 1, then failing test names, one a line
  read -r np ns_ nf secs <<<"$(echo "$stats" | head -n 1)"
  [ "${secs:-0}" != 0 ] && wall="$wall (${user}'s tests ${secs}s)"
  # Failures are joined with the unit separator (messages hold ';' and '|').
  fails=$(echo "$stats" | tail -n +2 | head -n 12 | paste -sd $'\x1f' -)
  if [ "${nf:-0}" -gt 12 ]; then fails="$fails"$'\x1f'"... and $((nf - 12)) more in $dir/escape.log"; fi
  status=PASS
  for f in $bins; do
    if [ ! -f "$dir/$f.rc" ]; then
      status=FAIL; fails="${fails:+$fails$'\x1f'}$f.test did not run"
    elif rc=$(cat "$dir/$f.rc") && [ "$rc" != 0 ]; then
      status=FAIL
      # A panic (the -test.timeout one included) ends the binary early:
      # always say so, with the tests it was running.
      if grep -q '^panic: ' "$dir/$f.log"; then
        fails="$f.test exit $rc: $(grep -m1 '^panic: ' "$dir/$f.log" | cut -c1-120) while running $(sed -n '/^\s*running tests:/,/^$/p' "$dir/$f.log" | sed -n '2,4p' | tr -s ' \t' ' ' | paste -sd, - | cut -c1-160)${fails:+$'\x1f'$fails}"
      elif [ "${nf:-0}" = 0 ]; then
        fails="${fails:+$fails$'\x1f'}$f.test exit $rc: $(grep -v '^\s*$' "$dir/$f.log" | tail -n 1 | cut -c1-160)"
      fi
    fi
  done
  [ "${nf:-0}" != 0 ] && status=FAIL
  detail="pass ${np:-0}, skip ${ns_:-0}, fail ${nf:-0}"
  echo "$kernel|$label|$ns|$status|$detail|$wall|$fails"
}

# print_matrix TITLE ROW...: the table, then each failing cell's failures.
# Returns 1 if any cell failed.
print_matrix() {
  local title=$1 r bad=0; shift
  echo
  echo "== $title =="
  printf '%-28s %-7s %-5s %-8s %-32s %s\n' kernel uid userns result tests wall
  for r in "$@"; do
    IFS='|' read -r k u n s d w _ <<<"$r"
    printf '%-28s %-7s %-5s %-8s %-32s %s\n' "$k" "$u" "$n" "$s" "$d" "$w"
    [ "$s" = FAIL ] && bad=1
  done
  for r in "$@"; do
    IFS='|' read -r k u n s d w fl <<<"$r"
    [ -n "$fl" ] || continue
    echo "-- failures in $k / $u / userns $n:"
    echo "$fl" | tr '\037' '\n' | sed 's/^/   /'
  done
  return "$bad"
}

# print_refusals DIR...: the distinct reasons confine gave for refusing runs
# in each cell (exit 125: "sandbox unavailable", "launch failed"), with
# their counts: most
# failures of a cell whose kernel lacks a mechanism share one reason.
print_refusals() {
  local d r
  for d in "$@"; do
    r=$(grep -hoE 'confine: (sandbox unavailable|launch failed): [^"]*' "$d"/escape.log "$d"/cli.log 2>/dev/null \
      | sed 's/\\n.*//; s/(exit [0-9]*.*//' | cut -c1-600 | sort | uniq -c | sort -rn | head -n 4 || true)
    [ -n "$r" ] || continue
    echo "-- refusals in ${d##*/} (count, reason):"
    echo "$r" | sed 's/^/   /'
  done
}

# apt_install_no_start PACKAGE...: installs Debian packages; a package's
# postinst (docker.io's) must not start a daemon of its own, so
# policy-rc.d refuses service starts during the install when no policy
# exists already. Returns 1 when the install failed.
apt_install_no_start() {
  local made_policy= ok=1
  if ! [ -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; made_policy=1
  fi
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"; } || ok=
  [ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d
  [ -n "$ok" ]
}

# start_dockerd WHO WORK: starts a dockerd of the caller's own, without
# networking (--iptables=false --bridge=none), its socket, data, exec root,
# pid file and log under WORK; sets docker (the client command for it) and
# dpid, and waits until it answers. The caller traps stop_dockerd on EXIT
# first. When it does not come up: prints "WHO: FAIL" and its log's tail,
# and returns 1.
docker=()
dpid=
start_dockerd() {
  local who=$1 work=$2
  docker=(/usr/bin/docker -H "unix://$work/docker.sock")
  rm -f "$work/docker.sock" "$work/dockerd.pid"
  /usr/sbin/dockerd --iptables=false --ip6tables=false --bridge=none --ip-forward=false --ip-masq=false \
    --storage-driver=vfs --data-root "$work/data" --exec-root "$work/exec" \
    --pidfile "$work/dockerd.pid" -H "unix://$work/docker.sock" > "$work/dockerd.log" 2>&1 &
  dpid=$!
  for _ in $(seq 1 60); do
    "${docker[@]}" info >/dev/null 2>&1 && break
    kill -0 "$dpid" 2>/dev/null || break
    sleep 1
  done
  if ! "${docker[@]}" info >/dev/null 2>&1; then
    echo "$who: FAIL: dockerd did not come up; its log:"
    tail -n 20 "$work/dockerd.log" | sed 's/^/    /'
    return 1
  fi
}

# stop_dockerd: stops start_dockerd's daemon by its pid (SIGTERM, 30 s,
# then SIGKILL), if it runs.
stop_dockerd() {
  if [ -n "$dpid" ] && kill -0 "$dpid" 2>/dev/null; then
    kill "$dpid" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$dpid" 2>/dev/null || break; sleep 1; done
    kill -9 "$dpid" 2>/dev/null || true
  fi
}
