#!/usr/bin/env python3
"""Interleaved A/B launch timing: python3 bench/ab.py ROUNDS name=CMD... (the first is the base).

Each round runs every command once, in a shuffled order; prints the median and
90th percentile wall time, the median's ratio to the first, and the median CPU (user+sys of the child tree
from wait4, which also counts the fork of the child before exec: the same in
every column). docs/performance-launch.md uses it.
"""
import os, sys, time, random, statistics
n=int(sys.argv[1]); cands=[a.split('=',1) for a in sys.argv[2:]]
wall={k:[] for k,_ in cands}; cpu={k:[] for k,_ in cands}
dn=os.open('/dev/null',os.O_RDWR)
def run(argv):
    r0=os.times()
    t0=time.perf_counter()
    pid=os.fork()
    if pid==0:
        os.dup2(dn,1); os.dup2(dn,2)
        try: os.execv(argv[0],argv)
        finally: os._exit(127)
    _,st,ru=os.wait4(pid,0)
    t=time.perf_counter()-t0
    if st!=0: print('fail',argv,st,file=sys.stderr)
    return t*1e3,(ru.ru_utime+ru.ru_stime)*1e3
for i in range(n):
    order=list(cands); random.shuffle(order)
    for k,c in order:
        w,u=run(c.split())
        wall[k].append(w); cpu[k].append(u)
base=statistics.median(wall[cands[0][0]])
for k,_ in cands:
    mw=statistics.median(wall[k]); mc=statistics.median(cpu[k])
    p90=statistics.quantiles(wall[k],n=10)[-1] if len(wall[k])>1 else mw
    print('%-12s wall %7.2f ms (x%.2f, +%.2f)  p90 %7.2f ms  cpu %6.2f ms'%(k,mw,mw/base,mw-base,p90,mc))
print('load',os.getloadavg()[0])
