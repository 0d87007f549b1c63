"""``refmnn bench``: refmnn next to the engines its users would pick instead.

::

    refmnn bench resnet18 vit_tiny --threads 1,2 --out bench/results/2026-11-21
    refmnn bench zoo --peers onnxruntime,mnn,onnx-reference,torch
    refmnn bench model.onnx --backends reference --peers onnxruntime --repeat 10
    python -m refmnn.benchmark resnet18

Writes into ``--out``: ``results.jsonl`` (one record per model, engine and thread count),
``results.md`` (the table with the method and machine), ``latency_vs_onnxruntime.png``,
``machine.json`` and the workers' logs under ``logs/``. The method is described in
:mod:`refmnn.benchmark.runner` and in ``bench/README.md`` of the source tree.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from refmnn.benchmark import engines as engines_mod
from refmnn.benchmark import placement
from refmnn.benchmark.placement import CoreProbe
from refmnn.benchmark.runner import PROCESSES, ModelBench, Options, steps_per_job

DESCRIPTION = "Benchmark refmnn backends next to onnxruntime, MNN, onnx.reference and PyTorch."


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}"
                                         ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("thread counts must be positive integers")
    return values


def _name_list(text: str) -> list[str]:
    if text.strip().lower() in ("", "none"):
        return []
    return [v.strip() for v in text.split(",") if v.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``bench`` arguments to ``parser`` (used by the ``refmnn`` console script)."""
    parser.add_argument("models", nargs="+", metavar="MODEL",
                        help="zoo model name, 'zoo' for every zoo model (either with "
                             "@dynamo for torch's dynamo export, e.g. bert6@dynamo), or a path "
                             "to an .onnx file (seeded random inputs of the declared shapes)")
    parser.add_argument("--backends", type=_name_list, default=None,
                        help="refmnn backends, comma-separated (default: every available one: "
                             f"{','.join(engines_mod.refmnn_backends())}; 'none' for none)")
    parser.add_argument("--peers", type=_name_list, default=list(engines_mod.PEERS),
                        help="peer engines, comma-separated, from "
                             f"{','.join(engines_mod.PEERS + engines_mod.OPTIONAL_PEERS)} "
                             f"(default: {','.join(engines_mod.PEERS)}; 'none' for none)")
    parser.add_argument("--threads", type=_int_list, default=[1],
                        help="thread counts, comma-separated (default: 1)")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs (default: 20)")
    parser.add_argument("--warmup", type=int, default=3,
                        help="warm-up runs of each worker process (default: 3)")
    parser.add_argument("--processes", type=int, default=PROCESSES,
                        help="worker processes per engine and thread count; the timed runs are "
                        f"shared out among them (default: {PROCESSES})")
    parser.add_argument("--min-repeat", type=int, default=3,
                        help="fewest timed runs a slow engine gets (default: 3)")
    parser.add_argument("--max-seconds", type=float, default=60.0,
                        help="time budget per (model, engine, threads) for warm-up and timed "
                             "runs; slower engines get fewer runs, at least --min-repeat "
                             "(default: 60)")
    parser.add_argument("--tolerance", type=float, default=1e-4,
                        help="relative L2 beyond which an engine's outputs are marked as "
                             "differing from refmnn's reference (default: 1e-4)")
    parser.add_argument("--seed", type=int, default=0, help="input seed (default: 0)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output directory (default: refmnn-bench/<date-time>)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="zoo exports and MNN conversions (default: ~/.cache/refmnn)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-core-probe", action="store_true",
                        help="do not time a round trip between two CPUs before each block "
                             "(which tells runs taken with the CPUs near from split ones)")
    return parser


