"""Benchmarks: refmnn's backends next to the engines its users would pick instead.

``refmnn bench MODEL...`` (or ``python -m refmnn.benchmark MODEL...``) times every refmnn
backend and every installed peer (onnxruntime, MNN, onnx's reference evaluator, PyTorch eager)
on zoo models or .onnx files, each (engine, thread count) in its own worker process, in
interleaved rounds, after checking each engine's outputs against refmnn's reference.

Modules: :mod:`~refmnn.benchmark.cli` (arguments, orchestration, output files),
:mod:`~refmnn.benchmark.engines` (one adapter per engine), :mod:`~refmnn.benchmark.worker`
(the worker process and its pipe protocol), :mod:`~refmnn.benchmark.runner` (the method),
:mod:`~refmnn.benchmark.models` (MODEL arguments, inputs, FLOPs),
:mod:`~refmnn.benchmark.machine` (CPU, BLAS, versions), :mod:`~refmnn.benchmark.report`
(records and tables), :mod:`~refmnn.benchmark.chart` (the PNG).

Importing this package imports nothing heavy; engines are imported inside worker processes.
"""

from refmnn.benchmark.cli import add_arguments, main

__all__ = ["add_arguments", "main"]
