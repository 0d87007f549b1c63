"""Command line for the model zoo.

Usage::

    python -m refmnn.zoo list
    python -m refmnn.zoo export --all --out DIR
    python -m refmnn.zoo export resnet18 bert6 --out DIR
    python -m refmnn.zoo export bert6 --exporter dynamo --out DIR

``export`` writes ``DIR/<name>.onnx`` (through the export cache, see
:func:`refmnn.zoo.export_onnx`; a dynamo export's weights go to ``DIR/<name>.onnx.data``) and
prints name, parameters, GMACs and ONNX file size (weights file included).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from refmnn import zoo


def _parser() -> argparse.ArgumentParser:
    """Build the argument parser."""
    parser = argparse.ArgumentParser(prog="python -m refmnn.zoo", description="refmnn model zoo")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list zoo models")
    exp = sub.add_parser("export", help="export models to ONNX (batch 1)")
    exp.add_argument(
        "models", nargs="*", metavar="NAME", help=f"models to export ({', '.join(zoo.names())})"
    )
    exp.add_argument("--all", action="store_true", help="export every zoo model")
    exp.add_argument("--out", type=Path, required=True, help="output directory")
    exp.add_argument("--exporter", choices=zoo.EXPORTERS, default=zoo.EXPORTERS[0],
                     help="torch's exporter (default: %(default)s, opset 17; dynamo: torch's "
                          "default since 2.9, weights in an external-data file)")
    exp.add_argument(
        "--cache-dir", type=Path, default=None, help="export cache (default: ~/.cache/refmnn/zoo)"
    )
    return parser


def _copy_export(cached: Path, dest: Path) -> int:
    """Copy an export to ``dest``; a model with external data is saved again with its weights
    in ``<dest>.data`` (the cached model names its own weights file). Returns the bytes
    written."""
    import onnx

    if not cached.with_name(cached.name + ".data").is_file():  # all weights in the model
        shutil.copyfile(cached, dest)
        return dest.stat().st_size
    model = onnx.load(str(cached))
    data = dest.with_name(dest.name + ".data")
    data.unlink(missing_ok=True)  # onnx appends to an existing weights file
    onnx.save_model(model, str(dest), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data.name)
    data.chmod(dest.stat().st_mode & 0o777)  # onnx creates it 0600
    return dest.stat().st_size + data.stat().st_size


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: Arguments without the program name; ``sys.argv[1:]`` when ``None``.

    Returns:
        Process exit status.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "list":
        for name in zoo.names():
            print(f"{name:<15} {zoo.get(name).description}")
        return 0
    if args.all == bool(args.models):
        parser.error("give model names or --all (not both)")
    selected: list[str] = list(zoo.names()) if args.all else list(args.models)
    try:
        for name in selected:
            zoo.get(name)
    except ValueError as exc:
        parser.error(str(exc))
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"{'name':<15} {'params (M)':>10} {'GMACs':>8} {'ONNX (MB)':>10}  path")
    for name in selected:
        cached = zoo.export_onnx(name, args.cache_dir, exporter=args.exporter)
        dest = args.out / f"{name}.onnx"
        size = _copy_export(cached, dest)
        stats = zoo.count_flops(name)
        print(
            f"{name:<15} {stats['params'] / 1e6:>10.3f} {stats['macs'] / 1e9:>8.3f} "
            f"{size / 1e6:>10.1f}  {dest}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
