"""What a sweep is: an op, the opsets it is drawn at, and how to draw one random valid sample."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "conformance"))

from refmnn.dtypes import DType  # noqa: E402
from refmnn_conformance.case import (  # noqa: E402  (the families import these from here)
    ANY, EXTREMAL, POSITIVE, SMALL_INT, UNIT, Domain, OpCase, Sample, SampleContext, Tol)

__all__ = ["ANY", "EXTREMAL", "POSITIVE", "SMALL_INT", "UNIT", "Domain", "Draw", "Known",
           "OpCase", "Sample", "SampleContext", "Sweep", "Tol", "float16_in_float16"]

Draw = Callable[[SampleContext, int], Sample]
"""``draw(ctx, opset) -> Sample``: one random configuration valid at ``opset`` (inputs and
attributes), its values and choices from ``ctx.rng``; the sample's name is replaced."""
Known = Callable[[Sample, int, str], str | None]
"""``known(sample, opset, peer) -> reason``: why ``peer`` is known to differ from the reference
on this sample (a peer's error read from the spec, with the test that settles it), or None."""


def float16_in_float16(reason: str) -> Known:
    """The ``known`` of an op that onnx.reference computes in float16 itself, rounding every
    step, where the reference computes wider and rounds once: ``reason`` for a float16 first
    input, against onnx.reference only."""
    def known(sample: Sample, opset: int, peer: str) -> str | None:
        return reason if peer == "onnx.reference" and sample.inputs[0].dtype == "float16" \
            else None
    return known


@dataclass(frozen=True)
class Sweep:
    """Random configurations of one op, each judged against a peer like a conformance sample.

    Attributes:
        op, domain: the op.
        opsets: the opsets to draw at (the draw sees which, for attributes that come and go).
        draw: one random valid sample (see :data:`Draw`).
        dtypes: the element types drawn in (the sample context makes data in each).
        known: the differences settled as a peer's (see :data:`Known`).
        tolerance: per-dtype overrides of the conformance table, each with its reason.
    """
    op: str
    opsets: tuple[int, ...]
    draw: Draw
    dtypes: tuple[DType, ...] = (DType.float32,)
    known: Known | None = None
    tolerance: Mapping[DType, Tol] = field(default_factory=lambda: MappingProxyType({}))
    domain: str = ""

    def cases(self, count: int, seed: int) -> list[OpCase]:
        """One conformance case per opset with ``count`` samples each, named ``r0``, ``r1``, ...;
        ``seed`` is part of the case id, and so of the sample context's seed."""
        def samples(opset: int) -> Callable[[SampleContext], list[Sample]]:
            def make(ctx: SampleContext) -> list[Sample]:
                drawn = (self.draw(ctx, opset) for _ in range(count))
                return [Sample(s.inputs, s.attrs, f"r{i}", s.outputs) for i, s in enumerate(drawn)]
            return make

        return [OpCase(self.op, self.dtypes, samples(opset), domain=self.domain, opset=opset,
                       tolerance=self.tolerance, variant=f"sweep{seed}") for opset in self.opsets]