def _progress_bar(total: int, enabled: bool) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    if tqdm is None or not enabled:
        class _Null:
            total = 0

            def update(self, n: int = 1) -> None: ...
            def set_postfix_str(self, s: str) -> None: ...
            def refresh(self) -> None: ...
            def close(self) -> None: ...
            def write(self, s: str) -> None:
                print(s, file=sys.stderr)

        bar = _Null()
        bar.total = total
        return bar
    return tqdm(total=total, file=sys.stderr, unit="run", dynamic_ncols=True,
                desc="refmnn bench")


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run the benchmark described by parsed ``args``; returns the exit code."""
    from refmnn.benchmark import ceiling, chart, machine, report
    from refmnn.benchmark.models import resolve

    backends = args.backends if args.backends is not None else list(engines_mod.refmnn_backends())
    known = engines_mod.PEERS + engines_mod.OPTIONAL_PEERS
    unknown = [p for p in args.peers if p not in known]
    if unknown:
        print(f"refmnn bench: unknown peer(s) {unknown}; known: {', '.join(known)}",
              file=sys.stderr)
        return 2
    engine_names = [engines_mod.REFMNN_PREFIX + b for b in backends] + list(args.peers)
    if not engine_names:
        print("refmnn bench: no engines selected", file=sys.stderr)
        return 2
    if args.repeat < 1 or args.warmup < 0 or args.processes < 1:
        print("refmnn bench: --repeat and --processes must be >= 1 and --warmup >= 0",
              file=sys.stderr)
        return 2

    out = args.out or Path("refmnn-bench") / _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    cache = (args.cache_dir or Path.home() / ".cache" / "refmnn")
    options = Options(threads=args.threads, repeat=args.repeat, warmup=args.warmup,
                      min_repeat=min(args.min_repeat, args.repeat), max_seconds=args.max_seconds,
                      rel_l2_tolerance=args.tolerance, seed=args.seed, processes=args.processes,
                      cache_dir=cache / "bench", log_dir=out / "logs")
    info = machine.machine_info(list(args.threads))
    command = "refmnn bench " + shlex.join(list(argv))

    print(f"refmnn bench: resolving {', '.join(args.models)} (zoo export on first use)...",
          file=sys.stderr)
    try:
        specs = resolve(list(args.models), cache / "zoo" if args.cache_dir else None)
    except (ValueError, ImportError) as exc:
        print(f"refmnn bench: {exc}", file=sys.stderr)
        return 2

    print("refmnn bench: timing numpy's float32 GEMM (the ceiling)...", file=sys.stderr)
    ceilings = [ceiling.measure(options.threads, options.log_dir)]

    per_job = steps_per_job(options)
    total = len(specs) * len(engine_names) * len(options.threads) * per_job
    bar = _progress_bar(total, not args.no_progress)

    def progress(n: int, what: str) -> None:
        bar.set_postfix_str(what)
        if n:
            bar.update(n)

    def grow(n: int) -> None:
        bar.total += n
        bar.refresh()

    records: list[dict[str, Any]] = []
    jsonl = out / "results.jsonl"
    jsonl.unlink(missing_ok=True)
    probe, info["core_probe"] = _core_probe(not args.no_core_probe)
    try:
        for spec in specs:
            jobs = ModelBench(spec, engine_names, options, progress, grow, probe).run()
            new = [report.make_record(spec, job, options, info) for job in jobs]
            records.extend(new)
            with open(jsonl, "a") as f:  # partial results survive an interrupted run
                for r in new:
                    f.write(json.dumps(r, default=str) + "\n")
    except KeyboardInterrupt:
        bar.close()
        print(f"refmnn bench: interrupted; {len(records)} records in {jsonl}", file=sys.stderr)
        return 130
    finally:
        if probe is not None:
            probe.close()
    bar.close()

    info["load_average_end"] = machine.load_average()
    ceilings.append(ceiling.measure(options.threads, options.log_dir))
    info["gemm_ceiling"] = {"size": ceiling.GEMM_SIZE, "before": ceilings[0],
                            "after": ceilings[1]}
    report.add_ratios(records)
    report.add_gemm_fractions(records, ceilings)
    if probe is not None:
        info["core_probe"].update(report.add_placement(records) or {})
        if probe.error or "fastest_ns" not in info["core_probe"]:
            info["core_probe"]["error"] = probe.error or "no run was probed"
    report.write_jsonl(records, jsonl)
    (out / "machine.json").write_text(json.dumps(info, indent=2) + "\n")
    png = chart.write_chart(records, out / "latency_vs_onnxruntime.png",
                            title=f"{info['cpu']['model']}, median latency / onnxruntime")
    markdown = report.markdown_report(records, info, options, command,
                                      png.name if png else None)
    (out / "results.md").write_text(markdown)

    print(f"\n{machine.summary_line(info)}")
    print(f"numpy float32 GEMM {ceiling.GEMM_SIZE}^3 before / after the models: "
          f"{ceiling.describe(ceilings, options.threads)}")
    print(f"{options.repeat} timed runs per (engine, threads) over {options.processes} "
          f"worker process(es), {options.warmup} warm-up runs each, interleaved; times in ms; "
          f"accuracy vs refmnn reference (tolerance rel L2 {options.rel_l2_tolerance:g})\n")
    print(report.text_table(records))
    for note in report.notes(records):
        print(f"  * {note}")
    placement_text = report.placement_lines(records, info["core_probe"])
    if placement_text:
        print("\n" + "\n".join(placement_text[2:]).rstrip())
    written = ["results.jsonl", "results.md", "machine.json"] + ([png.name] if png else [])
    print(f"\nwritten to {out}: {', '.join(written)}"
          + ("" if png else " (no chart: matplotlib is not installed)"))
    return 0 if any(r["median_ms"] for r in records) else 1


def _core_probe(wanted: bool) -> tuple[CoreProbe | None, dict[str, Any]]:
    """The run's core probe (None when not wanted or not possible) and machine.json's entry."""
    if not wanted:
        return None, {"unavailable": "--no-core-probe"}
    reason = placement.unavailable()
    if reason:
        return None, {"unavailable": reason}
    try:
        probe = CoreProbe.start()
    except (OSError, RuntimeError) as exc:
        return None, {"unavailable": f"{type(exc).__name__}: {exc}"}
    return probe, {"cpus": list(probe.cpus)}


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``refmnn.benchmark.cli:main(["resnet18", "--threads", "1,2"])``."""
    parser = argparse.ArgumentParser(prog="refmnn bench", description=DESCRIPTION)
    add_arguments(parser)
    args_list = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(args_list)
    return run(args, args_list)


if __name__ == "__main__":
    sys.exit(main())
