"""The method: workers per (engine, threads), accuracy check first, interleaved timed rounds.

For each model:

1. Every (engine, threads) gets its own long-lived worker process (thread variables set
   before numpy is imported). Workers are started and loaded one after another, so each
   first run (import, session creation / compile / prepare, first inference) is measured on
   an otherwise idle worker set.
2. Each engine's first-run outputs are compared with refmnn's reference outputs (relative
   L2 ``||y - ref|| / ||ref||`` and max abs over all outputs). Beyond ``rel_l2_tolerance`` the
   engine is marked ``differs``; it is still timed. Should the refmnn reference not run the
   model, onnxruntime's outputs are the baseline, and the records say so.
3. Timed rounds: in every round each worker runs the model once, in a fixed order
   (A B C A B C ...), so drift on a shared machine hits all engines alike. The first
   ``warmup`` runs of each worker are discarded. The first warm-up run is a probe, made right
   after loading: an engine whose probe says that ``warmup + repeat`` runs would exceed
   ``max_seconds`` gets fewer runs (one warm-up, at least ``min_repeat`` timed), spread evenly
   over the rounds; the record says so.
"""

from __future__ import annotations

import math
import time
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from refmnn.benchmark import engines as engines_mod
from refmnn.benchmark.engines import ModelSpec
from refmnn.benchmark.models import make_feeds
from refmnn.benchmark.worker import WorkerError, WorkerHandle

BASELINE_ENGINE = "refmnn-reference"
FALLBACK_BASELINE = "onnxruntime"


@dataclass
class Options:
    """Method parameters (the CLI's flags)."""

    threads: Sequence[int] = (1,)
    repeat: int = 20
    warmup: int = 3
    min_repeat: int = 3
    max_seconds: float = 60.0
    """Time budget per (model, engine, threads) for warm-up + timed runs."""
    rel_l2_tolerance: float = 1e-4
    load_timeout: float = 1800.0
    seed: int = 0
    cache_dir: Path = field(default_factory=lambda: Path.home() / ".cache" / "refmnn" / "bench")
    log_dir: Path | None = None


@dataclass
class Job:
    """One (model, engine, threads) in flight."""

    engine: engines_mod.Engine
    threads: int
    status: str = "pending"
    error: str | None = None
    worker: WorkerHandle | None = None
    load: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, Any] = field(default_factory=dict)
    convert_ms: float | None = None
    warmup: int = 0
    pending_warmup: int = 0
    repeat: int = 0
    reduced: str | None = None
    schedule: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    accuracy: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.engine.name}@{self.threads}"


def compare(outputs: Sequence[Any], reference: Sequence[Any]) -> dict[str, Any]:
    """Relative L2 and max abs difference over all outputs (worst output counts)."""
    if len(outputs) != len(reference):
        return {"rel_l2": None, "max_abs": None,
                "note": f"{len(outputs)} outputs vs {len(reference)} in the reference"}
    rel_l2 = 0.0
    max_abs = 0.0
    for got, want in zip(outputs, reference, strict=True):
        got = np.asarray(got)
        want = np.asarray(want)
        if got.size != want.size:
            return {"rel_l2": None, "max_abs": None,
                    "note": f"shape {got.shape} vs {want.shape} in the reference"}
        if got.shape != want.shape:
            got = got.reshape(want.shape)
        a = got.astype(np.float64).ravel()
        b = want.astype(np.float64).ravel()
        diff = a - b
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            same = np.array_equal(a, b, equal_nan=True)
            finite = np.isfinite(a) & np.isfinite(b)
            diff = np.where(finite, diff, 0.0 if same else np.inf)
        norm = float(np.linalg.norm(b))
        err = float(np.linalg.norm(diff))
        rel_l2 = max(rel_l2, err / norm if norm > 0 else (0.0 if err == 0 else math.inf))
        max_abs = max(max_abs, float(np.max(np.abs(diff))) if diff.size else 0.0)
    return {"rel_l2": rel_l2, "max_abs": max_abs}


BLOCK = 4
"""Runs of one engine timed back to back in a round (rounds interleave engines: A B C A B C)."""

SETTLE_SECONDS = 0.2
"""Pause before an engine's block, so the previous engine's spinning threads go idle."""


def _spread(count: int, rounds: int) -> list[int]:
    """``count`` round indices spread evenly over ``range(rounds)`` (an index repeats when
    ``count > rounds``: that round times several runs back to back)."""
    return [math.floor(i * rounds / count) for i in range(count)]


