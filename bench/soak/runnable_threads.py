#!/usr/bin/env python3
"""Mean number of runnable threads per (process, thread name, nice), sampled.

  python3 bench/soak/runnable_threads.py PID [PID ...] SECONDS

Reads /proc/<pid>/task/*/stat every 10 ms for SECONDS and prints, for each
thread kind, how many of its threads were in state R (running or waiting for
a CPU) on average. docs/reliability.md ("Hostile mix") used it during a
hostile phase of bench/soak/hostile_mix.sh: maskd's threads are named
(service/this_thread.h), so the kinds read maskd-step, maskd-fastlane, ...
"""
import collections
import os
import sys
import time


def sample(pids, counts):
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue  # the thread exited
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
            if fields[0] == "R":
                counts[(pid, name, fields[16])] += 1


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    pids, seconds = sys.argv[1:-1], float(sys.argv[-1])
    counts = collections.Counter()
    samples = 0
    end = time.time() + seconds
    while time.time() < end:
        sample(pids, counts)
        samples += 1
        time.sleep(0.01)
    print("samples", samples)
    for (pid, name, nice), n in counts.most_common():
        print(f"{pid} {name:18s} nice {nice:3s} runnable {n / samples:.2f}")


if __name__ == "__main__":
    main()
