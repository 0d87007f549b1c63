"""Channel-blocked tensors (NC8HW8) and the convolution that reads and writes them.

A convolutional network spends most of its time in chains of convolutions (MobileNet's 1x1
expansions, 3x3 depthwise filters and 1x1 projections). A CPU kernel vectorises one of them
best over *channels*: eight output channels in a register, a depthwise tap as one vector load
and one multiply-add. NCHW keeps the channels a plane apart, so every such kernel transposes on
the way in and out. The NC8HW8 layout (MNN's NC4HW4, onnxruntime's NCHWc) stores the channels
in blocks of eight innermost instead::

    NCHW  x [N, C, D1..Dn]
    NC8HW8  xb [N, ceil(C / 8), D1..Dn, 8]     xb[n, c // 8, ..., c % 8] = x[n, c, ...]

the channels past C zero. :func:`refmnn.schedule.blocked.block_channels` rewrites a chain of
convolutions into these ops for a backend that computes them, the chain's values blocked in
between and converted back where anything else reads them::

    FusedConvNC8HW8(X, W, B, Z) = to_nc8hw8(FusedConv(X', W, B, from_nc8hw8(Z)))
        X' = from_nc8hw8(X) (input_layout "NC8HW8") or X itself ("NCHW")
    FromNC8HW8(X; channels)     = from_nc8hw8(X, channels)

so that each computes, bit for bit, what the ops it replaced did: the blocked tensors carry
the same numbers in another order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from refmnn.graph import TensorType
from refmnn.ops import conv as conv_ops
from refmnn.ops import fused as fused_ops
from refmnn.ops._infer import dtype_of, shape_of
from refmnn.ops._schema import Attr, InferContext, op

LANES = 8
"""Channels per block."""

LAYOUTS = ("NC8HW8", "NCHW")
"""Values of FusedConvNC8HW8's ``input_layout``."""


