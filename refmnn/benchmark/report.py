"""Results: one JSON record per (model, engine, threads), a terminal table, a Markdown table.

A record's ``status`` is one of:

``ok``              timed; outputs within the tolerance of the baseline (refmnn reference)
``differs``         timed; outputs beyond the tolerance (``accuracy`` says by how much)
``unchecked``       timed; no baseline outputs to compare with
``failed``          the engine raised or crashed (``error`` says what)
``not-installed``   the engine's Python package is missing
``not-applicable``  e.g. torch eager for an .onnx file that is not a zoo model
"""

from __future__ import annotations

import datetime as _dt
import json
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from refmnn.benchmark.engines import ModelSpec
from refmnn.benchmark.placement import SPLIT_FACTOR, split_threshold
from refmnn.benchmark.runner import FALLBACK_BASELINE, Job, Options, summarize

RECORD_FIELDS = (
    "model", "engine", "threads", "status", "median_ms", "min_ms", "max_ms", "repeat",
    "first_run_ms", "gflops_per_s", "gemm_ceiling_gflops", "fraction_of_gemm_ceiling",
    "ratio_to_onnxruntime", "accuracy", "versions",
)
"""Fields every record has (values may be null); the smoke test checks them."""


def make_record(spec: ModelSpec, job: Job, options: Options, machine: dict[str, Any]
                ) -> dict[str, Any]:
    """The JSON record of one finished job."""
    stats = summarize(job)
    status = job.status
    if status in ("ok", "differs") and job.accuracy.get("within_tolerance") is None:
        status = "unchecked"
    median = stats.get("median_ms")
    gflops = spec.flops / (median * 1e6) if spec.flops and median else None
    return {
        "model": spec.name,
        "model_source": "zoo" if spec.zoo else "file",
        "model_path": spec.path,
        "inputs": [[n, list(s), d] for n, s, d in spec.inputs],
        "flops": spec.flops,
        "flops_source": spec.flops_source,
        "engine": job.engine.name,
        "engine_kind": job.engine.kind,
        "engine_version": job.load.get("version") or job.engine.version(),
        "threads": job.threads,
        "status": status,
        "error": job.error,
        "median_ms": median,
        "min_ms": stats.get("min_ms"),
        "max_ms": stats.get("max_ms"),
        "mean_ms": stats.get("mean_ms"),
        "stdev_ms": stats.get("stdev_ms"),
        "times_ms": [round(t, 4) for t in job.times],
        "core_round_trips_ns": [None if rt is None else round(rt, 1)
                                for rt in job.core_round_trips],
        "placement": None,
        "repeat": len(job.times),
        "warmup": job.warmup,
        "processes": len(job.process_times) or None,
        "process_medians_ms": stats.get("process_medians_ms"),
        "reduced_repeats": job.reduced,
        "first_run_ms": stats.get("first_run_ms", _first_run(job)),
        "import_ms": job.load.get("import_ms"),
        "create_ms": job.load.get("create_ms"),
        "first_infer_ms": job.load.get("first_infer_ms"),
        "convert_ms": job.convert_ms,
        "converted": job.artifacts.get("converted"),
        "gflops_per_s": gflops,
        "gemm_ceiling_gflops": None,
        "fraction_of_gemm_ceiling": None,
        "ratio_to_onnxruntime": None,
        "accuracy": job.accuracy or None,
        "versions": machine["versions"],
        "machine": {"cpu": machine["cpu"]["model"], "arch": machine["cpu"]["arch"],
                    "usable_cores": machine["cpu"]["usable_cores"],
                    "blas": machine["blas"].get("name"), "host": machine["host"]},
        "options": {"repeat": options.repeat, "warmup": options.warmup,
                    "max_seconds": options.max_seconds, "seed": options.seed,
                    "rel_l2_tolerance": options.rel_l2_tolerance},
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def _first_run(job: Job) -> float | None:
    if "create_ms" in job.load and "first_infer_ms" in job.load:
        return job.load["create_ms"] + job.load["first_infer_ms"]
    return None


def add_ratios(records: list[dict[str, Any]]) -> None:
    """Fill ``ratio_to_onnxruntime`` = median / onnxruntime's median (same model, threads)."""
    ort = {(r["model"], r["threads"]): r["median_ms"] for r in records
           if r["engine"] == FALLBACK_BASELINE and r["median_ms"]}
    for r in records:
        base = ort.get((r["model"], r["threads"]))
        if base and r["median_ms"]:
            r["ratio_to_onnxruntime"] = r["median_ms"] / base


def add_gemm_fractions(records: list[dict[str, Any]], samples: Sequence[dict[str, Any]]
                       ) -> None:
    """Fill ``gemm_ceiling_gflops`` (see :mod:`refmnn.benchmark.ceiling`) and
    ``fraction_of_gemm_ceiling`` = effective GFLOP/s / that ceiling, per thread count."""
    from refmnn.benchmark.ceiling import best

    for r in records:
        top = best(samples, r["threads"])
        r["gemm_ceiling_gflops"] = top
        r["fraction_of_gemm_ceiling"] = r["gflops_per_s"] / top \
            if top and r["gflops_per_s"] else None


def add_placement(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Group each record's runs by the core probe taken before their block: ``near`` (a round
    trip within :data:`~refmnn.benchmark.placement.SPLIT_FACTOR` of the run's fastest) or
    ``split``, and fill ``placement`` = {near/split: {median_ms, runs}}. Returns the run's
    summary (fastest and slowest round trip, the threshold, the runs on each side), or None
    when no run was probed."""
    probed = [rt for r in records for rt in r.get("core_round_trips_ns") or () if rt]
    threshold = split_threshold(probed)
    if threshold is None:
        return None
    counts = {"near": 0, "split": 0}
    for r in records:
        groups: dict[str, list[float]] = {"near": [], "split": []}
        for t, rt in zip(r["times_ms"], r.get("core_round_trips_ns") or (), strict=False):
            if rt:
                groups["split" if rt > threshold else "near"].append(t)
        r["placement"] = {side: {"median_ms": statistics.median(ts) if ts else None,
                                 "runs": len(ts)} for side, ts in groups.items()}
        for side, ts in groups.items():
            counts[side] += len(ts)
    return {"fastest_ns": min(probed), "slowest_ns": max(probed), "threshold_ns": threshold,
            "near_runs": counts["near"], "split_runs": counts["split"]}


def placement_lines(records: Sequence[dict[str, Any]], summary: dict[str, Any] | None
                    ) -> list[str]:
    """Markdown lines on the core placement: the probe's figures, and each record's medians
    near and split when both occurred in this run."""
    if summary is None:
        return []
    if "fastest_ns" not in summary:
        why = summary.get("unavailable") or summary.get("error") or "no run was probed"
        return ["## Core placement", "", f"Not probed: {why}.", ""]
    probe = (f"A round trip between two CPUs (`refmnn.benchmark.placement`) was timed before "
             f"each block: {summary['fastest_ns']:.0f} to {summary['slowest_ns']:.0f} ns. ")
    if summary["split_runs"]:
        probe += (f"Above {summary['threshold_ns']:.0f} ns (the fastest times {SPLIT_FACTOR:g}) "
                  f"a run counts as taken with the two CPUs split (e.g. on different L3 "
                  f"caches): {summary['split_runs']} runs split, {summary['near_runs']} near.")
    else:  # the classes are relative to this run's fastest probe
        probe += (f"None above {summary['threshold_ns']:.0f} ns (the fastest times "
                  f"{SPLIT_FACTOR:g}): all {summary['near_runs']} runs in one placement, which "
                  f"the figures themselves tell (on the development VM ~160-260 ns with the "
                  f"CPUs on one L3 cache, ~340-380 ns split).")
    if summary.get("error"):
        probe += (f" The probe failed part-way ({summary['error']}); the runs after that are "
                  f"in neither group.")
    lines = ["## Core placement", "", probe, ""]
    if not summary["split_runs"] or not summary["near_runs"]:
        return lines
    lines += ["| model | engine | thr | median ms | near: median ms (runs) | "
              "split: median ms (runs) |", "|---|---|---:|---:|---:|---:|"]
    for r in records:
        place = r.get("placement")
        if not place:
            continue
        near, split = (f"{_num(place[s]['median_ms'])} ({place[s]['runs']})"
                       for s in ("near", "split"))
        lines.append(f"| {r['model']} | {r['engine']} | {r['threads']} | "
                     f"{_num(r['median_ms'])} | {near} | {split} |")
    return lines + [""]


# -- tables -------------------------------------------------------------------------------

COLUMNS = ("model", "engine", "thr", "median ms", "min ms", "max ms", "runs", "first run ms",
           "GFLOP/s", "% GEMM", "x ORT", "rel L2", "max abs", "status")


def _num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.1f}"
    return f"{value:.{digits}f}"


def _sci(value: float | None) -> str:
    return "-" if value is None else f"{value:.1e}"


def rows(records: Iterable[dict[str, Any]]) -> list[list[str]]:
    out = []
    for r in records:
        acc = r.get("accuracy") or {}
        status = r["status"]
        if r.get("reduced_repeats"):
            status += " (fewer runs)"
        if status in ("failed", "not-installed", "not-applicable") and r.get("error"):
            status += f": {_short(r['error'])}"
        ratio = r.get("ratio_to_onnxruntime")
        out.append([
            r["model"], r["engine"], str(r["threads"]), _num(r["median_ms"]), _num(r["min_ms"]),
            _num(r["max_ms"]), str(r["repeat"]) if r["median_ms"] else "-",
            _num(r["first_run_ms"]), _num(r["gflops_per_s"]),
            "-" if r.get("fraction_of_gemm_ceiling") is None
            else f"{100 * r['fraction_of_gemm_ceiling']:.0f}",
            "-" if ratio is None else f"{ratio:.2f}", _sci(acc.get("rel_l2")),
            _sci(acc.get("max_abs")), status,
        ])
    return out


def _short(text: str, width: int = 70) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def text_table(records: Sequence[dict[str, Any]]) -> str:
    """An aligned plain-text table (numbers right-aligned)."""
    body = rows(records)
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h)
              for i, h in enumerate(COLUMNS)]
    right = set(range(2, len(COLUMNS) - 1))

    def fmt(row: Sequence[str]) -> str:
        cells = [c.rjust(w) if i in right else c.ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        return "  ".join(cells).rstrip()

    lines = [fmt(COLUMNS), "  ".join("-" * w for w in widths)]
    previous = None
    for row, r in zip(body, records, strict=True):
        if previous is not None and r["model"] != previous:
            lines.append("")
        previous = r["model"]
        lines.append(fmt(row))
    return "\n".join(lines)


def markdown_table(records: Sequence[dict[str, Any]]) -> str:
    body = rows(records)
    lines = ["| " + " | ".join(COLUMNS) + " |",
             "|" + "|".join("---" if i < 2 or i == len(COLUMNS) - 1 else "---:" for i in range(len(COLUMNS)))
             + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
    return "\n".join(lines)


def notes(records: Sequence[dict[str, Any]]) -> list[str]:
    """Human-readable notes: baselines, reduced repetitions, accuracy flags, failures."""
    out: list[str] = []
    seen_baseline: set[str] = set()
    for r in records:
        acc = r.get("accuracy") or {}
        if acc.get("baseline_note") and r["model"] not in seen_baseline:
            seen_baseline.add(r["model"])
            out.append(f"{r['model']}: accuracy baseline is {acc.get('baseline')} "
                       f"({_short(acc['baseline_note'], 160)})")
        if r.get("reduced_repeats"):
            out.append(f"{r['model']} / {r['engine']} / {r['threads']} thr: "
                       f"{r['reduced_repeats']}")
        if r["status"] == "differs":
            out.append(f"{r['model']} / {r['engine']} / {r['threads']} thr: outputs differ from "
                       f"{acc.get('baseline')} beyond rel L2 {acc.get('rel_l2_tolerance'):g} "
                       f"(rel L2 {_sci(acc.get('rel_l2'))}, max abs {_sci(acc.get('max_abs'))}"
                       f"{'; ' + acc['note'] if acc.get('note') else ''})")
        if r["status"] in ("failed", "not-installed", "not-applicable"):
            out.append(f"{r['model']} / {r['engine']} / {r['threads']} thr: {r['status']}: "
                       f"{_short(r.get('error') or '', 300)}")
    return out


def process_table(records: Sequence[dict[str, Any]]) -> list[str]:
    """Markdown lines: each record's median per worker process (none for one process)."""
    rows = [r for r in records if len(r.get("process_medians_ms") or ()) > 1]
    if not rows:
        return []
    lines = ["Medians of each worker process (ms; the table pools their runs):", "",
             "| model | engine | thr | per process |", "|---|---|---:|---|"]
    for r in rows:
        each = ", ".join(_num(m) for m in r["process_medians_ms"])
        lines.append(f"| {r['model']} | {r['engine']} | {r['threads']} | {each} |")
    return lines + [""]


def markdown_report(records: Sequence[dict[str, Any]], machine: dict[str, Any],
                    options: Options, command: str, chart: str | None) -> str:
    from refmnn.benchmark.ceiling import describe
    from refmnn.benchmark.machine import summary_line

    gemm = machine.get("gemm_ceiling") or {}

    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items() if v)
    missing = ", ".join(k for k, v in machine["versions"].items() if v is None)
    lines = [
        "# refmnn benchmark",
        "",
        f"- Command: `{command}`",
        f"- Date: {machine['timestamp']}",
        f"- Machine: {summary_line(machine)}",
        f"- Versions: {versions}" + (f" (not installed: {missing})" if missing else ""),
        f"- Thread counts: {', '.join(map(str, options.threads))}; per (engine, threads): "
        f"{options.processes} worker process(es), {options.warmup} warm-up runs each, "
        f"{options.repeat} timed runs shared out among them in interleaved rounds, "
        f"budget {options.max_seconds:g} s (slow engines get fewer runs, noted below)",
        f"- Load average at start / end: {machine.get('load_average_start')} / "
        f"{machine.get('load_average_end')}",
        f"- Accuracy: relative L2 and max abs vs refmnn's reference outputs; tolerance rel L2 "
        f"{options.rel_l2_tolerance:g}",
        "- Latencies in ms (median, min, max of the timed runs); first run = session creation "
        "+ first inference; x ORT = median / onnxruntime median at the same thread count; "
        "GFLOP/s = model FLOPs / median; % GEMM = that rate / numpy's float32 GEMM rate at the "
        "same thread count, measured in this run (below)",
        f"- numpy float32 GEMM {gemm.get('size')}^3 (the ceiling), before / after the models: "
        f"{describe([gemm.get('before', {}), gemm.get('after', {})], options.threads)}",
        "",
        markdown_table(records),
        "",
    ]
    lines += process_table(records)
    lines += placement_lines(records, machine.get("core_probe"))
    extra = notes(records)
    if extra:
        lines += ["## Notes", ""] + [f"- {n}" for n in extra] + [""]
    if chart:
        lines += [f"![latency relative to onnxruntime]({chart})", ""]
    return "\n".join(lines)


def write_jsonl(records: Iterable[dict[str, Any]], path: Path) -> None:
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=False, default=str) + "\n")
