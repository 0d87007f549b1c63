"""Fused producer + epilogue ops (``refmnn::FusedConv``, ``refmnn::FusedMatMul``).

The graph passes (:mod:`refmnn.schedule.optimize`) turn ``Conv -> Add(residual) -> Relu`` and
``MatMul -> Add(bias) -> Gelu`` chains into one node when a backend declares the fused op (see
:mod:`refmnn.ops.fused` for their meaning). Here the producer is any Conv / MatMul scheme of
:mod:`.conv` / :mod:`.linalg` -- the same schemes, applicability and costs -- and the epilogue
is :func:`epilogue_kernel`: one parallel pass over the output, while it is still in cache, computing
``act((y + bias) + z)`` with the operands broadcast through a six-axis layout (as the
elementwise kernels) and the same float32 rounding after each step as the unfused graph.
Gelu is ``_common.gelu32``: the reference's rational erf fit, evaluated in float32 arithmetic
(its measured error is documented there).

For the GEMM schemes the convolution's own bias joins the epilogue (so the output is read and
written once after the sgemm); the direct, depthwise and Winograd kernels add it inside their
loops and the epilogue pass runs only when there is a residual or an activation.

Two cheaper forms, because a parallel launch costs 50-100 us on the shared two-core VM (see
:mod:`.conv`): :func:`epilogue_rows`, which the GEMM convs (``gemm_1x1``, ``im2col_gemm``)
and FusedMatMul's ``blas`` scheme call on each sgemm panel from the thread that computed it,
and :func:`activate_row`, which ``depthwise3x3`` calls on each plane in L1; and outputs below
``EPILOGUE_PARALLEL_MIN`` elements take the serial copy of :func:`epilogue_kernel` (a
200k-element pass costs ~15 us).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numba import njit

from numba import prange

from refmnn.backends.base import NodeSpec
from refmnn.backends.numba.kernels._common import (JIT, PARALLEL_LOCK, PJIT, broadcast_layout,
                                                  gelu32, renamed)

RANK = 6
NONE, RELU, LEAKY, CLIP, SIGMOID, TANH, GELU, GELU_TANH = range(8)
ACT_CODES = {"none": NONE, "relu": RELU, "leaky_relu": LEAKY, "clip": CLIP, "sigmoid": SIGMOID,
             "tanh": TANH, "gelu": GELU, "gelu_tanh": GELU_TANH}
SQRT2_PI = math.sqrt(2.0 / math.pi)


@njit(inline="always", **JIT)
def activate(act, v, alpha, lo, hi):
    """One activation of a float32 value (NaN passes through, as in the references)."""
    if act == RELU:
        return v if (v > 0 or v != v) else 0.0
    if act == LEAKY:
        return v if v >= 0 else v * alpha
    if act == CLIP:
        if v < lo:
            v = lo
        if v > hi:
            v = hi
        return v
    if act == SIGMOID:
        if v >= 0:
            return 1 / (1 + math.exp(-v))
        e = math.exp(v)
        return e / (1 + e)
    if act == TANH:
        return math.tanh(v)
    if act == GELU:
        return gelu32(np.float32(v))
    if act == GELU_TANH:
        return 0.5 * v * (1.0 + math.tanh(SQRT2_PI * (v + 0.044715 * v * v * v)))
    return v


@njit(inline="always", **JIT)
def activate_row(row, act, alpha, lo, hi):
    """``row[:] = act(row)`` in place, one loop per activation so that the common ones (relu,
    clip, gelu) vectorise; the epilogue pass applies it to each row, and so do the kernels that
    apply their epilogue row by row in L1.

    Relu stores ``v + 0`` where it keeps ``v`` (v > 0 or NaN: the same value). Given ``v``
    itself, LLVM saw that those lanes keep what was loaded and stored only the lanes set to 0,
    as AVX masked stores (``vmaskmovps``), about 12 cycles per vector on Zen 3: 0.52-0.66
    against 0.13 ns per element on a 4096-element row in L1 (Clip: 0.12). Kernels alone with
    Relu / Clip / no activation, in turn, median us: Winograd F(4,3) 16 -> 64 @ 55x55 437 /
    356 / 354 before, 450 / 451 / 439 after; depthwise3x3_same 32 @ 112 293 / 147 / 133
    before, 206 / 205 / 185 after (a busier machine). Whole models, the kernels compiled
    against the old and the new loop alternating in one process, 2 threads: SqueezeNet 1.1
    0.961x and 0.972x (Winograd's kernels), ResNet-18 0.980x (Winograd, im2col/GEMM),
    MobileNet-v1 0.968x (with the depthwise kernels); outputs bit-equal."""
    n = row.shape[0]
    if act == RELU:
        zero = np.float32(0)
        for i in range(n):
            v = row[i]
            row[i] = (v + zero) if (v > zero or v != v) else zero  # v + 0: see the docstring
    elif act == CLIP:
        for i in range(n):
            v = row[i]
            if v < lo:
                v = lo
            if v > hi:
                v = hi
            row[i] = v
    elif act == GELU:
        for i in range(n):
            row[i] = gelu32(row[i])
    elif act != NONE:
        for i in range(n):
            row[i] = activate(act, row[i], alpha, lo, hi)


@njit(**PJIT)
def epilogue_kernel(y, b, z, has_b, has_z, sizes, sb, sz, act, alpha, lo, hi):
    """y = act((y + b) + z) in place, over six collapsed axes (y contiguous); ``prange`` over
    the five outer axes flattened."""
    n5 = sizes[5]
    b5, z5 = sb[5], sz[5]
    outer = sizes[0] * sizes[1] * sizes[2] * sizes[3] * sizes[4]
    for t in prange(outer):
        i4 = t % sizes[4]
        r4 = t // sizes[4]
        i3 = r4 % sizes[3]
        r3 = r4 // sizes[3]
        i2 = r3 % sizes[2]
        r2 = r3 // sizes[2]
        i1 = r2 % sizes[1]
        i0 = r2 // sizes[1]
        pb = i0 * sb[0] + i1 * sb[1] + i2 * sb[2] + i3 * sb[3] + i4 * sb[4]
        pz = i0 * sz[0] + i1 * sz[1] + i2 * sz[2] + i3 * sz[3] + i4 * sz[4]
        yv = y[t * n5:(t + 1) * n5]
        # one short pass per step over a row that stays in L1; slices keep indices from 0 so
        # that each pass vectorises (float32 rounding after each step, as the unfused graph)
        if has_b:
            if b5 == 1:
                bv = b[pb:pb + n5]
                for i in range(n5):
                    yv[i] = yv[i] + bv[i]
            elif b5 == 0:
                bb = b[pb]
                for i in range(n5):
                    yv[i] = yv[i] + bb
            else:
                for i in range(n5):
                    yv[i] = yv[i] + b[pb + i * b5]
        if has_z:
            if z5 == 1:
                zv = z[pz:pz + n5]
                for i in range(n5):
                    yv[i] = yv[i] + zv[i]
            elif z5 == 0:
                zz = z[pz]
                for i in range(n5):
                    yv[i] = yv[i] + zz
            else:
                for i in range(n5):
                    yv[i] = yv[i] + z[pz + i * z5]
        activate_row(yv, act, alpha, lo, hi)


# the same loops on the calling thread (its own name: see _common.renamed)
epilogue_serial = njit(**JIT)(renamed(epilogue_kernel.py_func, "_serial"))

# Outputs below this many elements get the serial epilogue: a pass over them costs ~0.07 ns per
# element in L2 (200k elements: ~15 us), a parallel launch on the workqueue layer 50-100 us on
# the shared two-core VM (measured with an empty prange loop).
EPILOGUE_PARALLEL_MIN = 1 << 21


@njit(**JIT)
def epilogue_rows(y, b, z, has_b, has_z, b_cols, act, alpha, lo, hi, i0, i1, j0, j1):
    """``y[i, j0:j1] = act((y[i, j0:j1] + bias) + z[i, j0:j1])`` for ``i0 <= i < i1``, in place,
    serial, with ``bias = b[i]`` (a conv's per-channel bias: one per row) or, when ``b_cols``,
    ``b[j0:j1]`` (a MatMul's bias: one per column). The GEMM schemes call it on each panel from
    the thread that has just written the panel with its sgemm, while it is still in cache (no
    second pass, no second parallel launch). ``y`` and ``z`` are whole C-contiguous matrices (a
    row slice of one is contiguous to Numba, so the loops vectorise; a 2-D panel view would be
    typed strided)."""
    bv = b[j0:j1] if b_cols else b[0:0]
    for i in range(i0, i1):
        row = y[i, j0:j1]
        n = row.shape[0]
        if has_b:
            if b_cols:
                for j in range(n):
                    row[j] = row[j] + bv[j]
            else:
                bb = b[i]
                for j in range(n):
                    row[j] = row[j] + bb
        if has_z:
            zr = z[i, j0:j1]
            for j in range(n):
                row[j] = row[j] + zr[j]
        activate_row(row, act, alpha, lo, hi)


class Epilogue:
    """The epilogue of one node: which operands (by input index) and which activation.

    ``bias_input``: index of an input added first (FusedMatMul's bias; a conv bias viewed as
    ``[OC, 1, 1]`` when the producer leaves it out), ``bias_shape`` its broadcast shape;
    ``z_input``: index of the residual input. ``active`` is False when there is nothing to do.
    """

    def __init__(self, spec: NodeSpec, bias_input: int | None, z_input: int | None,
                 bias_shape: tuple[int, ...] | None = None) -> None:
        def present(i: int | None) -> bool:
            return i is not None and i < len(spec.inputs) and spec.inputs[i] is not None

        self.bias_input = bias_input if present(bias_input) else None
        self.z_input = z_input if present(z_input) else None
        a = spec.attrs
        self.act = ACT_CODES[a.get("activation", "none") or "none"]
        self.alpha = np.float32(a.get("activation_alpha", 0.01))
        self.lo = np.float32(a.get("activation_min", -np.inf))
        self.hi = np.float32(a.get("activation_max", np.inf))
        out = tuple(int(d) for d in spec.outputs[0].shape)
        def shape(i: int | None) -> tuple[int, ...]:
            return () if i is None else tuple(int(d) for d in spec.inputs[i].shape)

        b_shape = bias_shape if self.bias_input is not None and bias_shape is not None \
            else shape(self.bias_input)
        shapes = [out, b_shape, shape(self.z_input)]
        layout = broadcast_layout(out, shapes, RANK)
        self.ok = layout is not None
        if layout is not None:
            self.sizes, (_, self.sb, self.sz) = layout
            if self.bias_input is None:
                self.sb = np.zeros(RANK, np.int64)
            if self.z_input is None:
                self.sz = np.zeros(RANK, np.int64)
        self.active = self.act != NONE or self.bias_input is not None or self.z_input is not None
        self._dummy = np.zeros(1, np.float32)
        self._dummy2 = np.zeros((1, 1), np.float32)
        self.bias_array: np.ndarray | None = None  # replaces inputs[bias_input] when set

    def per_column(self, spec: NodeSpec) -> bool:
        """Whether a product's epilogue can run on its row blocks: the bias (if any) one value
        per output column (shape ``[..., 1, N]``) and the residual (if any) of the output's
        shape -- every fused transformer projection."""
        out = tuple(int(d) for d in spec.outputs[0].shape)
        bias = spec.inputs[self.bias_input] if self.bias_input is not None else None
        z = spec.inputs[self.z_input] if self.z_input is not None else None
        return ((bias is None or (bias.numel() == out[-1]
                                  and all(int(d) == 1 for d in bias.shape[:-1])))
                and (z is None or tuple(int(d) for d in z.shape) == out))

    def panel_args(self, bias: np.ndarray | None, z: np.ndarray | None, b_cols: bool) -> tuple:
        """``(bias, z, has_b, has_z, b_cols, act, alpha, lo, hi)``: :func:`epilogue_rows`'s
        operands for this epilogue on a GEMM's panels, ``bias`` and ``z`` the caller's views of
        its bias and residual (None when absent: a placeholder the loops never read)."""
        return (self._dummy if bias is None else bias, self._dummy2 if z is None else z,
                bias is not None, z is not None, b_cols, self.act, self.alpha, self.lo, self.hi)

    def after(self, inputs, out: np.ndarray  # type: ignore[no-untyped-def]
              ) -> Callable[[], None] | None:
        """This epilogue as a pass after a kernel's calls (:class:`._common.BoundRun`), None
        when there is nothing to do."""
        return (lambda: self(inputs, out)) if self.active else None

    def __call__(self, inputs, out: np.ndarray) -> None:  # type: ignore[no-untyped-def]
        if not self.active:
            return
        if self.bias_array is not None:
            b = self.bias_array
        else:
            b = inputs[self.bias_input].reshape(-1) if self.bias_input is not None else self._dummy
        z = inputs[self.z_input].reshape(-1) if self.z_input is not None else self._dummy
        args = (out.reshape(-1), b, z, self.bias_input is not None, self.z_input is not None,
                self.sizes, self.sb, self.sz, self.act, self.alpha, self.lo, self.hi)
        if out.size < EPILOGUE_PARALLEL_MIN:
            epilogue_serial(*args)
            return
        with PARALLEL_LOCK:
            epilogue_kernel(*args)


def epilogue_ok(spec: NodeSpec, z_input: int, bias_input: int | None = None) -> bool:
    """The residual/bias broadcast into the output within six axes, the activation is known."""
    if (spec.attrs.get("activation", "none") or "none") not in ACT_CODES:
        return False
    out = spec.outputs[0]
    if out is None or out.shape is None:
        return False
    shapes = [tuple(out.shape)]
    for i in (bias_input, z_input):
        if i is not None and i < len(spec.inputs) and spec.inputs[i] is not None:
            shapes.append(tuple(spec.inputs[i].shape))
    return broadcast_layout(tuple(out.shape), shapes, RANK) is not None