def to_nc8hw8(x: np.ndarray) -> np.ndarray:
    """``x [N, C, D1..Dn]`` as ``[N, ceil(C / 8), D1..Dn, 8]``, the channels past C zero."""
    n, c, *spatial = x.shape
    blocks = -(-c // LANES)
    padded = np.zeros((n, blocks * LANES, *spatial), x.dtype)
    padded[:, :c] = x
    return np.ascontiguousarray(np.moveaxis(padded.reshape(n, blocks, LANES, *spatial), 2, -1))


def from_nc8hw8(x: np.ndarray, channels: int) -> np.ndarray:
    """The first ``channels`` channels of ``x [N, CB, D1..Dn, 8]`` as ``[N, channels, D1..Dn]``."""
    n, blocks, *spatial, lanes = x.shape
    if lanes != LANES or not 0 <= channels <= blocks * LANES:
        raise ValueError(f"a tensor of shape {list(x.shape)} does not hold {channels} channels "
                         f"in blocks of {LANES}")
    flat = np.moveaxis(x, -1, 2).reshape(n, blocks * LANES, *spatial)
    return np.ascontiguousarray(flat[:, :channels])


def blocked_dims(shape: Sequence[Any], channels: Any) -> tuple[Any, ...]:
    """The NC8HW8 shape of an NCHW shape ``[N, *, D1..Dn]`` holding ``channels`` channels."""
    blocks = -(-channels // LANES) if isinstance(channels, int) else None
    return (shape[0], blocks, *shape[2:], LANES)


def _check_blocked(ctx: InferContext, t: TensorType | None, channels: Any, what: str) -> None:
    """A blocked tensor's shape: rank >= 3, eight lanes last, ceil(channels / 8) blocks."""
    s = shape_of(t)
    if s is None:
        return
    if len(s) < 3 or s[-1] != LANES:
        ctx.fail(f"{what} of shape {list(s)} is not NC8HW8 (a last axis of {LANES} lanes)")
    if isinstance(channels, int) and isinstance(s[1], int) and s[1] != -(-channels // LANES):
        ctx.fail(f"{what} has {s[1]} blocks of {LANES} channels; {channels} channels need "
                 f"{-(-channels // LANES)}")


def unblocked_type(t: TensorType | None, channels: Any) -> TensorType | None:
    """The NCHW type of a blocked tensor type holding ``channels`` channels (``t`` itself when
    its rank is unknown or too small to be blocked)."""
    s = shape_of(t)
    if s is None or len(s) < 3:
        return t
    return TensorType(dtype_of(t), (s[0], channels, *s[2:-1]))


def _channels(w: TensorType | None, group: int) -> tuple[Any, Any]:
    """(input channels, output channels) of a convolution from its weights' type."""
    ws = shape_of(w)
    if ws is None or len(ws) < 2:
        return None, None
    cg, m = ws[1], ws[0]
    return (cg * group if isinstance(cg, int) else None), m


def _fused_conv_nc8hw8_rule(ctx: InferContext, x: TensorType | None, w: TensorType | None,
                            b: TensorType | None = None, z: TensorType | None = None, *,
                            input_layout: str, **attrs: Any) -> TensorType:
    if input_layout not in LAYOUTS:
        ctx.fail(f"unknown input_layout {input_layout!r}; expected one of {LAYOUTS}")
    c, m = _channels(w, attrs.get("group", 1))
    if input_layout == "NC8HW8":
        _check_blocked(ctx, x, c, "X")
        x = unblocked_type(x, c)
    y = fused_ops._fused_conv_rule(ctx, x, w, b, None, **attrs)
    out = TensorType(dtype_of(y), None if y.shape is None else blocked_dims(y.shape, m))
    zs, ys = shape_of(z), shape_of(out)
    if zs is not None and ys is not None and (len(zs) != len(ys) or any(
            isinstance(zd, int) and isinstance(yd, int) and zd != yd for zd, yd in zip(zs, ys))):
        ctx.fail(f"residual Z of shape {list(zs)} is not Y's NC8HW8 shape {list(ys)}")
    return out


@op("FusedConvNC8HW8", since=1, domain=fused_ops.DOMAIN, inputs=("X", "W", "B?", "Z?"),
    outputs=("Y",), attrs=(*conv_ops.CONV_ATTRS, *fused_ops.ACTIVATION_ATTRS,
                           Attr("input_layout", "string", "NC8HW8",
                                "X's layout: NC8HW8 (blocked) or NCHW")),
    infer=_fused_conv_nc8hw8_rule)
def fused_conv_nc8hw8(X: np.ndarray, W: np.ndarray, B: np.ndarray | None = None,
                      Z: np.ndarray | None = None, *, auto_pad: str,
                      dilations: Sequence[int] | None, group: int,
                      kernel_shape: Sequence[int] | None, pads: Sequence[int] | None,
                      strides: Sequence[int] | None, activation: str, activation_alpha: float,
                      activation_min: float, activation_max: float,
                      input_layout: str) -> np.ndarray:
    """Y = to_nc8hw8(FusedConv(X', W, B, Z')): FusedConv (every attribute, the same meaning)
    on channel-blocked tensors (module docstring).

    X: NC8HW8 ``[N, ceil(C / 8), D1..Dn, 8]`` (``input_layout`` "NC8HW8", X' its NCHW
    values) or NCHW ``[N, C, D1..Dn]`` ("NCHW", X' = X); C = W's ``C / group`` times group.
    W, B: as Conv's, NCHW-independent. Z: optional, Y's NC8HW8 shape exactly (Z' its NCHW
    values). Y: NC8HW8, ``ceil(M / 8)`` blocks; the lanes past M are zero.
    """
    x = X if input_layout == "NCHW" else from_nc8hw8(X, int(W.shape[1]) * group)
    z = None if Z is None else from_nc8hw8(Z, int(W.shape[0]))
    return to_nc8hw8(fused_ops.fused_conv.reference(
        x, W, B, z, auto_pad=auto_pad, dilations=dilations, group=group,
        kernel_shape=kernel_shape, pads=pads, strides=strides, activation=activation,
        activation_alpha=activation_alpha, activation_min=activation_min,
        activation_max=activation_max))


def _from_nc8hw8_rule(ctx: InferContext, x: TensorType | None, *,
                      channels: int) -> TensorType:
    if channels < 0:
        ctx.fail(f"channels={channels} is negative")
    _check_blocked(ctx, x, channels, "X")
    return unblocked_type(x, channels) or TensorType(None, None)


@op("FromNC8HW8", since=1, domain=fused_ops.DOMAIN, inputs=("X",), outputs=("Y",),
    attrs=(Attr("channels", "int", doc="channels held: Y's second dimension"),),
    infer=_from_nc8hw8_rule)
def from_nc8hw8_op(X: np.ndarray, *, channels: int) -> np.ndarray:
    """Y[n, c, ...] = X[n, c // 8, ..., c % 8] for c < channels: an NC8HW8 tensor
    ``[N, CB, D1..Dn, 8]`` back in NCHW, ``[N, channels, D1..Dn]`` (the padding lanes
    dropped). ``channels`` must need exactly CB blocks."""
    return from_nc8hw8(X, channels)


OPS = (fused_conv_nc8hw8, from_nc8hw8_op)

__all__ = ["LANES", "LAYOUTS", "OPS", "blocked_dims", "from_nc8hw8", "to_nc8hw8", "unblocked_type"]
