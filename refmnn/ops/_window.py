"""Sliding-window geometry shared by the convolution and pooling ops (a private helper).

Conv, ConvInteger, QLinearConv, DeformConv, ConvTranspose, Col2Im and every pooling op read
their input through the same lens: an N-D window of ``kernel`` taps, ``dilations`` apart, that
slides by ``strides`` over the input padded by ``pads``. Per spatial axis ``i`` (sizes below are
for that axis)::

    dk  = (k - 1) * d + 1                            # the dilated (effective) kernel extent

    auto_pad = NOTSET (explicit pads pb, pe):
        out = floor((in + pb + pe - dk) / s) + 1
        ceil_mode: out = ceil((in + pb + pe - dk) / s) + 1, then drop the last window if it
                   would start in the end padding, (out - 1) * s >= in + pb  (PyTorch's rule,
                   spelled out by MaxPool-22 / AveragePool-22 and applied here to every version)
    auto_pad = VALID:       pb = pe = 0, out = floor((in - dk) / s) + 1
    auto_pad = SAME_UPPER / SAME_LOWER:
        out   = ceil(in / s)
        total = max(0, (out - 1) * s + dk - in)
        SAME_UPPER: pb = total // 2, pe = total - pb   (the odd pixel goes at the end)
        SAME_LOWER: pe = total // 2, pb = total - pe   (the odd pixel goes at the beginning)

With ``ceil_mode`` the last window may reach past ``in + pb + pe``; :attr:`Geometry.extra_end`
is that overhang, which pooling pads with a neutral value (it is never counted as padding).

Output position ``o`` of axis ``i`` reads, at tap ``t``, the padded input at ``o * s + t * d``,
i.e. the unpadded input at ``o * s - pb + t * d``.

Kernel sizes, strides and dilations must be >= 1 and pads >= 0 (a ValueError otherwise: a
negative kernel or pad would give a nonsense size, not an empty output).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np
from numpy.lib.stride_tricks import as_strided

from refmnn.graph import Dim

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


@dataclass(frozen=True, slots=True)
class Geometry:
    """The resolved window of one op application; every field has one entry per spatial axis."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    out: tuple[int, ...]

    @property
    def extent(self) -> tuple[int, ...]:
        """The dilated kernel extent ``(k - 1) * d + 1`` per axis."""
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations, strict=True))

    def extra_end(self, in_shape: Sequence[int]) -> tuple[int, ...]:
        """How far the last window reaches past the padded input (ceil_mode), per axis."""
        return tuple(max(0, (o - 1) * s + e - (n + b + a)) if o > 0 else 0
                     for o, s, e, n, b, a in zip(self.out, self.strides, self.extent, in_shape,
                                                 self.pads_begin, self.pads_end, strict=True))