class ModelBench:
    """Benchmarks one model on a list of engines and thread counts."""

    def __init__(self, spec: ModelSpec, engine_names: Sequence[str], options: Options,
                 progress: Callable[[int, str], None] | None = None,
                 grow_total: Callable[[int], None] | None = None) -> None:
        self.spec = spec
        self.options = options
        self.progress = progress or (lambda n, what: None)
        self.grow_total = grow_total or (lambda n: None)
        self.jobs = [Job(engines_mod.get(name), t) for name in engine_names
                     for t in options.threads]
        self.feeds = make_feeds(spec, options.seed)
        self.baseline: dict[str, Any] = {"engine": None, "outputs": None, "note": None}

    # -- steps ------------------------------------------------------------------------------

    def run(self) -> list[Job]:
        try:
            self._check_availability()
            self._convert()
            self._load_all()
            self._check_accuracy()
            self._plan()
            self._timed_rounds()
        finally:
            for job in self.jobs:
                if job.worker is not None:
                    job.worker.close()
                    job.worker = None
        for job in self.jobs:
            if job.status == "running":
                job.status = "ok" if job.accuracy.get("within_tolerance", True) else "differs"
        return self.jobs

    def _check_availability(self) -> None:
        for job in self.jobs:
            missing = job.engine.unavailable(self.spec)
            if missing:
                job.status, job.error = missing

    def _convert(self) -> None:
        done: dict[str, tuple[dict[str, Any], float | None] | str] = {}
        for job in self.jobs:
            if job.status != "pending":
                continue
            name = job.engine.name
            if name not in done:
                try:
                    done[name] = job.engine.convert(self.spec, self.options.cache_dir)
                except Exception as exc:  # noqa: BLE001 - reported in the record
                    done[name] = f"{type(exc).__name__}: {exc}"
            result = done[name]
            if isinstance(result, str):
                job.status, job.error = "failed", result
            else:
                job.artifacts, job.convert_ms = dict(result[0]), result[1]

    def _start(self, engine: str, threads: int) -> WorkerHandle:
        log_dir = self.options.log_dir or (self.options.cache_dir / "logs")
        return WorkerHandle(engine, threads, log_dir / f"{self.spec.name}-{engine}-t{threads}.log")

    def _load_all(self) -> None:
        for job in self.jobs:
            if job.status != "pending":
                self.progress(1, f"{self.spec.name}: {job.key} {job.status}")
                continue
            self.progress(0, f"{self.spec.name}: loading {job.key}")
            job.worker = self._start(job.engine.name, job.threads)
            try:
                job.load = job.worker.request(
                    ("load", job.engine.name, self.spec, job.threads, self.feeds, job.artifacts),
                    timeout=self.options.load_timeout)
                job.status = "running"
            except WorkerError as exc:
                job.status, job.error = "failed", str(exc)
                job.worker.kill()
                job.worker = None
            self.progress(1, f"{self.spec.name}: loaded {job.key}")

    def _baseline_outputs(self) -> None:
        loaded = [j for j in self.jobs if j.status == "running"]
        for job in sorted(loaded, key=lambda j: j.threads):
            if job.engine.name == BASELINE_ENGINE:
                self.baseline = {"engine": BASELINE_ENGINE, "outputs": job.load["outputs"],
                                 "note": None}
                return
        reason = None
        tried = [j for j in self.jobs if j.engine.name == BASELINE_ENGINE]
        if tried:
            reason = f"refmnn reference failed: {tried[0].error}"
        else:  # the reference is not among the benchmarked engines: run it once for its outputs
            worker = self._start(BASELINE_ENGINE, max(self.options.threads))
            try:
                load = worker.request(("load", BASELINE_ENGINE, self.spec,
                                       max(self.options.threads), self.feeds, {}),
                                      timeout=self.options.load_timeout)
                self.baseline = {"engine": BASELINE_ENGINE, "outputs": load["outputs"],
                                 "note": None}
                return
            except WorkerError as exc:
                reason = f"refmnn reference failed: {exc}"
                worker.kill()
            else:
                worker.close()
        for job in sorted(loaded, key=lambda j: j.threads):
            if job.engine.name == FALLBACK_BASELINE:
                self.baseline = {"engine": FALLBACK_BASELINE, "outputs": job.load["outputs"],
                                 "note": reason}
                return
        self.baseline = {"engine": None, "outputs": None,
                         "note": (reason or "") + "; no onnxruntime outputs either"}

    def _check_accuracy(self) -> None:
        self._baseline_outputs()
        reference = self.baseline["outputs"]
        tol = self.options.rel_l2_tolerance
        for job in self.jobs:
            if job.status != "running":
                continue
            result: dict[str, Any] = {"baseline": self.baseline["engine"],
                                      "baseline_note": self.baseline["note"],
                                      "rel_l2_tolerance": tol}
            if reference is None:
                result.update(rel_l2=None, max_abs=None, within_tolerance=None)
            else:
                result.update(compare(job.load["outputs"], reference))
                rel = result["rel_l2"]
                result["within_tolerance"] = rel is not None and rel <= tol
            job.accuracy = result
            job.load.pop("outputs", None)

    def _plan(self) -> None:
        """Probe each engine once (its first warm-up run), then size and spread its runs."""
        opts = self.options
        for job in self.jobs:
            if job.status != "running":
                continue
            try:
                (probe_ms,) = self._time_runs(job)
            except WorkerError:
                continue
            self.progress(1, f"{self.spec.name}: probed {job.key}")
            allowed = int(opts.max_seconds * 1e3 // max(probe_ms, 1e-3))
            if allowed >= opts.warmup + opts.repeat:
                job.warmup, job.repeat = opts.warmup, opts.repeat
            else:
                job.warmup = min(opts.warmup, 1)
                job.repeat = max(opts.min_repeat, min(opts.repeat, allowed - job.warmup))
            if (job.warmup, job.repeat) != (opts.warmup, opts.repeat):
                job.reduced = (f"{job.repeat} timed runs after {job.warmup} warm-up (asked "
                               f"{opts.repeat} after {opts.warmup}): a warm run took "
                               f"{probe_ms:.0f} ms, budget {opts.max_seconds:g} s")
        running = [j for j in self.jobs if j.status == "running"]
        # the probe was the first warm-up run (an extra, discarded one when --warmup is 0)
        for job in running:
            job.pending_warmup = max(job.warmup - 1, 0)
        most = max((j.pending_warmup + j.repeat for j in running), default=0)
        rounds = math.ceil(most / BLOCK)
        for job in running:
            job.schedule = _spread(job.pending_warmup + job.repeat, rounds)
        self.rounds = rounds
        expected = len(self.jobs) * (opts.warmup + opts.repeat)
        self.grow_total(sum(max(j.warmup, 1) + j.repeat for j in running) - expected)

    def _time_runs(self, job: Job, count: int = 1) -> list[float]:
        """``count`` runs back to back on ``job``'s worker, each timed (ms); a failure marks the
        job failed and re-raises."""
        timeout = count * max(120.0, 50 * job.load["first_infer_ms"] / 1e3)
        try:
            return job.worker.request(("time", count), timeout=timeout)  # type: ignore[union-attr]
        except WorkerError as exc:
            job.status, job.error = "failed", f"during timing: {exc}"
            job.worker.kill()  # type: ignore[union-attr]
            job.worker = None
            raise

    def _timed_rounds(self) -> None:
        done = {id(j): 0 for j in self.jobs}
        for index in range(self.rounds):
            for job in self.jobs:
                if job.status != "running" or index not in job.schedule:
                    continue
                # Let the previous engine's worker threads stop spinning before timing this
                # one, so engines do not steal cores from each other (2 threads on 2 cores).
                time.sleep(SETTLE_SECONDS)
                try:
                    block = self._time_runs(job, job.schedule.count(index))
                except WorkerError:
                    self.grow_total(-(job.pending_warmup + job.repeat - done[id(job)]))
                    continue
                for ms in block:
                    if done[id(job)] >= job.pending_warmup:
                        job.times.append(ms)
                    done[id(job)] += 1
                    self.progress(1, f"{self.spec.name} round {index + 1}/{self.rounds}")


def summarize(job: Job) -> dict[str, Any]:
    """Timing statistics of a finished job (empty when it has no timed runs)."""
    if not job.times:
        return {}
    load = job.load
    return {
        "median_ms": statistics.median(job.times),
        "min_ms": min(job.times),
        "max_ms": max(job.times),
        "mean_ms": statistics.fmean(job.times),
        "stdev_ms": statistics.stdev(job.times) if len(job.times) > 1 else 0.0,
        "first_run_ms": load["create_ms"] + load["first_infer_ms"],
    }

