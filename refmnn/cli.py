"""The ``refmnn`` command line: run, info, explain, backends, compare, demo, bench.

This is the only module that reads the environment or prints for the user. Every refmnn error
is printed as one ``error:`` line (plus its notes) with exit status 2; nothing prints a traceback
unless ``--traceback`` is given.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from refmnn.errors import RefmnnError, UsageError


def _parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    name, _, dims = text.partition("=")
    if not name or not dims:
        raise UsageError(f"--shape expects NAME=D1,D2,...; got {text!r}")
    try:
        shape = tuple(int(d) for d in dims.split(",") if d.strip())
    except ValueError:
        raise UsageError(f"--shape {text!r}: dims must be integers") from None
    if any(d < 0 for d in shape):
        raise UsageError(f"--shape {text!r}: dims must be >= 0")
    return name, shape


def _parse_input(text: str) -> tuple[str, Path]:
    name, _, path = text.partition("=")
    if not name or not path:
        raise UsageError(f"--input expects NAME=FILE.npy; got {text!r}")
    return name, Path(path)


def _check_fits(name: str, dtype: str, shape: tuple[int, ...]) -> None:
    """A ResourceError, before drawing, for an input whose draw (float64, 8 bytes an element)
    would not fit in the machine's memory (``--shape input=1,3,100000,100000`` used to end in
    NumPy's MemoryError after a long wait, or the OS killing the process)."""
    from refmnn.errors import ResourceError
    from refmnn.runtime.executor import physical_memory
    from refmnn.schedule.memory import format_bytes

    need = 8 * math.prod(shape)
    memory = physical_memory()
    if memory is not None and need > memory:
        raise ResourceError(f"input {name!r}: random {dtype}{list(shape)} needs "
                            f"{format_bytes(need)} to draw, the machine has "
                            f"{format_bytes(memory)}; give smaller --shape dims")


def random_feeds(inputs: Sequence[Any], shapes: dict[str, tuple[int, ...]], seed: int) -> dict[str, np.ndarray]:
    """Seeded random arrays for the given declared inputs, shapes from the model or --shape.

    Floats are standard normal, integers uniform in [0, 10), booleans fair coins. A symbolic
    dim without a --shape is an error that names it.
    """
    from refmnn.graph import TensorType

    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for value in inputs:
        kind = value.type
        if not isinstance(kind, TensorType) or kind.dtype is None:
            raise UsageError(f"input {value.name!r} is not a tensor of known type; give it with --input")
        shape = shapes.get(value.name)
        if shape is None:
            if kind.shape is None:
                raise UsageError(f"input {value.name!r} has unknown rank; give --shape {value.name}=...")
            symbolic = [d for d in kind.shape if not isinstance(d, int)]
            if symbolic:
                raise UsageError(f"input {value.name!r} has symbolic dim(s) {symbolic} "
                                 f"(declared {kind}); give --shape {value.name}=D1,D2,...")
            shape = tuple(int(d) for d in kind.shape)  # type: ignore[arg-type]
        dtype = kind.dtype.numpy
        _check_fits(value.name, kind.dtype.name, shape)
        if kind.dtype.is_float:
            feeds[value.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[value.name] = rng.integers(0, 2, shape).astype(np.bool_)
        elif kind.dtype.is_integer:
            feeds[value.name] = rng.integers(0, 10, shape).astype(dtype)
        else:
            raise UsageError(f"input {value.name!r}: cannot make random {kind.dtype.name} data; "
                             "give it with --input")
    return feeds


def summarize(name: str, value: Any) -> str:
    """One line describing an output: dtype, shape and a few statistics."""
    if isinstance(value, list):
        return f"{name}: sequence of {len(value)} tensors"
    if value is None:
        return f"{name}: empty optional"
    array = np.asarray(value)
    head = f"{name}: {array.dtype}{list(array.shape)}"
    if array.size == 0 or array.dtype == object:
        return head
    numeric = array.astype(np.float64)
    finite = numeric[np.isfinite(numeric)]
    stats = (f" min {finite.min():.6g} max {finite.max():.6g} mean {finite.mean():.6g}"
             if finite.size else " (no finite values)")
    if array.dtype.kind in "fc" or array.ndim > 0:
        flat = array.reshape(-1)[:5]
        stats += f" first {np.array2string(flat, precision=5, separator=', ')}"
    return head + stats


def cmd_run(args: argparse.Namespace) -> int:
    from refmnn.session import Session

    session = Session(args.model, backends=(args.backend,))
    shapes = dict(_parse_shape(s) for s in args.shape)
    given = dict(_parse_input(s) for s in args.input)
    unknown = sorted((set(given) | set(shapes)) - {v.name for v in session.inputs})
    if unknown:
        raise UsageError(f"unknown input name(s) {unknown}; the model's inputs are "
                         f"{[v.name for v in session.inputs]}")
    out = _output_dir(args.output_dir) if args.output_dir else None  # before the run's work
    feeds = load_or_make_feeds(session.inputs, shapes, given, args.seed)
    outputs = session.run(feeds)
    for name, value in outputs.items():
        print(summarize(name, value))
    if out is not None:
        for name, value in outputs.items():
            try:
                np.save(out / f"{_safe(name)}.npy", np.asarray(value))
            except OSError as exc:
                raise UsageError(f"--output-dir {out}: cannot write {name!r}: {exc}") from None
        print(f"saved {len(outputs)} output(s) to {out}")
    return 0


def _output_dir(text: str) -> Path:
    """The --output-dir folder, made if needed (a UsageError when it cannot be)."""
    out = Path(text)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--output-dir {text}: cannot create it: {exc}") from None
    if not os.access(out, os.W_OK):
        raise UsageError(f"--output-dir {text}: not writable")
    return out


def load_or_make_feeds(inputs: Sequence[Any], shapes: dict[str, tuple[int, ...]],
                       given: dict[str, Path], seed: int) -> dict[str, Any]:
    """Feeds read from the given .npy files, seeded random arrays for the other inputs."""
    feeds: dict[str, Any] = {}
    for name, path in given.items():
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--input {name}={path}: cannot read a .npy file: {exc}") from exc
    feeds.update(random_feeds([v for v in inputs if v.name not in feeds], shapes, seed))
    return feeds


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name) or "output"


