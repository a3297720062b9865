#!/usr/bin/env bash
# Benchmarks of confine against the bare command and against bubblewrap with
# equivalent confinement, side by side in one run on this machine:
#
#   bash bench/run.sh
#
# Run it from a clone as root (or with hyperfine and bubblewrap already
# installed): it installs the Debian packages hyperfine and bubblewrap when
# they are missing, builds confine and the benchmark programs under
# bench/cmd/ from this tree, runs every measure in a scratch directory under
# $TMPDIR (default /tmp) that it removes afterwards, prints the Markdown
# table and writes bench/results.json and bench/results.md. About 8
# minutes on 2 cores, half of it the build measure.
#
# Each measure runs bare, under `confine run` (the backend it selects here,
# or CONFINE_FLAGS) and under `bwrap`, round by round in a shuffled order
# (interleaved), and reports medians and ratios to bare. bwrap gets what
# confine grants by default: --unshare-all --die-with-parent --new-session,
# the system roots and the non-secret /etc entries read-only (the list
# confine itself uses), --proc /proc, --dev /dev, --tmpfs /tmp, the workdir
# read-write. If bwrap cannot create its namespaces here, its column says
# so; no figure is invented. Where wall time is at the mercy of other load,
# a CPU-time row follows; a verdict whose runs spread more than twice the
# target's margin is marked "noisy".
#
# Knobs (environment variables, defaults in brackets):
#   ONLY=launch,hyperfine,library,faults,syscalls,spawn,files,guard,build,warmcache,warmtools,flood,kill,concurrency,egress,serve,pyserve
#                          run only these measures [all]
#   CONFINE_FLAGS          extra flags for every confine run, e.g. "--backend core" []
#   CONFINE_TAGS           build tags for confine, e.g. confine_simabi []
#   CONFINE_SIM_LANDLOCK_ABI  with CONFINE_TAGS=confine_simabi: the Landlock ABI confine sees []
#   RUNS [200] WARMUP [10] launch rounds of /bin/true, empty Go program, confine, bwrap
#   LAUNCH_BACKENDS [core,namespaces]  other confine backends launched in the same rounds
#   HF_RUNS [100]          hyperfine cross-check runs per command (sequential)
#   LIB_BENCHTIME [100x] LIB_COUNT [5]          go test -bench of RunCommand vs os/exec
#   FAULT_RUNS [30]        page faults per /bin/true launch (whole tree, wait4 rusage; perf stat cross-check
#                          where perf works): bare, the CLI per backend, through `confine serve`, the library, bwrap
#   SYSCALL_N [1000000] SYSCALL_REPS [5]        calls per run, runs
#   SPAWN_N [1000] SPAWN_REPS [7]               fork+exec of /bin/true in one sh
#   FILES_N [20000] FILES_SIZE [512] FILES_REPS [5]  (also files_git and files_git_ns: the same under --backend core and namespaces
#                          in a work tree without and with .git, the persistence guard's cost on file creation)
#   GUARD_REPS [3] GUARD_TRAPPED_N [5000] GUARD_FILES_N [20000] GUARD_ROWS [trapped,files,npm,pip,gobuild]
#                          the persistence guard's cost under --backend core,
#                          guarded/unguarded (a work tree with / without .git), interleaved: added us per trapped call,
#                          20k files, npm install --offline of local tarballs, python3 -m venv + pip install of a local
#                          wheel, go build with a fresh GOCACHE (bench/cmd/benchdriver/guard.go)
#   BUILD_TARGET [cmd/go] BUILD_RUNS [3]        go build -a TARGET, fresh GOCACHE in the workdir
#   CACHE_RUNS [3]         spf13/cobra go test -count=1 ./...: bare warm vs confine --profile go warm (and one cold);
#                          fetches cobra's own test dependencies from the Go module proxy once;
#                          warmtools: cargo rebuild and offline npm ci, bare vs --profile rust|node, as many runs
#   FLOOD_BYTES [1073741824] FLOOD_REPS [5] FLOOD_PIPE [1048576]  bare/bwrap pipe size (0: default)
#   KILL_PROCS [200] KILL_T [2s] KILL_GRACE [100ms] KILL_REPS [5]
#   CONC_JOBS [64] CONC_PAR [16] CONC_SLEEP [0.05] CONC_REPS [3]
#   EGRESS_BYTES [1073741824] EGRESS_REPS [3] EGRESS_CONNS [256]  network allowlist: proxy vs direct HTTPS
#   EGRESS_LINK_RATES [1gbit,200mbit] EGRESS_LINK_SECS [3]  the same download over a veth pair shaped by tbf
#                          between two network namespaces the bench makes (root; skipped with the reason otherwise)
#   SERVE_RUNS [100] SERVE_JOBS [128] SERVE_REPS [3] SERVE_FLAGS []  /bin/true through the CLI, `confine serve`
#                          (CLI --server and a warm client), the library in-process, bwrap and bare; runs/s at 8 and 32
#   PY_ROUNDS [30] PY_JOBS [64] PY_REPS [2]  the Python client (bench/python_serve.py) through `confine serve` (default
#                          backend and --backend core), through the CLI, bwrap's minimal line and a bare subprocess: launch
#                          latency, runs/s at 8 and 32 (skipped, saying why, without python3)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
export PATH="/usr/local/go/bin:$PATH"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
start=$SECONDS
start_epoch=$(date +%s.%N)

