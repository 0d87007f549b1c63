"""The machine's float32 GEMM ceiling, measured in the same run as the models.

A model's effective GFLOP/s (model FLOPs / median latency) means little on its own: on a shared
2-core VM the attainable rate moves with the host's load. So ``refmnn bench`` times numpy's
float32 GEMM (``size x size x size``, default 1024, 2.1 GFLOP) in a worker process at each
thread count, with the same thread variables as the engines' workers, once before the models
and once after them. The report quotes both samples and divides every engine's effective
GFLOP/s by the higher one (the better sample is the closer estimate of what the cores can do:
load only ever slows a sample down), giving the ``% GEMM`` column.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from refmnn.benchmark.worker import WorkerError, WorkerHandle

GEMM_SIZE = 1024
GEMM_RUNS = 15


def measure(threads: Sequence[int], log_dir: Path, size: int = GEMM_SIZE,
            runs: int = GEMM_RUNS) -> dict[str, Any]:
    """{threads: {"gflops": median GFLOP/s, "median_ms": ..., "error": ...}} for each count."""
    flops = 2.0 * size ** 3
    out: dict[str, Any] = {}
    for t in threads:
        worker = WorkerHandle("numpy-gemm", t, log_dir / f"gemm-ceiling-t{t}.log")
        try:
            times = worker.request(("gemm", size, runs), timeout=600)
            median = statistics.median(times)
            out[str(t)] = {"gflops": flops / (median * 1e6), "median_ms": median,
                           "size": size, "runs": runs}
        except WorkerError as exc:
            out[str(t)] = {"gflops": None, "error": str(exc)}
        finally:
            worker.close()
    return out


def best(samples: Sequence[dict[str, Any]], threads: int) -> float | None:
    """The higher GFLOP/s of the samples at ``threads`` (None when none succeeded)."""
    values = [s[str(threads)]["gflops"] for s in samples
              if str(threads) in s and s[str(threads)].get("gflops")]
    return max(values) if values else None


def describe(samples: Sequence[dict[str, Any]], threads: Sequence[int]) -> str:
    """'1 thread 98.2 / 101.5 GFLOP/s, 2 threads ...' (before / after the models)."""
    parts = []
    for t in threads:
        values = [s.get(str(t), {}).get("gflops") for s in samples]
        text = " / ".join("failed" if v is None else f"{v:.1f}" for v in values)
        parts.append(f"{t} thread{'s' if t > 1 else ''} {text} GFLOP/s")
    return ", ".join(parts)
