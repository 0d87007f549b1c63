"""Raster: the one memory-movement primitive of refmnn's core op set (domain ``refmnn``).

After MNN's geometry computing: Transpose, Reshape, Slice, Concat, Split, Expand, Tile, Pad
(with zeros), DepthToSpace and friends all become one op that copies strided *regions* of its
sources into a zero-filled output. A backend that implements Raster runs every one of them.

A region is ``[src_index, src_offset, dst_offset, sizes..., src_strides..., dst_strides...]``
with ``rank`` sizes and strides, all in elements of the flattened (C-order) tensors. Its meaning::

    for every index i in ndindex(sizes):
        out[dst_offset + i . dst_strides] = sources[src_index][src_offset + i . src_strides]

Positions no region writes are zero. Regions are applied in order (later ones win on overlap).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from refmnn.graph import TensorType
from refmnn.ops._infer import dtype_of
from refmnn.ops._schema import Attr, InferContext, op

DOMAIN = "refmnn"


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    """Element strides of a C-contiguous tensor of ``shape`` (a region's strides over a whole
    tensor in order)."""
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= int(dim)
    return strides[::-1]


def split_regions(regions: Sequence[int], rank: int) -> list[tuple[int, int, int, tuple[int, ...],
                                                                     tuple[int, ...], tuple[int, ...]]]:
    """Decode the flat ``regions`` attribute into (src, src_offset, dst_offset, sizes,
    src_strides, dst_strides) tuples."""
    width = 3 + 3 * rank
    if len(regions) % width:
        raise ValueError(f"regions has {len(regions)} values, not a multiple of 3 + 3*rank = {width}")
    decoded = []
    for start in range(0, len(regions), width):
        r = [int(v) for v in regions[start:start + width]]
        decoded.append((r[0], r[1], r[2], tuple(r[3:3 + rank]), tuple(r[3 + rank:3 + 2 * rank]),
                        tuple(r[3 + 2 * rank:])))
    return decoded


def _infer_raster(ctx: InferContext, *sources: TensorType | None, shape: tuple[int, ...],
                  rank: int, regions: tuple[int, ...]) -> TensorType:
    return TensorType(dtype_of(sources[0]) if sources else None, tuple(shape))


@op("Raster", since=1, domain=DOMAIN, inputs=("sources...",), outputs=("output",),
    attrs=(Attr("shape", "ints", doc="output shape"),
           Attr("rank", "int", doc="number of dims of every region"),
           Attr("regions", "ints", doc="flat list of regions, 3 + 3*rank ints each")),
    infer=_infer_raster)
def raster(*sources: np.ndarray, shape: tuple[int, ...], rank: int, regions: tuple[int, ...]) -> np.ndarray:
    """Copy strided regions of the sources into a zero-filled output of ``shape``.

    sources: tensors of one dtype, any shapes (read flattened in C order).
    Edge cases: a region with a zero size copies nothing; an empty output is returned as is;
    regions that read or write outside their tensor raise ValueError.
    """
    dtype = sources[0].dtype
    flat_out = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=dtype)
    flats = [np.ascontiguousarray(s).reshape(-1) for s in sources]
    itemsize = dtype.itemsize
    for src, src_offset, dst_offset, sizes, src_strides, dst_strides in split_regions(regions, rank):
        if 0 in sizes:
            continue
        source = flats[src]
        for name, array, offset, strides in (("source", source, src_offset, src_strides),
                                             ("output", flat_out, dst_offset, dst_strides)):
            low = offset + sum(min(0, (n - 1) * s) for n, s in zip(sizes, strides, strict=True))
            high = offset + sum(max(0, (n - 1) * s) for n, s in zip(sizes, strides, strict=True))
            if low < 0 or high >= array.size:
                raise ValueError(f"region reads/writes elements {low}..{high} outside the "
                                 f"{name} of {array.size} elements")
        src_view = as_strided(source[src_offset:], sizes, tuple(s * itemsize for s in src_strides),
                              writeable=False)
        dst_view = as_strided(flat_out[dst_offset:], sizes, tuple(s * itemsize for s in dst_strides))
        dst_view[...] = src_view
    return flat_out.reshape(shape)


OPS = (raster,)