def defaults(rank: int, strides: Sequence[int] | None, dilations: Sequence[int] | None,
             pads: Sequence[int] | None
             ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Fill the ONNX defaults: strides and dilations 1, pads 0 (``pads`` has 2 * rank entries)."""
    strides = tuple(strides) if strides else (1,) * rank
    dilations = tuple(dilations) if dilations else (1,) * rank
    pads = tuple(pads) if pads else (0,) * (2 * rank)
    if len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
        raise ValueError(f"strides {strides}, dilations {dilations} and pads {pads} do not fit "
                         f"{rank} spatial axes")
    if min(strides) < 1 or min(dilations) < 1 or min(pads, default=0) < 0:
        raise ValueError(f"strides {strides} and dilations {dilations} must be >= 1 and pads "
                         f"{pads} >= 0")
    return strides, dilations, pads


def _check_kernel(kernel: Sequence[int], rank: int) -> None:
    if len(kernel) != rank:
        raise ValueError(f"kernel_shape {tuple(kernel)} does not fit {rank} spatial axes")
    if any(int(k) < 1 for k in kernel):
        raise ValueError(f"kernel_shape {tuple(kernel)} must be >= 1 on every axis")


def axis_size(size: Dim, k: int, s: int, d: int, pb: int, pe: int, auto_pad: str,
              ceil_mode: bool = False) -> tuple[Dim, int, int]:
    """(out, pad_begin, pad_end) of one axis; ``out`` is None when ``size`` is not known."""
    extent = (k - 1) * d + 1
    if auto_pad not in AUTO_PADS:
        raise ValueError(f"auto_pad must be one of {AUTO_PADS}, got {auto_pad!r}")
    if auto_pad == "VALID":
        pb = pe = 0
    if not isinstance(size, int):
        return None, pb, pe
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = -(-size // s)
        total = max(0, (out - 1) * s + extent - size)
        small, large = total // 2, total - total // 2
        pb, pe = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
        return out, pb, pe
    span = size + pb + pe - extent
    if span < 0:
        return 0, pb, pe
    if ceil_mode and auto_pad == "NOTSET":
        out = -(-span // s) + 1
        if (out - 1) * s >= size + pb:
            out -= 1
    else:
        out = span // s + 1
    return out, pb, pe


def geometry(in_shape: Sequence[int], kernel: Sequence[int], strides: Sequence[int] | None,
             dilations: Sequence[int] | None, pads: Sequence[int] | None, auto_pad: str = "NOTSET",
             ceil_mode: bool = False) -> Geometry:
    """Resolve the window over the spatial shape ``in_shape`` (see the module docstring)."""
    rank = len(in_shape)
    _check_kernel(kernel, rank)
    strides, dilations, pads = defaults(rank, strides, dilations, pads)
    axes = [axis_size(int(n), int(k), s, d, pads[i], pads[i + rank], auto_pad, ceil_mode)
            for i, (n, k, s, d) in enumerate(zip(in_shape, kernel, strides, dilations,
                                                 strict=True))]
    return Geometry(tuple(int(k) for k in kernel), strides, dilations,
                    tuple(a[1] for a in axes), tuple(a[2] for a in axes),
                    tuple(int(a[0]) for a in axes))  # type: ignore[arg-type]


def output_dims(in_dims: Sequence[Dim], kernel: Sequence[int], strides: Sequence[int] | None,
                dilations: Sequence[int] | None, pads: Sequence[int] | None,
                auto_pad: str = "NOTSET", ceil_mode: bool = False) -> tuple[Dim, ...]:
    """The output spatial dims for a shape rule (None where an input dim is not known)."""
    rank = len(in_dims)
    _check_kernel(kernel, rank)
    strides, dilations, pads = defaults(rank, strides, dilations, pads)
    return tuple(axis_size(n, int(k), s, d, pads[i], pads[i + rank], auto_pad, ceil_mode)[0]
                 for i, (n, k, s, d) in enumerate(zip(in_dims, kernel, strides, dilations,
                                                      strict=True)))


def pad(x: np.ndarray, begin: Sequence[int], end: Sequence[int], value: object = 0) -> np.ndarray:
    """Pad (negative amounts crop) the trailing ``len(begin)`` axes of ``x`` with ``value``.

    Returns ``x`` itself when there is nothing to do.
    """
    lead = x.ndim - len(begin)
    if not any(begin) and not any(end):
        return x
    crop = tuple(slice(max(0, -b), n - max(0, -e) if e < 0 else n)
                 for b, e, n in zip(begin, end, x.shape[lead:], strict=True))
    x = x[(Ellipsis, *crop)]
    begin = [max(0, b) for b in begin]
    shape = x.shape[:lead] + tuple(n + b + max(0, e)
                                   for n, b, e in zip(x.shape[lead:], begin, end, strict=True))
    out = np.full(shape, value, dtype=x.dtype)
    out[(Ellipsis, *(slice(b, b + n) for b, n in zip(begin, x.shape[lead:], strict=True)))] = x
    return out


def tap_offsets(kernel: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """Every tap of the kernel in row-major order: (0, .., 0), (0, .., 1), ..."""
    return product(*(range(k) for k in kernel))


def tap(xp: np.ndarray, geom: Geometry, offset: Sequence[int]) -> np.ndarray:
    """The strided view of the padded input that tap ``offset`` reads for every output position.

    ``xp``: (..., *padded spatial); result: (..., *geom.out), a view (no copy).
    """
    index = tuple(slice(t * d, t * d + s * (o - 1) + 1, s) if o > 0 else slice(0, 0)
                  for t, d, s, o in zip(offset, geom.dilations, geom.strides, geom.out,
                                        strict=True))
    return xp[(Ellipsis, *index)]


def window_view(xp: np.ndarray, geom: Geometry) -> np.ndarray:
    """All windows at once as a read-only view: (..., *padded) -> (..., *out, *kernel).

    ``view[..., o1.., t1..] = xp[..., o1 * s1 + t1 * d1, ...]``; nothing is copied.
    """
    rank = len(geom.kernel)
    lead, spatial = xp.strides[:-rank], xp.strides[-rank:]
    strides = (*lead, *(st * s for st, s in zip(spatial, geom.strides, strict=True)),
               *(st * d for st, d in zip(spatial, geom.dilations, strict=True)))
    shape = (*xp.shape[:-rank], *geom.out, *geom.kernel)
    return as_strided(xp, shape, strides, writeable=False)


def prod(values: Sequence[int]) -> int:
    """Product of a sequence of ints (1 for an empty one)."""
    return math.prod(values)
