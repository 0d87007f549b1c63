"""Layout ops: Transpose (random or omitted perm over ranks 0-5), DepthToSpace (DCR and CRD,
block sizes 1-3), SpaceToDepth (block sizes 1-3) and ReverseSequence (either axis order,
lengths 0..time, ranks 2-4)."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import Sample, SampleContext, Sweep

_DTYPES = (DType.float32, DType.int64, DType.uint8)


def _dims(rng: np.random.Generator, rank: int, high: int = 4, empty: float = 0.0) -> list[int]:
    """``rank`` dims in [1, high], each 0 with probability ``empty``."""
    return [0 if rng.random() < empty else int(rng.integers(1, high + 1)) for _ in range(rank)]


def draw_transpose(ctx: SampleContext, opset: int) -> Sample:
    """Transpose: data of rank 0-5 (some empty dims), a random perm or none (reversed)."""
    rng = ctx.rng
    rank = int(rng.integers(0, 6))
    x = ctx.make(_dims(rng, rank, 4 if rank < 5 else 3, empty=0.05))
    if rank == 0 or rng.random() < 0.25:
        return Sample((x,))
    return Sample((x,), {"perm": [int(p) for p in rng.permutation(rank)]})


def draw_depth_to_space(ctx: SampleContext, opset: int) -> Sample:
    """DepthToSpace: [N, C, H, W] with C a multiple (1-3) of blocksize² (blocksize 1-3),
    mode DCR or CRD from 11 (DCR also by default)."""
    rng = ctx.rng
    block = int(rng.integers(1, 4))
    n, h, w = (int(d) for d in rng.integers(1, 4, 3))
    x = ctx.make((n, block * block * int(rng.integers(1, 4)), h, w))
    attrs: dict[str, object] = {"blocksize": block}
    if opset >= 11 and rng.random() < 0.7:
        attrs["mode"] = str(rng.choice(["DCR", "CRD"]))
    return Sample((x,), attrs)


def draw_space_to_depth(ctx: SampleContext, opset: int) -> Sample:
    """SpaceToDepth: [N, C, H, W] with H and W multiples (1-3) of blocksize (1-3)."""
    rng = ctx.rng
    block = int(rng.integers(1, 4))
    n, c = (int(d) for d in rng.integers(1, 4, 2))
    h, w = (block * int(d) for d in rng.integers(1, 4, 2))
    return Sample((ctx.make((n, c, h, w)),), {"blocksize": block})


def draw_reverse_sequence(ctx: SampleContext, opset: int) -> Sample:
    """ReverseSequence: input of rank 2-4, time and batch axes 0/1 in either order (the
    default, time 0 and batch 1, sometimes left implicit), lengths in [0, time]."""
    rng = ctx.rng
    shape = _dims(rng, int(rng.integers(2, 5)), 5)
    time_axis = int(rng.integers(0, 2))
    batch = shape[1 - time_axis]
    lens = rng.integers(0, shape[time_axis] + 1, batch).astype(np.int64)
    attrs = {}
    if time_axis == 1 or rng.random() < 0.5:
        attrs = {"time_axis": time_axis, "batch_axis": 1 - time_axis}
    return Sample((ctx.make(shape), lens), attrs)


SWEEPS = (
    Sweep("Transpose", (1, 13, 21), draw_transpose, dtypes=_DTYPES),
    Sweep("DepthToSpace", (1, 11, 13), draw_depth_to_space, dtypes=_DTYPES),
    Sweep("SpaceToDepth", (1, 13), draw_space_to_depth, dtypes=_DTYPES),
    Sweep("ReverseSequence", (10,), draw_reverse_sequence, dtypes=_DTYPES),
)
