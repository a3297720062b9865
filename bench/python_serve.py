#!/usr/bin/env python3
"""The Python client through `confine serve`, against the same client
through the CLI and a bare subprocess of the same command, in one process,
round by round interleaved; bench/run.sh runs it (ONLY=pyserve):

  python3 bench/python_serve.py --confine PATH --server SOCKET --workdir DIR [--bwrap BWRAP] [--json OUT]

- launch latency, one at a time: subprocess.run([CMD]) (bare),
  Client(PATH).run(CMD) (the CLI), Client(PATH, server=SOCKET).run(CMD)
  (the server, default backend: "server"; --backend core: "server_core")
  and, with --bwrap, subprocess.run of bubblewrap's minimal line
  (BWRAP --ro-bind / / --dev /dev --proc /proc --unshare-all CMD: "bwrap");
- runs/s at 8 and at 32 at a time: JOBS runs of each in asyncio (bare and
  bwrap: create_subprocess_exec under a semaphore; the client: run_async
  under Client(max_concurrent=N)).

It prints one JSON object: {"skip": WHY} where the client cannot be
imported, else the samples (milliseconds, runs/s) and failures per path.
"""

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(HERE, "python"))
try:
    import confine  # noqa: E402
except Exception as e:  # any import failure: the row is skipped, with why
    print(json.dumps({"skip": "the Python client (python/confine) does not import: %s" % e}))
    sys.exit(0)

CMD = ["/bin/true"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--confine", required=True, help="the confine binary")
    ap.add_argument("--server", required=True, help="the socket of a running `confine serve`")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--rounds", type=int, default=30, help="interleaved latency rounds")
    ap.add_argument("--jobs", type=int, default=64, help="runs per throughput round")
    ap.add_argument("--reps", type=int, default=2, help="throughput rounds per concurrency")
    ap.add_argument("--bwrap", help="bubblewrap, for its standalone row")
    ap.add_argument("--json", help="write the object here too")
    a = ap.parse_args()
    wd = a.workdir
    clients = {"cli": confine.Client(a.confine, server=False), "server": confine.Client(a.confine, server=a.server)}
    failures = {"bare": 0, "cli": 0, "server": 0, "server_core": 0, "bwrap": 0}
    bwrap = [a.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all"] + CMD \
        if a.bwrap else None
    backend = {"cli": "", "server": "", "server_core": "core"}

    def plain(name, argv):
        def run():
            if subprocess.run(argv, stdin=subprocess.DEVNULL).returncode != 0:
                failures[name] += 1
        return run

    def via(name):
        c = clients["cli" if name == "cli" else "server"]

        def run():
            if c.run(CMD, workdir=wd, backend=backend[name]).exit_code != 0:
                failures[name] += 1
        return run

    seq = {"bare": plain("bare", CMD), "cli": via("cli"), "server": via("server"), "server_core": via("server_core")}
    if bwrap:
        seq["bwrap"] = plain("bwrap", bwrap)
    latency = {k: [] for k in seq}
    for i in range(-3, a.rounds):
        order = list(seq)
        random.shuffle(order)
        for k in order:
            t0 = time.perf_counter()
            seq[k]()
            if i >= 0:
                latency[k].append((time.perf_counter() - t0) * 1e3)

    async def batch(name, par):
        if name in ("bare", "bwrap"):
            sem = asyncio.Semaphore(par)
            argv = CMD if name == "bare" else bwrap

            async def one():
                async with sem:
                    p = await asyncio.create_subprocess_exec(*argv, stdin=subprocess.DEVNULL)
                    if await p.wait() != 0:
                        failures[name] += 1
            await asyncio.gather(*(one() for _ in range(a.jobs)))
            return
        c = confine.Client(a.confine, max_concurrent=par, server=False if name == "cli" else a.server)
        rs = await asyncio.gather(*(c.run_async(CMD, workdir=wd, backend=backend[name]) for _ in range(a.jobs)),
                                  return_exceptions=True)
        failures[name] += sum(1 for r in rs if isinstance(r, BaseException) or r.exit_code != 0)

    rate = {}
    for par in (8, 32):
        rate[str(par)] = {k: [] for k in seq}
        for _ in range(a.reps):
            order = list(seq)
            random.shuffle(order)
            for k in order:
                t0 = time.perf_counter()
                asyncio.run(batch(k, par))
                rate[str(par)][k].append(a.jobs / (time.perf_counter() - t0))
    out = {"latency_ms": latency, "rate": rate, "failures": failures, "rounds": a.rounds, "jobs": a.jobs,
           "reps": a.reps, "python": sys.version.split()[0]}
    s = json.dumps(out)
    if a.json:
        with open(a.json, "w") as f:
            f.write(s)
    print(s)


if __name__ == "__main__":
    main()
