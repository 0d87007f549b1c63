"""Pad: modes x negative and positive pads x axes (18+) x wrap (19+) over ranks 1-4;
CenterCropPad (18): crops and pads, odd and even surpluses, axes subsets."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import Sample, SampleContext, Sweep


def draw_pad(ctx: SampleContext, opset: int) -> Sample:
    """A random Pad: each padded axis gets a begin and end amount in [-(d - 1), d] that leave
    at least one element (reflect: two, and no more padding than it can mirror from what the
    negative pads keep; wrap: no more than they keep); an axes input from opset 18 names a
    random subset of the axes, some negative."""
    rng = ctx.rng
    rank = int(rng.integers(1, 5))
    shape = tuple(int(d) for d in rng.integers(1, 6, rank))
    modes = ["constant", "reflect", "edge"] + (["wrap"] if opset >= 19 else [])
    mode = str(rng.choice(modes))
    axes = list(range(rank))
    if opset >= 18 and rng.random() < 0.5:
        axes = sorted(rng.choice(rank, int(rng.integers(1, rank + 1)), replace=False).tolist())
    begins, ends = [], []
    for axis in axes:
        d = shape[axis]
        while True:
            begin, end = (int(v) for v in rng.integers(-(d - 1), d + 1, 2))
            kept = d + min(begin, 0) + min(end, 0)  # what is left after the negative pads
            if mode == "constant" or mode == "edge":
                ok = d + begin + end >= 1 and kept >= 1
            else:  # reflect mirrors around an edge element, wrap repeats: both need material
                limit = kept - 1 if mode == "reflect" else kept
                ok = kept >= (2 if mode == "reflect" else 1) and max(begin, end) <= limit
            if ok or d == 1:
                break
        if not ok:  # one element: nothing to remove, reflect has nothing to mirror
            begin = end = 0 if mode == "reflect" else int(rng.integers(0, 3))
        begins.append(begin)
        ends.append(end)
    x = ctx.make(shape)
    inputs: list[np.ndarray | None] = [x, np.array(begins + ends, dtype=np.int64)]
    inputs.append(ctx.scalar(float(rng.integers(-3, 4))) if mode == "constant"
                  and rng.random() < 0.7 else None)
    if len(axes) != rank or rng.random() < 0.3:
        signed = [a - rank if rng.random() < 0.5 else a for a in axes]
        inputs += [np.array(signed, dtype=np.int64)] if opset >= 18 else []
    while inputs[-1] is None:
        inputs.pop()
    return Sample(tuple(inputs), {"mode": mode})


def draw_center_crop_pad(ctx: SampleContext, opset: int) -> Sample:
    """A random CenterCropPad: rank 1-4 with dims 0-6, a target length 0-8 per named axis
    (crops and pads, odd and even differences, unchanged lengths); half the time an axes
    attribute names a random subset in random order, some negative."""
    rng = ctx.rng
    rank = int(rng.integers(1, 5))
    shape = tuple(int(d) for d in rng.integers(0 if rng.random() < 0.1 else 1, 7, rank))
    axes = list(range(rank))
    attrs: dict[str, object] = {}
    if rng.random() < 0.5:
        axes = [int(a) for a in rng.choice(rank, int(rng.integers(1, rank + 1)), replace=False)]
        attrs["axes"] = [a - rank if rng.random() < 0.5 else a for a in axes]
    sizes = [int(rng.integers(0, 9)) if rng.random() < 0.9 else shape[a] for a in axes]
    return Sample((ctx.make(shape), np.array(sizes, dtype=np.int64)), attrs)


SWEEPS = (
    Sweep("Pad", (11, 13, 18, 19, 21, 23), draw_pad, dtypes=(DType.float32, DType.int64)),
    Sweep("CenterCropPad", (18,), draw_center_crop_pad, dtypes=(DType.float32, DType.int64)),
)
