"""Shape ops over ranks 0-4 with size-1 and empty dims: Reshape (0 copies or, allowzero=1,
empty dims, -1, the attribute at opset 1), Flatten (every axis, negative ones), Squeeze and
Unsqueeze (axes attribute before 13, input after, negative and unordered), Expand (two-way
broadcast: shorter targets, 1 against larger dims, 0 against 1), Tile (0-3 repeats), Shape
(start/end from 15, out of range), Size and Identity."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import Sample, SampleContext, Sweep

_DTYPES = (DType.float32, DType.int64, DType.bool)


def _shape(rng: np.random.Generator, rank: int, high: int = 4, empty: float = 0.0,
           ones: float = 0.0) -> list[int]:
    """``rank`` dims in [1, high], each 0 with probability ``empty``, else 1 with ``ones``."""
    out = []
    for _ in range(rank):
        roll = rng.random()
        out.append(0 if roll < empty else 1 if roll < empty + ones
                   else int(rng.integers(1, high + 1)))
    return out


def _spell(rng: np.random.Generator, axis: int, rank: int, opset: int) -> int:
    """``axis``, written negative half the time from opset 11."""
    return axis - rank if opset >= 11 and rng.random() < 0.5 else axis


# =============================================================================== Reshape


def _factor(rng: np.random.Generator, total: int, rank: int) -> list[int]:
    """``rank`` dims whose product is ``total`` (> 0), in random order."""
    dims = [1] * rank
    rest = total
    for prime in (2, 3, 5, 7, 11, 13):
        while rest % prime == 0:
            rest //= prime
            dims[int(rng.integers(0, rank))] *= prime
    dims[int(rng.integers(0, rank))] *= rest
    return dims


def draw_reshape(ctx: SampleContext, opset: int) -> Sample:
    """Reshape: data of rank 0-4 (some empty) to a target of rank 0-4 of the same size; one
    dim written -1 half the time (when the others' product is non-zero); dims that match
    the input at their position written 0 (copy, allowzero=0); with allowzero=1 (14+) a 0
    is a literal empty dim and no -1 comes with it; the target an attribute at opset 1."""
    rng = ctx.rng
    shape = _shape(rng, int(rng.integers(0, 5)), 4, empty=0.06)
    total = int(np.prod(shape))
    allowzero = int(opset >= 14 and rng.random() < 0.4)
    out_rank = int(rng.integers(0 if total == 1 and opset >= 5 else 1, 5))  # no empty ints
    if total:
        target = _factor(rng, total, out_rank) if out_rank else []
    else:  # an empty target: at least one 0
        target = [int(d) for d in rng.integers(1, 4, out_rank)]
        target[int(rng.integers(0, out_rank))] = 0
    written = list(target)
    for i, d in enumerate(target):
        copy = i < len(shape) and shape[i] == d
        if not allowzero and copy and (d == 0 or rng.random() < 0.4):
            written[i] = 0  # a copy of the input dim
        elif not allowzero and d == 0:
            written[i] = -1  # a 0 would copy the input dim: -1 makes the empty dim
    others = [i for i in range(out_rank) if np.prod(target[:i] + target[i + 1:]) != 0]
    if others and -1 not in written and rng.random() < 0.5 and not (allowzero and 0 in target):
        written[int(rng.choice(others))] = -1
    x = ctx.make(shape)
    if opset < 5:
        return Sample((x,), {"shape": written})
    attrs = {"allowzero": allowzero} if allowzero or (opset >= 14 and rng.random() < 0.3) else {}
    return Sample((x, np.array(written, np.int64)), attrs)


def draw_flatten(ctx: SampleContext, opset: int) -> Sample:
    """Flatten: data of rank 0-4 (some empty dims), axis anywhere in [0, r] (negative from
    11), or the default 1 (rank >= 1)."""
    rng = ctx.rng
    rank = int(rng.integers(0, 5))
    x = ctx.make(_shape(rng, rank, 4, empty=0.06))
    if rng.random() < 0.15 and rank >= 1:
        return Sample((x,))
    axis = int(rng.integers(0, rank + 1))
    return Sample((x,), {"axis": axis - rank if opset >= 11 and axis < rank
                         and rng.random() < 0.5 else axis})


# =============================================================================== Squeeze


def draw_squeeze(ctx: SampleContext, opset: int) -> Sample:
    """Squeeze: data of rank 1-4 with many size-1 dims (and some empty ones); a random
    non-empty subset of the size-1 axes in random order (negative from 11), as the attribute
    before 13 and an input after, or omitted (every size-1 dim), or from 13 now and then an
    empty axes input (nothing squeezed)."""
    rng = ctx.rng
    rank = int(rng.integers(1, 5))
    shape = _shape(rng, rank, 4, empty=0.05, ones=0.5)
    ones = [i for i, d in enumerate(shape) if d == 1]
    x = ctx.make(shape)
    if not ones or rng.random() < 0.25:
        if opset >= 13 and rng.random() < 0.3:  # an empty axes list: nothing to squeeze
            return Sample((x, np.zeros(0, np.int64)))
        return Sample((x,))
    chosen = [int(a) for a in rng.permutation(ones)[:int(rng.integers(1, len(ones) + 1))]]
    axes = [_spell(rng, a, rank, opset) for a in chosen]
    if opset < 13:
        return Sample((x,), {"axes": axes})
    return Sample((x, np.array(axes, np.int64)))


def known_squeeze(sample: Sample, opset: int, peer: str) -> str | None:
    """onnxruntime squeezes every size-1 dim when the axes input is given but empty."""
    if peer == "onnxruntime" and len(sample.inputs) > 1 and sample.inputs[1].size == 0:
        return ("onnxruntime 1.32 reads an empty axes input as absent and squeezes every "
                "size-1 dim (and warns that the shape differs from the inferred one); Squeeze "
                "removes 'all the single dimensions' only 'if axes is not provided', and ONNX "
                "shape inference keeps the shape")
    return None


def draw_unsqueeze(ctx: SampleContext, opset: int) -> Sample:
    """Unsqueeze: data of rank 0-3 (some empty); 1-3 distinct output positions in random
    order (negative from 11), as the attribute before 13 and an input after."""
    rng = ctx.rng
    rank = int(rng.integers(0, 4))
    count = int(rng.integers(1, 4))
    out_rank = rank + count
    chosen = [int(a) for a in rng.permutation(out_rank)[:count]]
    axes = [_spell(rng, a, out_rank, opset) for a in chosen]
    x = ctx.make(_shape(rng, rank, 4, empty=0.05))
    if opset < 13:
        return Sample((x,), {"axes": axes})
    return Sample((x, np.array(axes, np.int64)))


def known_unsqueeze(sample: Sample, opset: int, peer: str) -> str | None:
    """onnx.reference before 13 inserts the axes one at a time, in the order listed, each
    counted in the tensor so far (not the output)."""
    if peer != "onnx.reference" or opset >= 13:
        return None
    shape, axes = list(sample.inputs[0].shape), sample.attrs["axes"]
    out_rank = len(shape) + len(axes)
    want = list(shape)
    for a in sorted(a % out_rank for a in axes):
        want.insert(a, 1)
    for a in axes:  # np.expand_dims one axis at a time
        shape.insert(a % (len(shape) + 1), 1)
    if shape != want:
        return ("onnx.reference's Unsqueeze-1/11 applies np.expand_dims axis by axis in the "
                "listed order; the axes are 'as seen in the output tensor' and 'the order of "
                "values in axes does not matter'")
    return None


# =============================================================================== Expand, Tile


def draw_expand(ctx: SampleContext, opset: int) -> Sample:
    """Expand: input of rank 0-4 (many size-1 dims) and a target of rank 0-5 that broadcasts
    with it both ways: over an input 1 any size (0 too), over an input d either d or 1;
    extra leading target dims any size, a shorter target leaves the input's leading dims."""
    rng = ctx.rng
    rank = int(rng.integers(0, 5))
    shape = _shape(rng, rank, 4, ones=0.5)
    target_rank = int(rng.integers(0, 6))
    target = []
    for j in range(target_rank):
        i = rank - target_rank + j  # the input dim aligned from the right
        if i < 0:
            target.append(int(rng.integers(0 if rng.random() < 0.1 else 1, 4)))
        elif shape[i] == 1:
            target.append(int(rng.integers(0 if rng.random() < 0.1 else 1, 5)))
        else:
            target.append(shape[i] if rng.random() < 0.5 else 1)
    return Sample((ctx.make(shape), np.array(target, np.int64)))


def draw_tile(ctx: SampleContext, opset: int) -> Sample:
    """Tile: input of rank 1-4 (some empty dims), repeats in [0, 3] per axis (1 mostly)."""
    rng = ctx.rng
    rank = int(rng.integers(1, 5))
    shape = _shape(rng, rank, 4, empty=0.05)
    repeats = [int(rng.choice([0, 1, 1, 2, 3])) for _ in shape]
    return Sample((ctx.make(shape), np.array(repeats, np.int64)))


# =============================================================================== Shape, Size


def draw_shape(ctx: SampleContext, opset: int) -> Sample:
    """Shape: data of rank 0-4 (some empty dims); from 15 start and end each absent or in
    [-r-2, r+2] (out of range, negative, start past end)."""
    rng = ctx.rng
    rank = int(rng.integers(0, 5))
    x = ctx.make(_shape(rng, rank, 4, empty=0.08))
    attrs = {}
    if opset >= 15:
        for name in ("start", "end"):
            if rng.random() < 0.6:
                attrs[name] = int(rng.integers(-rank - 2, rank + 3))
    return Sample((x,), attrs)


def known_shape(sample: Sample, opset: int, peer: str) -> str | None:
    """onnx.reference adds the rank to an end below -r once and slices with the (still
    negative) result, counting from the back again."""
    end = sample.attrs.get("end")
    if peer == "onnx.reference" and end is not None and end < -sample.inputs[0].ndim:
        return ("onnx.reference slices shape[start:end + r] with end + r still negative (a "
                "Python index from the back); Shape-15: axes 'will be clamped to the range [0, "
                "r] ... (after adding r in the case of negative axis)', so end < -r is 0")
    return None


def draw_size(ctx: SampleContext, opset: int) -> Sample:
    """Size: data of rank 0-4 (some empty dims)."""
    rng = ctx.rng
    return Sample((ctx.make(_shape(rng, int(rng.integers(0, 5)), 4, empty=0.1)),))


def draw_identity(ctx: SampleContext, opset: int) -> Sample:
    """Identity: a tensor of rank 0-4 (some empty dims)."""
    rng = ctx.rng
    return Sample((ctx.make(_shape(rng, int(rng.integers(0, 5)), 4, empty=0.1)),))


SWEEPS = (
    Sweep("Reshape", (1, 5, 13, 14, 19, 21), draw_reshape, dtypes=_DTYPES),
    Sweep("Flatten", (1, 9, 11, 13, 21), draw_flatten, dtypes=_DTYPES),
    Sweep("Squeeze", (1, 11, 13, 21), draw_squeeze, dtypes=_DTYPES, known=known_squeeze),
    Sweep("Unsqueeze", (1, 11, 13, 21), draw_unsqueeze, dtypes=_DTYPES, known=known_unsqueeze),
    Sweep("Expand", (8, 13), draw_expand, dtypes=_DTYPES),
    Sweep("Tile", (6, 13), draw_tile, dtypes=_DTYPES),
    Sweep("Shape", (1, 13, 15, 19, 21), draw_shape, dtypes=_DTYPES, known=known_shape),
    Sweep("Size", (1, 13, 19, 21), draw_size, dtypes=_DTYPES),
    Sweep("Identity", (1, 13, 21), draw_identity, dtypes=_DTYPES),
)
