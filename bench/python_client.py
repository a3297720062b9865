#!/usr/bin/env python3
"""The Python client's overhead against the same runs through the CLI, in
one process, round by round interleaved, medians and ratios:

  python3 bench/python_client.py [--confine PATH] [--rounds N]

- sequential: `confine run --json -- CMD` started with subprocess.run and
  its JSON parsed (the CLI baseline), against confine.run(CMD);
- async, 8 at a time: 8 CLI runs started with asyncio subprocesses
  (gather), against 8 confine.run_async(CMD) under Client(max_concurrent=8).

Targets (issue 13): the client adds at most 10% to a run's wall time, and
at most 20% in async mode with 8 concurrent runs. CMD is /bin/true (the
launch alone, where the client's share is largest) and `sleep 0.05`.
"""

import argparse
import asyncio
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import confine  # noqa: E402

CONCURRENT = 8


def cli_argv(binary, wd, cmd):
    return [binary, "run", "--json", "--workdir", wd, "--", *cmd]


def cli_once(binary, wd, cmd):
    p = subprocess.run(cli_argv(binary, wd, cmd), stdin=subprocess.DEVNULL, capture_output=True)
    d = json.loads(p.stdout)
    assert d["exit_code"] == 0, p.stderr


async def cli_batch(binary, wd, cmd):
    async def one():
        p = await asyncio.create_subprocess_exec(*cli_argv(binary, wd, cmd), stdin=subprocess.DEVNULL,
                                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = await p.communicate()
        assert json.loads(out)["exit_code"] == 0, err
    await asyncio.gather(*(one() for _ in range(CONCURRENT)))


async def client_batch(client, wd, cmd):
    rs = await asyncio.gather(*(client.run_async(cmd, workdir=wd) for _ in range(CONCURRENT)))
    assert all(r.exit_code == 0 for r in rs)


def self_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--confine", default=shutil.which("confine"), help="the confine binary (default: on PATH)")
    ap.add_argument("--rounds", type=int, default=60, help="interleaved rounds per measure")
    ap.add_argument("--json", help="also write the rows to this file")
    a = ap.parse_args()
    if not a.confine:
        sys.exit("no confine binary: pass --confine")
    binary = os.path.abspath(a.confine)
    client = confine.Client(binary, max_concurrent=CONCURRENT)
    client.binary  # the version check, once, outside the timing
    rows = []
    with tempfile.TemporaryDirectory() as wd:
        for label, cmd in (("true", ["true"]), ("sleep 0.05", ["sleep", "0.05"])):
            sync = {
                "cli": lambda: cli_once(binary, wd, cmd),
                "client": lambda: client.run(cmd, workdir=wd),
            }
            asy = {
                "cli": lambda: asyncio.run(cli_batch(binary, wd, cmd)),
                "client": lambda: asyncio.run(client_batch(client, wd, cmd)),
            }
            for mode, fns, target in (("sequential", sync, 1.10), ("async x%d" % CONCURRENT, asy, 1.20)):
                times = {k: [] for k in fns}
                cpus = {k: [] for k in fns}
                for k in fns:  # warm up
                    fns[k]()
                for _ in range(a.rounds):
                    order = list(fns)
                    random.shuffle(order)
                    for k in order:
                        c0, t0 = self_cpu(), time.perf_counter()
                        fns[k]()
                        times[k].append(time.perf_counter() - t0)
                        cpus[k].append(self_cpu() - c0)
                med = {k: statistics.median(v) for k, v in times.items()}
                ratio = med["client"] / med["cli"]
                # This process's own CPU per run (children excluded): what
                # the client itself costs, free of the machine's noise.
                cpu = {k: statistics.mean(v) for k, v in cpus.items()}
                rows.append({"workload": label, "mode": mode, "cli_ms": med["cli"] * 1e3,
                             "client_ms": med["client"] * 1e3, "ratio": ratio, "target": target,
                             "met": ratio <= target, "rounds": a.rounds,
                             "cli_self_cpu_ms": cpu["cli"] * 1e3, "client_self_cpu_ms": cpu["client"] * 1e3})
    print("| workload | mode | CLI (median) | client (median) | client/CLI | target | met | Python CPU per batch, CLI / client |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| `%s` | %s | %.2f ms | %.2f ms | %.3fx | <= %.2fx | %s | %.2f / %.2f ms |" % (
            r["workload"], r["mode"], r["cli_ms"], r["client_ms"], r["ratio"], r["target"],
            "yes" if r["met"] else "no", r["cli_self_cpu_ms"], r["client_self_cpu_ms"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