if ! command -v go >/dev/null 2>&1; then
  echo "bench: needs the Go toolchain (go) on PATH" >&2; exit 1
fi
for t in sh setsid cat sleep true; do
  command -v "$t" >/dev/null 2>&1 || { echo "bench: needs $t" >&2; exit 1; }
done
need=()
command -v hyperfine >/dev/null 2>&1 || need+=(hyperfine)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "bench: missing Debian packages: ${need[*]} (as root: apt-get install ${need[*]})" >&2; exit 1
  fi
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/confine-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
echo "bench: building into $tmp" >&2
# As the README builds it: static, no libc to load at every start.
CGO_ENABLED=0 go build ${CONFINE_TAGS:+-tags "$CONFINE_TAGS"} -o "$tmp/confine" ./cmd/confine
CGO_ENABLED=0 go build -o "$tmp/benchpayload" ./bench/cmd/benchpayload
CGO_ENABLED=0 go build -o "$tmp/emptygo" ./bench/cmd/emptygo
go build -o "$tmp/benchdriver" ./bench/cmd/benchdriver

# The command line as run, with the knobs that were set.
cmdline="bash bench/run.sh"
for k in ONLY CONFINE_FLAGS CONFINE_TAGS CONFINE_SIM_LANDLOCK_ABI RUNS WARMUP LAUNCH_BACKENDS HF_RUNS LIB_BENCHTIME LIB_COUNT SYSCALL_N SYSCALL_REPS \
         SPAWN_N SPAWN_REPS FILES_N FILES_SIZE FILES_REPS GUARD_REPS GUARD_TRAPPED_N GUARD_FILES_N BUILD_TARGET BUILD_RUNS FLOOD_BYTES FLOOD_REPS FLOOD_PIPE \
         KILL_PROCS KILL_T KILL_GRACE KILL_REPS CONC_JOBS CONC_PAR CONC_SLEEP CONC_REPS EGRESS_BYTES EGRESS_REPS EGRESS_CONNS EGRESS_LINK_RATES EGRESS_LINK_SECS CACHE_RUNS FAULT_RUNS SERVE_RUNS SERVE_JOBS SERVE_REPS SERVE_FLAGS PY_ROUNDS PY_JOBS PY_REPS; do
  if [ -n "${!k:-}" ]; then cmdline="$k='${!k}' $cmdline"; fi
done

"$tmp/benchdriver" -tmp "$tmp" -repo "$repo" -out "$repo/bench" -cmdline "$cmdline" -since "$start_epoch" \
  -confine "$tmp/confine" -payload "$tmp/benchpayload" -emptygo "$tmp/emptygo" \
  -bwrap "$(command -v bwrap || true)"
echo "bench: wrote bench/results.json and bench/results.md in $((SECONDS - start)) s" >&2
