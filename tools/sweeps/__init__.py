"""Random valid configurations of the ops whose attributes and shapes span wide spaces, drawn as
conformance samples for ``tools/sweep_ops.py`` (one module per op family, named as in
``refmnn/ops`` and the conformance cases; each lists its :class:`Sweep` objects in ``SWEEPS``).
"""

from __future__ import annotations

import importlib

from ._sweep import Draw, Known, Sweep

FAMILIES = ("activation", "attention", "cast", "constant", "conv", "detection", "elementwise",
            "image", "indexing", "layout", "linalg", "loss", "ml", "ml_trees", "norm", "pad",
            "pool", "quant", "reduction", "resize", "rnn", "shape", "signal", "split", "text")
"""The modules of this package that hold sweeps, in the order they run."""


def all_sweeps() -> list[Sweep]:
    """Every family's sweeps."""
    return [sweep for family in FAMILIES
            for sweep in importlib.import_module(f"{__name__}.{family}").SWEEPS]


__all__ = ["FAMILIES", "Draw", "Known", "Sweep", "all_sweeps"]
