"""How far apart two of the machine's cores are, probed before every timed block.

A virtual machine's vCPUs run where the hypervisor puts them, and it may move them while a
benchmark runs. On the 2-vCPU AMD EPYC VM where the committed results are made, the two vCPUs
are sometimes on cores that share an L3 cache and sometimes on cores of different L3 domains
(CCDs): a cache line then takes ~340 ns to go there and back instead of ~50 ns (a C ping-pong
between threads pinned to the two CPUs, once a second: split 5-8 % of the seconds in each of
three stretches of 4-6 minutes; half an hour later, by the Python probe below, 90 % of five
minutes). Vectorised two-threaded work slows down while they are split -- a GEMM's output half
written by the other thread is read through the far cache, small GEMMs wait on cross-core
synchronisation -- and interpreted Python hardly does. ViT-Tiny on refmnn's reference in one
process, ms per run near / split: 32.3 / 45 in all; its weight GEMMs 14.0 / 18.5, attention
GEMMs 3.7 / 6.9, Adds 3.5 / 4.9, but Erf (single-threaded, in L2-sized blocks) 8.1 / 8.4;
numpy's 1024^3 GEMM 205 / 170 GFLOP/s. So a median that pools both placements depends on how
long each lasted, and more for some engines than for others.

:class:`CoreProbe` measures that round trip from Python: two helper processes, each pinned to
one CPU, pass a byte back and forth through shared memory (``min`` over five batches of 500
round trips, ~1 ms in all). The interpreter's loop adds its own time, so the figures are
~160-260 ns near and ~340-380 ns split on that VM (the C figures above: 50 and 340 ns).
:func:`split_threshold` places the line at ``SPLIT_FACTOR`` times the fastest probe of the
run; a run spent entirely in one placement has a single group, so the report also gives the
round-trip figures themselves.

The helpers wait on a pipe between probes (no spinning), and the probe runs after the runner's
settling pause, right before an engine's block. Linux only (CPU affinity); with fewer than two
usable CPUs there is nothing to probe.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from multiprocessing import shared_memory
from typing import Any

BATCHES = 5
ROUND_TRIPS = 500
TIMEOUT_SECONDS = 10.0
SPLIT_FACTOR = 1.8
"""A probe slower than this factor times the run's fastest counts as split. On the VM above,
one probe a second for 5 minutes next to the C ping-pong: near 162-264 ns (95 % below 257; two
single seconds at 384 and 412), split 342-377 ns; the line fell at 292 ns."""

_GO, _STOP = 1, 2  # the shared byte: 1 = ping sent (0 = answered), 2 = stop answering


def unavailable() -> str | None:
    """Why the probe cannot run here, or None."""
    if not sys.platform.startswith("linux") or not hasattr(os, "sched_setaffinity"):
        return "CPU affinity is Linux-only"
    if len(os.sched_getaffinity(0)) < 2:
        return "fewer than two usable CPUs"
    return None


def _request(conn: Any) -> bool:
    """The parent's next request: True to probe, False (or a closed pipe) to end."""
    try:
        return bool(conn.recv())
    except (EOFError, OSError):
        return False


def _helper(name: str, cpu: int, conn: Any, work: Callable[[memoryview], Any]) -> None:
    """A helper process: pinned to ``cpu``, Ctrl-C left to the parent (which stops the
    helpers), the shared byte attached; on each request, ``work(flag)``'s result is the reply.
    Ends when told to or when the parent's end of the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.sched_setaffinity(0, {cpu})
    memory = shared_memory.SharedMemory(name=name)
    flag = memory.buf
    try:
        while _request(conn):
            conn.send(work(flag))
    except OSError:  # the parent is gone
        pass
    finally:
        del flag
        memory.close()


def _answer(flag: memoryview) -> bool:
    """The answering side's work: answer pings until told to stop."""
    while True:
        state = flag[0]
        if state == _GO:
            flag[0] = 0
        elif state == _STOP:
            return True


def _ask(flag: memoryview) -> float:
    """The asking side's work: time the round trips, stop the answering side, and return the
    fastest batch's mean (ns per round trip)."""
    clock = time.perf_counter_ns
    best = float("inf")
    for _ in range(BATCHES):
        start = clock()
        for _ in range(ROUND_TRIPS):
            flag[0] = _GO
            while flag[0]:
                pass
        best = min(best, (clock() - start) / ROUND_TRIPS)
    flag[0] = _STOP
    return best


class CoreProbe:
    """Round trips of a cache line between two CPUs (the first two usable ones), on demand.

    ``with CoreProbe.start() as probe: probe.measure()`` -> ns per round trip, or None once
    the probe has failed (a helper died or did not answer in ``TIMEOUT_SECONDS``; ``error``
    says which), after which it stays closed.
    """

    def __init__(self, cpus: tuple[int, int], memory: shared_memory.SharedMemory,
                 helpers: list[Any], conns: list[Any]) -> None:
        self.cpus = cpus
        self.error: str | None = None
        self._memory = memory
        self._helpers = helpers
        self._conns = conns  # [asking side, answering side]

    @classmethod
    def start(cls) -> CoreProbe:
        reason = unavailable()
        if reason:
            raise RuntimeError(f"core probe: {reason}")
        first, second = sorted(os.sched_getaffinity(0))[:2]
        memory = shared_memory.SharedMemory(create=True, size=64)
        memory.buf[0] = 0
        context = multiprocessing.get_context("spawn")  # no fork of a threaded parent
        helpers, conns = [], []
        for work, cpu in ((_ask, first), (_answer, second)):
            mine, theirs = context.Pipe()
            process = context.Process(target=_helper, args=(memory.name, cpu, theirs, work),
                                      daemon=True, name=f"refmnn-core-probe-{cpu}")
            process.start()
            theirs.close()
            helpers.append(process)
            conns.append(mine)
        return cls((first, second), memory, helpers, conns)

    def measure(self) -> float | None:
        """ns per round trip (the fastest of ``BATCHES`` batches), or None (see ``error``)."""
        if self.error is not None or not self._helpers:
            return None
        ask, answer = self._conns
        try:
            self._memory.buf[0] = 0
            answer.send(True)
            ask.send(True)
            if not ask.poll(TIMEOUT_SECONDS) or not answer.poll(TIMEOUT_SECONDS):
                raise TimeoutError(f"no answer in {TIMEOUT_SECONDS:g} s")
            result = float(ask.recv())
            answer.recv()
            return result
        except (OSError, EOFError, TimeoutError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self.close()
            return None

    def close(self) -> None:
        """Stop the helpers and free the shared memory (idempotent)."""
        for conn in self._conns:
            try:
                conn.send(False)
            except (OSError, EOFError):
                pass
        for process in self._helpers:
            process.join(timeout=2.0)
            if process.is_alive():
                process.kill()
                process.join()
        for conn in self._conns:
            conn.close()
        self._helpers, self._conns = [], []
        if self._memory is not None:
            self._memory.close()
            self._memory.unlink()
            self._memory = None  # type: ignore[assignment]

    def __enter__(self) -> CoreProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def split_threshold(round_trips: list[float]) -> float | None:
    """The round trip above which a probe counts as split: ``SPLIT_FACTOR`` times the
    fastest of the run's probes (None without any)."""
    return SPLIT_FACTOR * min(round_trips) if round_trips else None
