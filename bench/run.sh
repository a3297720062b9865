#!/usr/bin/env bash
# Benchmarks of confine against the unsandboxed baseline, measured in one run
# on this machine. Prints a Markdown table and writes bench/results.json.
#
#   bash bench/run.sh            # all
#   RUNS=50 bash bench/run.sh    # fewer launch runs
#
# Figures are ratios or differences against the bare command in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
RUNS="${RUNS:-200}"

if ! command -v hyperfine >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine
  else
    echo "bench: needs hyperfine (apt-get install hyperfine)" >&2; exit 1
  fi
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
go build -o "$out/confine" ./cmd/confine
# The start-up cost of any Go program: the floor for a Go launcher.
mkdir -p "$out/empty" && printf 'package main\nfunc main() {}\n' > "$out/empty/main.go"
(cd "$out/empty" && CGO_ENABLED=0 go mod init empty >/dev/null 2>&1 && CGO_ENABLED=0 go build -o "$out/emptygo" .)
wd="$out/wd" && mkdir -p "$wd" && cd "$wd"

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' '.join(str(r['median']) for r in d['results']))" "$1"; }

# 1. Launch: /bin/true bare, an empty static Go program, confine run --
#    /bin/true with the backend it selects here (landlock+namespaces where
#    user namespaces work) and with the core alone.
hyperfine -N -w 20 -r "$RUNS" --export-json "$out/launch.json" \
  /bin/true "$out/emptygo" "$out/confine run -- /bin/true" "$out/confine run --backend core -- /bin/true" >/dev/null 2>&1
read -r t_true t_go t_confine t_core < <(json "$out/launch.json")
backend=$("$out/confine" run --json -- /bin/true 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["backend"])')

# 2. Capture throughput: 1 GiB to stdout, bare into /dev/null vs captured.
hyperfine -w 1 -r 5 --export-json "$out/flood.json" \
  "head -c 1073741824 /dev/zero | cat > /dev/null" \
  "$out/confine run --json --output-limit 1MiB -- head -c 1073741824 /dev/zero > /dev/null" >/dev/null 2>&1
read -r f_bare f_confine < <(json "$out/flood.json")
rss=$( { /usr/bin/time -f '%M' "$out/confine" run --json --output-limit 1MiB -- head -c 1073741824 /dev/zero >/dev/null; } 2>&1 | tail -1)

# 3. Kill: deadline to the last descendant gone, 200-process tree with setsid.
tree='i=0; while [ $i -lt 200 ]; do if [ $((i % 3)) -eq 0 ]; then setsid sleep 300 & else sleep 300 & fi; i=$((i+1)); done; wait'
hyperfine -w 1 -r 5 -i --export-json "$out/kill.json" \
  "$out/confine run --timeout 2s --kill-grace 1s -- sh -c '$tree'" >/dev/null 2>&1
read -r k_total < <(json "$out/kill.json")

python3 - "$backend" "$t_true" "$t_go" "$t_confine" "$t_core" "$f_bare" "$f_confine" "$rss" "$k_total" <<'EOF' | tee "$OLDPWD/bench/results.md"
import json, sys, datetime, os
backend = sys.argv[1]
t_true, t_go, t_conf, t_core, f_bare, f_conf, rss, k = map(float, sys.argv[2:])
ms = lambda s: s * 1000
res = {
  "date": datetime.date.today().isoformat(),
  "launch_true_ms": ms(t_true), "launch_empty_go_ms": ms(t_go), "launch_confine_ms": ms(t_conf),
  "launch_overhead_ms": ms(t_conf - t_true), "overhead_vs_go_start": (t_conf - t_true) / t_go,
  "launch_backend": backend, "launch_confine_core_ms": ms(t_core),
  "flood_bare_gibps": 1 / f_bare, "flood_confine_gibps": 1 / f_conf, "flood_ratio": f_bare / f_conf,
  "flood_launcher_peak_rss_kib": rss, "kill_deadline_to_gone_ms": ms(k - 2.0),
}
json.dump(res, open(os.path.join(os.environ["OLDPWD"], "bench", "results.json"), "w"), indent=2)
print(f"Benchmarks, {res['date']} ({os.uname().release}, {os.cpu_count()} cores); medians\n")
print("| measure | bare | confine | ratio / difference |")
print("|---|---|---|---|")
print(f"| launch `/bin/true` ({backend}) | {ms(t_true):.2f} ms | {ms(t_conf):.2f} ms | +{ms(t_conf-t_true):.2f} ms |")
print(f"| launch `/bin/true` (--backend core) | {ms(t_true):.2f} ms | {ms(t_core):.2f} ms | +{ms(t_core-t_true):.2f} ms |")
print(f"| launch overhead vs empty Go program start ({ms(t_go):.2f} ms) | | | {res['overhead_vs_go_start']:.2f}x |")
print(f"| 1 GiB to stdout | {1/f_bare:.2f} GiB/s | {1/f_conf:.2f} GiB/s | {f_bare/f_conf:.2f}x |")
print(f"| launcher peak RSS during the flood | | {rss/1024:.1f} MiB | |")
print(f"| 200-process tree: deadline to last descendant gone (grace 1 s) | | {ms(k-2.0):.0f} ms | |")
EOF
