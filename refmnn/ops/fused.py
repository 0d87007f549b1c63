"""Fused ops of the ``refmnn`` domain: a producer (Conv, MatMul, Gemm) with its epilogue.

The graph passes of :mod:`refmnn.schedule.optimize` rewrite chains such as Conv -> Relu,
Conv -> Add(residual) -> Relu, MatMul -> Add(bias) -> Gelu or Gemm -> Relu into one node, so
that a backend can compute the epilogue while the producer's output is still in registers or
cache. Each fused op is *defined* by the references it replaces, called in the order the
unfused graph calls them::

    FusedConv(X, W, B, Z)      = act(Add(Conv(X, W, B), Z))          Z optional
    FusedMatMul(A, B, bias, Z) = act(Add(Add(MatMul(A, B), bias), Z)) bias, Z optional
    FusedGemm(A, B, C)         = act(Gemm(A, B, C))
    FusedConvMaxPool(X, W, B)  = MaxPool(act(Conv(X, W, B)))      pool attributes pool_*
    FusedAttention(Q, KT, V, mask)
                               = MatMul(Softmax(Add(Mul(MatMul(Q, KT), scale), mask)), V)
                                 (Q, KT, V and Y optionally transposed: perm_q, ...)

so on the reference backend a fused node computes exactly (bit for bit) what the chain it
replaced computed, apart from the Gelu recognised from its Erf formula (computed by Gelu's own
reference, which rounds once instead of after every step) and FusedAttention's one ``scale``
(the pass folds a Div by c into a Mul by 1 / c, and a scaled Q or KT into the scores' scale).

Activations (the ``activation`` attribute) and their parameters:

==============  =============================================  =====================
activation      meaning (the reference it calls)               parameters
==============  =============================================  =====================
``none``        Y unchanged
``relu``        Relu-14
``leaky_relu``  LeakyRelu-16                                   ``activation_alpha``
``clip``        Clip-13 with scalar bounds of Y's dtype        ``activation_min``,
                (``relu6`` is clip with 0 and 6; an infinite   ``activation_max``
                bound clips nothing, and the fusion pass
                gives an absent bound as the type's limit)
``sigmoid``     Sigmoid-13
``tanh``        Tanh-13
``gelu``        Gelu-20, approximate="none"
``gelu_tanh``   Gelu-20, approximate="tanh"
==============  =============================================  =====================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from refmnn.graph import TensorType
from refmnn.ops import activation as act_ops
from refmnn.ops import conv as conv_ops
from refmnn.ops import elementwise as ew_ops
from refmnn.ops import layout as layout_ops
from refmnn.ops import linalg as linalg_ops
from refmnn.ops import pool as pool_ops
from refmnn.ops._infer import dtype_of, shape_of
from refmnn.ops._schema import Attr, InferContext, op

DOMAIN = "refmnn"

ACTIVATIONS = ("none", "relu", "leaky_relu", "clip", "sigmoid", "tanh", "gelu", "gelu_tanh")
"""Values of the ``activation`` attribute."""

ACTIVATION_ATTRS = (
    Attr("activation", "string", "none", f"applied last: one of {', '.join(ACTIVATIONS)}"),
    Attr("activation_alpha", "float", 0.01, "LeakyRelu's slope for negative inputs"),
    Attr("activation_min", "float", float("-inf"), "clip's lower bound (-inf: none)"),
    Attr("activation_max", "float", float("inf"), "clip's upper bound (inf: none)"),
)


def apply_activation(y: np.ndarray, activation: str, alpha: float, lo: float, hi: float
                     ) -> np.ndarray:
    """The epilogue activation of a fused op, by the reference of the op it stands for."""
    if activation == "none":
        return y
    if activation == "relu":
        return act_ops.relu.reference(y)
    if activation == "leaky_relu":
        return act_ops.leaky_relu.reference(y, alpha=alpha)
    if activation == "clip":
        low = None if lo == float("-inf") else np.array(lo, dtype=y.dtype)
        high = None if hi == float("inf") else np.array(hi, dtype=y.dtype)
        return ew_ops._clip(y, low, high)  # Clip's min(max(y, low), high); None: no bound
    if activation == "sigmoid":
        return act_ops.sigmoid.reference(y)
    if activation == "tanh":
        return ew_ops.tanh.reference(y)
    if activation in ("gelu", "gelu_tanh"):
        return act_ops.gelu.reference(y, approximate="none" if activation == "gelu" else "tanh")
    raise ValueError(f"unknown activation {activation!r}; expected one of {ACTIVATIONS}")


def _add_residual(y: np.ndarray, z: np.ndarray | None, what: str = "residual") -> np.ndarray:
    """y + z by Add's reference; z must broadcast to y's shape without enlarging it."""
    if z is None:
        return y
    out = ew_ops.add.reference(y, z)
    if out.shape != y.shape:
        raise ValueError(f"{what} of shape {list(z.shape)} would broadcast the result "
                         f"{list(y.shape)} to {list(out.shape)}")
    return out


def _check_epilogue(ctx: InferContext, y: TensorType, z: TensorType | None,
                    activation: str, what: str = "residual") -> TensorType:
    """Shape rule shared by the fused ops: Y keeps the producer's type; a residual with a known
    shape must broadcast to it without enlarging it; the activation name must be known."""
    if activation not in ACTIVATIONS:
        ctx.fail(f"unknown activation {activation!r}; expected one of {ACTIVATIONS}")
    ys, zs = shape_of(y), shape_of(z)
    if ys is not None and zs is not None:
        if len(zs) > len(ys):
            ctx.fail(f"{what} of rank {len(zs)} is larger than the result's {len(ys)}")
        for yd, zd in zip(ys[len(ys) - len(zs):], zs, strict=True):
            if isinstance(yd, int) and isinstance(zd, int) and zd not in (1, yd):
                ctx.fail(f"{what} shape {list(zs)} does not broadcast to {list(ys)}")
    return y


# --- FusedConv --------------------------------------------------------------------------------


def _fused_conv_rule(ctx: InferContext, x: TensorType | None, w: TensorType | None,
                     b: TensorType | None = None, z: TensorType | None = None, *,
                     activation: str, **attrs: Any) -> TensorType:
    y = conv_ops._conv_rule(ctx, x, w, b, **{k: v for k, v in attrs.items()
                                             if not k.startswith("activation")})
    return _check_epilogue(ctx, y, z, activation)


@op("FusedConv", since=1, domain=DOMAIN, inputs=("X", "W", "B?", "Z?"), outputs=("Y",),
    attrs=(*conv_ops.CONV_ATTRS, *ACTIVATION_ATTRS), infer=_fused_conv_rule)
def fused_conv(X: np.ndarray, W: np.ndarray, B: np.ndarray | None = None,
               Z: np.ndarray | None = None, *, auto_pad: str, dilations: Sequence[int] | None,
               group: int, kernel_shape: Sequence[int] | None, pads: Sequence[int] | None,
               strides: Sequence[int] | None, activation: str, activation_alpha: float,
               activation_min: float, activation_max: float) -> np.ndarray:
    """Y = act(Conv(X, W, B) + Z): a convolution, an optional residual added after the bias,
    then an activation (module docstring for the list).

    Conv attributes and X, W, B exactly as Conv-11 (:func:`refmnn.ops.conv.conv`); the
    convolution is rounded to X's dtype before Z is added, as in the unfused graph.
    Z: optional, broadcastable to Y = (N, M, o1..on) without enlarging it (a ResNet shortcut
    has Y's shape). Y: Conv's shape and dtype.
    """
    y = conv_ops.conv.reference(X, W, B, auto_pad=auto_pad, dilations=dilations, group=group,
                                kernel_shape=kernel_shape, pads=pads, strides=strides)
    y = _add_residual(y, Z)
    return apply_activation(y, activation, activation_alpha, activation_min, activation_max)


# --- FusedConvMaxPool -------------------------------------------------------------------------

POOL_ATTRS = tuple(replace(a, name="pool_" + a.name, doc="MaxPool's " + a.name + ": " + a.doc)
                   for a in (*pool_ops.BASE_ATTRS, pool_ops._CEIL, pool_ops._DILATIONS))
"""MaxPool-10's attributes (storage_order aside: there is no Indices output), named pool_*."""


def split_pool_attrs(attrs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A FusedConvMaxPool's attributes as (FusedConv's, MaxPool's under their own names)."""
    conv = {k: v for k, v in attrs.items() if not k.startswith("pool_")}
    pool = {k[len("pool_"):]: v for k, v in attrs.items() if k.startswith("pool_")}
    return conv, pool


def _fused_conv_pool_rule(ctx: InferContext, x: TensorType | None, w: TensorType | None,
                          b: TensorType | None = None, **attrs: Any) -> TensorType:
    conv, pool = split_pool_attrs(attrs)
    y = _fused_conv_rule(ctx, x, w, b, None, **conv)
    return pool_ops._pool_rule(ctx, y, **pool)  # type: ignore[return-value]


@op("FusedConvMaxPool", since=1, domain=DOMAIN, inputs=("X", "W", "B?"), outputs=("Y",),
    attrs=(*conv_ops.CONV_ATTRS, *ACTIVATION_ATTRS, *POOL_ATTRS), infer=_fused_conv_pool_rule)
def fused_conv_max_pool(X: np.ndarray, W: np.ndarray, B: np.ndarray | None = None, *,
                        auto_pad: str, dilations: Sequence[int] | None, group: int,
                        kernel_shape: Sequence[int] | None, pads: Sequence[int] | None,
                        strides: Sequence[int] | None, activation: str, activation_alpha: float,
                        activation_min: float, activation_max: float, pool_auto_pad: str,
                        pool_kernel_shape: Sequence[int], pool_pads: Sequence[int] | None,
                        pool_strides: Sequence[int] | None, pool_ceil_mode: int,
                        pool_dilations: Sequence[int] | None) -> np.ndarray:
    """Y = MaxPool(act(Conv(X, W, B))): a network's stem (ResNet's 7x7 convolution, SqueezeNet's
    3x3) with the max pool that follows it, so that a backend can pool the convolution's rows
    while they are in cache instead of writing the (largest) activation of the network out
    and reading it back.

    The convolution and its activation are exactly FusedConv's (no residual); the pool is
    MaxPool-10 with the ``pool_*`` attributes (auto_pad, kernel_shape, pads, strides, ceil_mode,
    dilations; no Indices output) on their result: padding never wins, NaN propagates.
    Y: MaxPool's shape, X's dtype.
    """
    y = fused_conv.reference(X, W, B, None, auto_pad=auto_pad, dilations=dilations, group=group,
                             kernel_shape=kernel_shape, pads=pads, strides=strides,
                             activation=activation, activation_alpha=activation_alpha,
                             activation_min=activation_min, activation_max=activation_max)
    geom = pool_ops._geometry(y, pool_kernel_shape, pool_strides, pool_dilations, pool_pads,
                              pool_auto_pad, pool_ceil_mode)
    return pool_ops._max_pool(y, geom, 0, False)  # type: ignore[return-value]


# --- FusedMatMul ------------------------------------------------------------------------------


def _fused_matmul_rule(ctx: InferContext, a: TensorType | None, b: TensorType | None,
                       bias: TensorType | None = None, z: TensorType | None = None, *,
                       activation: str, **_: Any) -> TensorType:
    y = linalg_ops._matmul_rule(ctx, a, b)
    _check_epilogue(ctx, y, bias, activation)
    return _check_epilogue(ctx, y, z, activation)


@op("FusedMatMul", since=1, domain=DOMAIN, inputs=("A", "B", "bias?", "Z?"), outputs=("Y",),
    attrs=ACTIVATION_ATTRS, infer=_fused_matmul_rule)
def fused_matmul(A: np.ndarray, B: np.ndarray, bias: np.ndarray | None = None,
                 Z: np.ndarray | None = None, *, activation: str, activation_alpha: float,
                 activation_min: float, activation_max: float) -> np.ndarray:
    """Y = act((MatMul(A, B) + bias) + Z): MatMul-13, then an optional bias, then an optional
    residual, each added by Add's reference (rounded to Y's dtype after each step, as in the
    unfused graph), then the activation (module docstring).

    A, B: as MatMul (numpy.matmul semantics, batch dims broadcast); bias (typically [N]) and Z
    (typically Y's shape) broadcast to Y without enlarging it. Y: MatMul's shape and dtype.
    """
    y = linalg_ops.matmul.reference(A, B)
    y = _add_residual(_add_residual(y, bias), Z)
    return apply_activation(y, activation, activation_alpha, activation_min, activation_max)


# --- FusedGemm --------------------------------------------------------------------------------


def _fused_gemm_rule(ctx: InferContext, a: TensorType | None, b: TensorType | None,
                     c: TensorType | None = None, *, activation: str, transA: int, transB: int,
                     **_: Any) -> TensorType:
    y = linalg_ops._gemm_rule(ctx, a, b, c, transA=transA, transB=transB)
    return _check_epilogue(ctx, TensorType(dtype_of(a), y.shape), None, activation)


@op("FusedGemm", since=1, domain=DOMAIN, inputs=("A", "B", "C?"), outputs=("Y",),
    attrs=(*linalg_ops._GEMM_ATTRS, *ACTIVATION_ATTRS), infer=_fused_gemm_rule)
def fused_gemm(A: np.ndarray, B: np.ndarray, C: np.ndarray | None = None, *, alpha: float,
               beta: float, transA: int, transB: int, activation: str, activation_alpha: float,
               activation_min: float, activation_max: float) -> np.ndarray:
    """Y = act(Gemm(A, B, C)) with Gemm-13's meaning: alpha * A' @ B' + beta * C, A' = A.T if
    transA, B' = B.T if transB, C optional and unidirectionally broadcast to [M, N]; then the
    activation (module docstring). A: [M, K] ([K, M] if transA); B: [K, N] ([N, K] if transB);
    Y: [M, N] in A's dtype.
    """
    y = linalg_ops._gemm(A, B, C, alpha, beta, transA, transB)
    return apply_activation(y, activation, activation_alpha, activation_min, activation_max)


# --- FusedAttention ---------------------------------------------------------------------------


def _permuted(ctx: InferContext, t: TensorType | None, perm: Sequence[int], name: str
              ) -> TensorType | None:
    """``t`` with its axes in ``perm`` order, as Transpose(t, perm) (an empty perm: ``t``)."""
    shape = shape_of(t)
    if not perm or shape is None:
        return t
    if sorted(perm) != list(range(len(shape))):
        ctx.fail(f"perm_{name.lower()} {list(perm)} is not a permutation of the {len(shape)} "
                 f"axes of {name} {list(shape)}")
    return TensorType(dtype_of(t), tuple(shape[p] for p in perm))


def _fused_attention_rule(ctx: InferContext, q: TensorType | None, kt: TensorType | None,
                          v: TensorType | None, mask: TensorType | None = None, *,
                          perm_q: Sequence[int] = (), perm_kt: Sequence[int] = (),
                          perm_v: Sequence[int] = (), perm_y: Sequence[int] = (), **_: Any
                          ) -> TensorType:
    q, kt, v = (_permuted(ctx, t, p, n) for t, p, n in
                ((q, perm_q, "Q"), (kt, perm_kt, "KT"), (v, perm_v, "V")))
    for name, t in (("Q", q), ("KT", kt), ("V", v)):
        shape = shape_of(t)
        if shape is not None and len(shape) < 2:
            ctx.fail(f"{name} must have rank >= 2, got {list(shape)}")
    dtype = dtype_of(q)
    if dtype is not None and not dtype.is_float:
        ctx.fail(f"FusedAttention computes a softmax: Q must be a float type, got {dtype.name}")
    scores = linalg_ops._matmul_rule(ctx, q, kt)
    _check_epilogue(ctx, scores, mask, "none", "mask")
    return _permuted(ctx, linalg_ops._matmul_rule(ctx, scores, v), perm_y, "Y")


def _transposed(x: np.ndarray, perm: Sequence[int]) -> np.ndarray:
    """Transpose's reference when ``perm`` is given, ``x`` itself otherwise."""
    return layout_ops.transpose.reference(x, perm=list(perm)) if perm else x


_PERM = "the operand is Transpose({0}, perm) (empty: as given)"


@op("FusedAttention", since=1, domain=DOMAIN, inputs=("Q", "KT", "V", "mask?"), outputs=("Y",),
    attrs=(Attr("scale", "float", 1.0, "multiplies the scores Q @ KT before the mask"),
           Attr("perm_q", "ints", (), _PERM.format("Q")),
           Attr("perm_kt", "ints", (), _PERM.format("KT")),
           Attr("perm_v", "ints", (), _PERM.format("V")),
           Attr("perm_y", "ints", (), "the output is Transpose(Y, perm) (empty: Y)")),
    infer=_fused_attention_rule)
def fused_attention(Q: np.ndarray, KT: np.ndarray, V: np.ndarray, mask: np.ndarray | None = None,
                    *, scale: float, perm_q: Sequence[int], perm_kt: Sequence[int],
                    perm_v: Sequence[int], perm_y: Sequence[int]) -> np.ndarray:
    """Scaled dot-product attention as a transformer exports it, one head per batch item::

        S = MatMul(Q, KT) * scale [+ mask]      scores, [..., Sq, Sk]
        P = Softmax-13(S, axis=-1)              each query's weights over the keys
        Y = MatMul(P, V)                        [..., Sq, Dv]

    Q: [..., Sq, D]; KT: [..., D, Sk], the keys already transposed (the operand the scores'
    MatMul reads); V: [..., Sk, Dv]; batch dims broadcast as in MatMul (typically [B, heads]).
    mask: optional additive bias (0 to keep, -inf or a large negative number to drop a key),
    broadcastable to S without enlarging it. Each step is the reference of the op it stands
    for, rounded to Q's float dtype in between, as in the unfused graph.

    ``perm_q``, ``perm_kt``, ``perm_v`` and ``perm_y`` absorb the Transposes around attention
    (heads split from and merged back into [B, S, heads, D], K transposed): an operand given
    with a perm is first transposed by it, and Y is returned transposed by ``perm_y``. The mask
    applies to the scores as they are (no perm).

    Edge cases (the Softmax reference's): a row whose scores are all -inf, or hold NaN, gives
    NaN; Sk = 0 gives an empty softmax and Y of zeros; a large score does not overflow (the row
    max is subtracted first).
    """
    Q, KT, V = _transposed(Q, perm_q), _transposed(KT, perm_kt), _transposed(V, perm_v)
    s = linalg_ops.matmul.reference(Q, KT)
    s = ew_ops.mul.reference(s, np.array(scale, dtype=s.dtype))
    s = _add_residual(s, mask, "mask")
    p = act_ops.softmax.reference(s, axis=-1)
    return _transposed(linalg_ops.matmul.reference(p, V), perm_y)


OPS = (fused_conv, fused_conv_max_pool, fused_matmul, fused_gemm, fused_attention)