def cmd_info(args: argparse.Namespace) -> int:
    from refmnn.converter import load
    from refmnn.ops import default_registry

    registry = default_registry()
    graph = load(args.model, registry)
    print(f"model: {args.model}")
    print(f"ir_version: {graph.ir_version}")
    print("opsets: " + ", ".join(f"{d or 'ai.onnx'}={v}" for d, v in sorted(graph.opsets.items())))
    print("inputs:")
    for value in graph.inputs:
        print(f"  {value.name}: {value.type}")
    for value in graph.defaults:
        print(f"  {value.name}: {value.type} (optional: an initializer is its default)")
    print("outputs:")
    for value in graph.outputs:
        print(f"  {value.name}: {value.type}")
    params = sum(int(a.size) for a in graph.initializers.values())
    print(f"parameters: {params:,} in {len(graph.initializers)} initializers")
    histogram = Counter(node.op if not node.domain else f"{node.domain}::{node.op}"
                        for _, node in graph.walk())
    print(f"nodes: {sum(histogram.values())}")
    for op_name, count in sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {op_name:32s} {count}")
    missing = sorted({(node.domain, node.op, owner.opset_of(node)) for owner, node in graph.walk()
                      if registry.find(node.domain, node.op, owner.opset_of(node)) is None})
    if missing:
        print("unsupported ops:")
        for domain, op_name, opset in missing:
            print(f"  {domain or 'ai.onnx'}::{op_name} (opset {opset})")
    else:
        print("unsupported ops: none")
    return 0


def cmd_backends(args: argparse.Namespace) -> int:
    from refmnn.backends.registry import BackendRegistry

    registry = BackendRegistry(blocked=_blocked(args))
    rows = [("name", "version", "distribution", "status")]
    for info in registry:
        status = "available" if info.available else f"unavailable: {info.reason}"
        if info.available and info.devices:
            status += f" (devices: {'; '.join(info.devices)})"
        rows.append((info.name, info.version or "-", info.distribution or "-", status))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3])
    return 0


def _blocked(args: argparse.Namespace) -> list[str]:
    import os

    names = [n for n in os.environ.get("REFMNN_DISABLE_BACKENDS", "").split(",") if n]
    return names + list(getattr(args, "disable_backend", []) or [])


def cmd_explain(args: argparse.Namespace) -> int:
    from refmnn.backends.registry import BackendRegistry
    from refmnn.session import Session

    backends = [b for b in args.backends.split(",") if b] if args.backends else ["reference"]
    session = Session(args.model, backends=backends,
                      backend_registry=BackendRegistry(blocked=_blocked(args)))
    shapes = dict(_parse_shape(s) for s in args.shape)
    plan = session.resize(shapes)
    if args.json:
        print(plan.to_json())
    else:
        print(plan.table())
    if args.plot:
        from refmnn.schedule.explain import plot_memory

        plot_memory(plan, args.plot)
        print(f"memory plot written to {args.plot}", file=sys.stderr)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from refmnn.backends.registry import BackendRegistry
    from refmnn.compare import run_command

    return run_command(args, BackendRegistry(blocked=_blocked(args)))


