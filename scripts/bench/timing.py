"""Timing commands in processes of their own: wall seconds and the CPU seconds the
processes spent (user and system), which other load on a shared machine moves less."""

from __future__ import annotations

import os
import subprocess
import time


def child_seconds(*commands: list[str], env: dict[str, str] | None = None,
                  together: bool = False) -> tuple[float, float]:
    """Run the commands one after the other (or all at once), output discarded; (wall,
    CPU) seconds of all of them. A command that fails stops the benchmark."""
    before = os.times()
    start = time.perf_counter()
    if together:
        procs = [subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL) for c in commands]
        codes = [p.wait() for p in procs]
    else:
        codes = [subprocess.run(c, env=env, stdout=subprocess.DEVNULL).returncode for c in commands]
    wall = time.perf_counter() - start
    after = os.times()
    if any(codes):
        raise SystemExit(f"a timed command failed: exit statuses {codes}")
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def child_usage(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Run one command, output discarded: (wall s, CPU s, peak MB) of it alone (and of the
    processes it waited for), where a benchmark's later children must not inherit an
    earlier child's peak (as `resource.RUSAGE_CHILDREN` would give)."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"a timed command failed: exit status {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024
