"""The method: workers per (engine, threads), accuracy check first, interleaved timed rounds.

For each model:

1. Every (engine, threads) gets ``processes`` long-lived worker processes (thread variables set
   before numpy is imported). Workers are started and loaded one after another, so each
   first run (import, session creation / compile / prepare, first inference) is measured on
   an otherwise idle worker set; the record's first run is the first worker's.
2. Each engine's first-run outputs (every worker's) are compared with refmnn's reference
   outputs (relative L2 ``||y - ref|| / ||ref||`` and max abs over all outputs, the worst
   worker counts). Beyond ``rel_l2_tolerance`` the engine is marked ``differs``; it is still
   timed. Should the refmnn reference not run the model, onnxruntime's outputs are the
   baseline, and the records say so.
3. Warm-up: each worker's first ``warmup`` runs (at least one), untimed, right after the
   accuracy check; the first worker's first run is a probe: an engine whose probe says that
   ``processes * warmup + repeat`` runs would exceed ``max_seconds`` gets fewer runs (one
   warm-up per worker, at least ``min_repeat`` timed), spread evenly over the rounds; the
   record says so.
4. Timed rounds: in every round each (engine, threads) runs a block of up to ``BLOCK`` runs on
   one of its workers, in a fixed order (A B C A B C ...), so drift on a shared machine hits
   all engines alike; its blocks go to its workers in turn, and its median is over the runs
   of all of them (``PROCESSES`` says why). Before each block, after a settling pause, the
   core probe (when the machine allows one) times a round trip between two CPUs, so that each
   run is known to have been taken with the vCPUs near or split
   (:mod:`refmnn.benchmark.placement`).
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
from refmnn.benchmark.placement import CoreProbe
from refmnn.benchmark.worker import WorkerError, WorkerHandle

BASELINE_ENGINE = "refmnn-reference"
FALLBACK_BASELINE = "onnxruntime"


BLOCK = 4
"""Runs of one engine timed back to back in a round (rounds interleave engines: A B C A B C)."""

SETTLE_SECONDS = 0.2
"""Pause before an engine's block, so the previous engine's spinning threads go idle."""

PROCESSES = 3
"""Default worker processes per (engine, threads). On the shared 2-core VM where the committed
runs are made, how fast a process runs is partly fixed when it starts: one numba 1x1
convolution (24 -> 144 channels at 56 x 56, in a three-node model) ran at a median of 230 to
640 us per call depending on the process (in 14 processes), steadily within each (one
process's 20-run stretches over 1500 runs: 209-269 us), with address randomisation off and
every buffer on huge pages alike -- and MobileNetV2 in six processes, each timing numba and
onnxruntime alternately, took 10.4-14.2 ms (numba) and 8.5-11.0 ms (onnxruntime), ratios
1.10-1.28. With one worker per engine, each median was a single draw of that; pooled over
three workers, it spans three draws (as pyperf spreads its runs over many processes), for
every engine alike."""


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
    processes: int = PROCESSES
    """Worker processes per (engine, threads); the timed runs are shared out among them."""
    cache_dir: Path = field(default_factory=lambda: Path.home() / ".cache" / "refmnn" / "bench")
    log_dir: Path | None = None

    @property
    def process_count(self) -> int:
        """The worker processes each (engine, threads) starts: ``processes``, at least one."""
        return max(1, self.processes)


@dataclass
class Job:
    """One (model, engine, threads) in flight."""

    engine: engines_mod.Engine
    threads: int
    status: str = "pending"
    error: str | None = None
    workers: list[WorkerHandle] = field(default_factory=list)
    load: dict[str, Any] = field(default_factory=dict)
    """The first worker's load reply (its first run, import time, version)."""
    outputs: list[Any] = field(default_factory=list)
    """Each worker's first-run outputs, until the accuracy check has used them."""
    artifacts: dict[str, Any] = field(default_factory=dict)
    convert_ms: float | None = None
    warmup: int = 0
    repeat: int = 0
    reduced: str | None = None
    schedule: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    process_times: list[list[float]] = field(default_factory=list)
    """The timed runs of each worker (``times`` holds them all, in the order they ran)."""
    core_round_trips: list[float | None] = field(default_factory=list)
    """Per timed run (as ``times``): the core probe's round trip (ns) before its block, None
    without a probe (:mod:`refmnn.benchmark.placement`)."""
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


def _spread(count: int, rounds: int) -> list[int]:
    """``count`` round indices spread evenly over ``range(rounds)`` (an index repeats when
    ``count > rounds``: that round times several runs back to back)."""
    return [math.floor(i * rounds / count) for i in range(count)]


class ModelBench:
    """Benchmarks one model on a list of engines and thread counts."""

    def __init__(self, spec: ModelSpec, engine_names: Sequence[str], options: Options,
                 progress: Callable[[int, str], None] | None = None,
                 grow_total: Callable[[int], None] | None = None,
                 probe: CoreProbe | None = None) -> None:
        self.spec = spec
        self.probe = probe
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
                for worker in job.workers:
                    worker.close()
                job.workers = []
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

    def _start(self, engine: str, threads: int, index: int = 0) -> WorkerHandle:
        log_dir = self.options.log_dir or (self.options.cache_dir / "logs")
        name = f"{self.spec.name}-{engine}-t{threads}" + (f"-p{index}" if index else "")
        return WorkerHandle(engine, threads, log_dir / f"{name}.log")

    def _load_all(self) -> None:
        processes = self.options.process_count
        for job in self.jobs:
            if job.status != "pending":
                self.progress(processes, f"{self.spec.name}: {job.key} {job.status}")
                continue
            job.status = "running"
            for index in range(processes):
                self.progress(0, f"{self.spec.name}: loading {job.key} ({index + 1}/{processes})")
                worker = self._start(job.engine.name, job.threads, index)
                job.workers.append(worker)
                try:
                    load = worker.request(("load", job.engine.name, self.spec, job.threads,
                                           self.feeds, job.artifacts),
                                          timeout=self.options.load_timeout)
                except WorkerError as exc:
                    self._fail(job, f"worker {index + 1} of {processes}: {exc}" if index
                               else str(exc))
                    self.progress(processes - index, f"{self.spec.name}: {job.key} failed")
                    break
                job.outputs.append(load.pop("outputs", None))
                if index == 0:
                    job.load = load
                self.progress(1, f"{self.spec.name}: loaded {job.key}")
            job.process_times = [[] for _ in job.workers]

    def _fail(self, job: Job, error: str) -> None:
        """Mark ``job`` failed and kill its workers."""
        job.status, job.error = "failed", error
        for worker in job.workers:
            worker.kill()
        job.workers = []

    def _baseline_outputs(self) -> None:
        loaded = [j for j in self.jobs if j.status == "running"]
        for job in sorted(loaded, key=lambda j: j.threads):
            if job.engine.name == BASELINE_ENGINE:
                self.baseline = {"engine": BASELINE_ENGINE, "outputs": job.outputs[0],
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
                self.baseline = {"engine": FALLBACK_BASELINE, "outputs": job.outputs[0],
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
            else:  # every worker's outputs; the worst counts
                checks = [compare(outputs, reference) for outputs in job.outputs]
                failed = [c for c in checks if c["rel_l2"] is None]
                result.update(failed[0] if failed else max(
                    checks, key=lambda c: (c["rel_l2"], c["max_abs"])))
                rel = result["rel_l2"]
                result["within_tolerance"] = rel is not None and rel <= tol
            job.accuracy = result
        for job in self.jobs:
            job.outputs = []

    def _plan(self) -> None:
        """Probe each engine once (its first worker's first warm-up run), size its runs, run
        every worker's warm-ups, and spread the timed runs over the rounds."""
        opts = self.options
        for job in self.jobs:
            if job.status != "running":
                continue
            try:
                (probe_ms,) = self._time_runs(job, 0)
            except WorkerError:
                continue
            self.progress(1, f"{self.spec.name}: probed {job.key}")
            workers = len(job.workers)
            allowed = int(opts.max_seconds * 1e3 // max(probe_ms, 1e-3))
            if allowed >= workers * max(opts.warmup, 1) + opts.repeat:
                job.warmup, job.repeat = opts.warmup, opts.repeat
            else:
                job.warmup = min(opts.warmup, 1)
                job.repeat = max(opts.min_repeat, min(opts.repeat, allowed - workers))
            if (job.warmup, job.repeat) != (opts.warmup, opts.repeat):
                job.reduced = (f"{job.repeat} timed runs after {job.warmup} warm-up per worker "
                               f"(asked {opts.repeat} after {opts.warmup}): a warm run took "
                               f"{probe_ms:.0f} ms, budget {opts.max_seconds:g} s")
            # the probe was worker 0's first warm-up run (an extra one when --warmup is 0)
            for index in range(workers):
                count = max(job.warmup, 1) - (index == 0)
                if count:
                    try:
                        self._time_runs(job, index, count)
                    except WorkerError:
                        break
                    self.progress(count, f"{self.spec.name}: warmed up {job.key}")
        running = [j for j in self.jobs if j.status == "running"]
        most = max((j.repeat for j in running), default=0)
        # at least a block per worker, where there are runs enough
        rounds = max(math.ceil(most / BLOCK), min(most, opts.process_count))
        for job in running:
            job.schedule = _spread(job.repeat, rounds)
        self.rounds = rounds
        expected = len(self.jobs) * (steps_per_job(opts) - opts.process_count)
        self.grow_total(sum(len(j.workers) * max(j.warmup, 1) + j.repeat for j in running)
                        - expected)

    def _time_runs(self, job: Job, index: int, count: int = 1) -> list[float]:
        """``count`` runs back to back on ``job``'s worker ``index``, each timed (ms); a
        failure marks the job failed and re-raises."""
        timeout = count * max(120.0, 50 * job.load["first_infer_ms"] / 1e3)
        try:
            return job.workers[index].request(("time", count), timeout=timeout)
        except WorkerError as exc:
            self._fail(job, f"during timing (worker {index + 1} of {len(job.workers)}): {exc}")
            raise

    def _timed_rounds(self) -> None:
        blocks = {id(j): 0 for j in self.jobs}  # each job's blocks go to its workers in turn
        for index in range(self.rounds):
            for job in self.jobs:
                if job.status != "running" or index not in job.schedule:
                    continue
                # Let the previous engine's worker threads stop spinning before timing this
                # one, so engines do not steal cores from each other (2 threads on 2 cores).
                time.sleep(SETTLE_SECONDS)
                round_trip = self.probe.measure() if self.probe else None
                worker = blocks[id(job)] % len(job.workers)
                blocks[id(job)] += 1
                try:
                    block = self._time_runs(job, worker, job.schedule.count(index))
                except WorkerError:
                    self.grow_total(-(job.repeat - len(job.times)))
                    continue
                job.times.extend(block)
                job.core_round_trips.extend([round_trip] * len(block))
                job.process_times[worker].extend(block)
                self.progress(len(block), f"{self.spec.name} round {index + 1}/{self.rounds}")


def steps_per_job(options: Options) -> int:
    """Progress steps of one (model, engine, threads) as planned: a load per worker, each
    worker's warm-up runs (the probe among them; at least one) and the timed runs."""
    processes = options.process_count
    return processes + processes * max(options.warmup, 1) + options.repeat


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
        "process_medians_ms": [statistics.median(t) if t else None for t in job.process_times],
    }