def cmd_demo(args: argparse.Namespace) -> int:
    from refmnn.demo import run_demo

    return run_demo(args.model, cache_dir=args.cache_dir, seed=args.seed)


PASSTHROUGH = {
    "bench": ("refmnn.benchmark.cli", "benchmark refmnn against peer engines (see bench/README.md)"),
    "conformance": ("refmnn_conformance.cli", "run the conformance suite against a backend"),
}
"""Subcommands with their own argument parsers: everything after the name is handed over."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="refmnn", description=__doc__.splitlines()[0])
    parser.add_argument("--traceback", action="store_true", help="show Python tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a model on seeded random or given inputs")
    run.add_argument("model")
    run.add_argument("--backend", default="reference", help="preferred backend (reference is the fallback)")
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    run.add_argument("--shape", action="append", default=[], metavar="NAME=D1,D2,...")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--output-dir")
    run.set_defaults(func=cmd_run)

    info = sub.add_parser("info", help="inputs, outputs, opsets, op histogram, parameters")
    info.add_argument("model")
    info.set_defaults(func=cmd_info)

    backends = sub.add_parser("backends", help="list installed backends and whether they run here")
    backends.add_argument("--disable-backend", action="append", default=[], metavar="NAME")
    backends.set_defaults(func=cmd_backends)

    explain = sub.add_parser("explain", help="show the plan: placement, schemes, memory")
    explain.add_argument("model")
    explain.add_argument("--backends", default="reference", help="preference order, comma separated")
    explain.add_argument("--shape", action="append", default=[], metavar="NAME=D1,D2,...")
    explain.add_argument("--json", action="store_true", help="deterministic JSON instead of a table")
    explain.add_argument("--plot", metavar="FILE.png", help="save a picture of the memory plan")
    explain.add_argument("--disable-backend", action="append", default=[], metavar="NAME")
    explain.set_defaults(func=cmd_explain)

    compare = sub.add_parser("compare", help="run two backends, find the first node where they diverge")
    compare.add_argument("model")
    compare.add_argument("--backends", required=True, metavar="A,B",
                         help="two backends to compare (one with --golden or --save-golden)")
    compare.add_argument("--atol", type=float, default=1e-5,
                         help="absolute term, times max(1, largest |value|) of each value "
                              "(default 1e-5)")
    compare.add_argument("--rtol", type=float, default=1e-4, help="relative term (default 1e-4)")
    compare.add_argument("--absolute", action="store_true",
                         help="take --atol as it is, not scaled by each value's magnitude")
    compare.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    compare.add_argument("--shape", action="append", default=[], metavar="NAME=D1,D2,...")
    compare.add_argument("--seed", type=int, default=None, help="seed of the random inputs (default 0)")
    compare.add_argument("--save-golden", metavar="DIR", help="save A's inputs and values as a golden set")
    compare.add_argument("--golden", metavar="DIR", help="compare against a saved golden set instead of A")
    compare.add_argument("--json", action="store_true", help="deterministic JSON instead of a table")
    compare.add_argument("--disable-backend", action="append", default=[], metavar="NAME")
    compare.set_defaults(func=cmd_compare)

    demo = sub.add_parser("demo", help="export a zoo model, run it on every backend, compare")
    demo.add_argument("model", nargs="?", default="resnet18",
                      help="a zoo model (NAME@dynamo: as torch's default exporter writes it) "
                           "or an .onnx file (default: resnet18)")
    demo.add_argument("--cache-dir")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=cmd_demo)

    for name, (_, text) in PASSTHROUGH.items():
        sub.add_parser(name, help=text + f"; `refmnn {name} --help` for its options", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit status: 0, 2 for a refmnn error, 130 when interrupted, 141
    when the reader of the output went away (``refmnn info m.onnx | head``): the command stops
    there quietly, as Unix tools do, instead of a BrokenPipeError traceback."""
    try:
        status = _dispatch(argv)
        sys.stdout.flush()  # here, so that a closed pipe is met inside the handler below
        return status
    except BrokenPipeError:
        # stdout onto /dev/null: the interpreter flushes it again at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13  # what a shell reports for a tool ended by SIGPIPE


def _dispatch(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in PASSTHROUGH:
        import importlib

        module = importlib.import_module(PASSTHROUGH[argv[0]][0])
        try:
            return int(module.main(argv[1:]))
        except RefmnnError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except RefmnnError as exc:
        if args.traceback:
            raise
        print(f"error: {exc}", file=sys.stderr)
        for note in getattr(exc, "__notes__", []):
            print(f"  {note}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
