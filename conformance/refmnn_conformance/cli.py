"""``refmnn conformance``: run the conformance suite on one backend through pytest.

::

    refmnn conformance --backend NAME [--report DIR] [--xfails FILE] [-n N] [-k EXPR]
                       [--source refmnn|onnx|all] [--precision low|normal|high] [--strict-xfails]
                       [--device DEV] [--option KEY=VALUE ...] [--ops OP,...]
                       [--checks value,error,contract,probe] [-- extra pytest arguments]

Exit status is pytest's: 0 when every judged case conforms.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="refmnn conformance",
                                     description="check a backend against the NumPy reference")
    parser.add_argument("--backend", default="reference", help="backend name (default: reference)")
    parser.add_argument("--report", metavar="DIR", help="write report.json/.md/.html into DIR")
    parser.add_argument("--xfails", metavar="FILE", help="TOML manifest of expected failures")
    parser.add_argument("--strict-xfails", action="store_true",
                        help="expected failures that pass fail the run")
    parser.add_argument("-n", dest="workers", metavar="N", help="pytest-xdist workers (e.g. 2, auto)")
    parser.add_argument("-k", dest="keyword", metavar="EXPR", help="pytest -k selection")
    parser.add_argument("--source", choices=("refmnn", "onnx", "all"), default="all")
    parser.add_argument("--precision", choices=("high", "normal", "low"), default="normal")
    parser.add_argument("--device", metavar="DEV",
                        help="the backend's BackendConfig.device (a name or an index)")
    parser.add_argument("--option", dest="options", metavar="KEY=VALUE", action="append",
                        default=[], help="a BackendConfig.options entry (repeatable), e.g. "
                                         "tune=off for the opencl backend")
    parser.add_argument("--ops", metavar="OP[,OP...]", action="append", default=[],
                        help="only the cases of these ops (exact names, e.g. Conv,MatMul)")
    parser.add_argument("--checks", metavar="KIND[,KIND...]",
                        help="only these kinds of check: value, error, contract, probe")
    parser.add_argument("-q", "--quiet", action="store_true", help="less pytest output")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    return parser


def pytest_argv(args: argparse.Namespace) -> list[str]:
    argv = ["-p", "refmnn_conformance.plugin", "-p", "no:cacheprovider", "--pyargs", "refmnn_conformance",
            "--backend", args.backend, "--source", args.source, "--precision", args.precision]
    if args.report:
        argv += ["--report", args.report]
    if args.xfails:
        argv += ["--xfails", args.xfails]
    if args.strict_xfails:
        argv.append("--strict-xfails")
    if args.device is not None:
        argv += ["--device", args.device]
    for option in args.options:
        argv += ["--option", option]
    if args.workers:
        argv += ["-n", str(args.workers)]
    if args.keyword:
        argv += ["-k", args.keyword]
    for ops in args.ops:
        argv += ["--ops", ops]
    if args.checks:
        argv += ["--checks", args.checks]
    if args.quiet:
        argv.append("-q")
    return argv + list(args.pytest_args)


def main(argv: Sequence[str] | None = None) -> int:
    import pytest

    args = build_parser().parse_args(argv)
    return int(pytest.main(pytest_argv(args)))
