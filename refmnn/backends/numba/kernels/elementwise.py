"""Elementwise kernels: binary arithmetic with broadcasting, comparisons, Where, unary math, Clip.

Scheme ``strided6`` (binary ops Add, Sub, Mul, Div, Pow, Max, Min; Equal; Where)
    The output and the inputs' broadcast strides are collapsed to six axes in ``prepare``
    (see :func:`refmnn.backends.numba.kernels._common.broadcast_layout`); ``run`` walks the five
    outer axes and runs the innermost one as a tight loop, specialised for the three common
    cases -- both operands contiguous, a constant right operand (bias, scalar), a constant left
    operand. Applies: float32 (Equal: float32/int64 in, bool out), at most six axes left after
    collapsing (always the case for real models). Cost: ``n_out`` element operations; the loop is
    memory-bound, so the cost is the number of elements written (plus a call overhead).

Scheme ``flat`` (unary ops Relu-style math: Abs, Neg, Exp, Log, Sqrt, Erf, Sigmoid, Tanh; Clip)
    One loop over the flattened tensor; the op is chosen by an integer code whose ``if`` chain
    sits outside the loop (LLVM unswitches it), so each op gets its own vectorised loop.
    Applies: float32. Cost: ``n`` (memory-bound) plus a call overhead; transcendental ops count
    ~10 per element.

The op is passed as an integer code (not a function object) so one compiled, disk-cached
kernel serves every op of a signature.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme
from refmnn.backends.numba.kernels._common import (F32, JIT, Bound, BoundRun, broadcast_layout,
                                                  erf32, flat, numel)

RANK = 6
from refmnn.dtypes import DType
from refmnn.ops.elementwise import clip_limits

CALL = 2000.0  # rough cost of one kernel call, in element-operation units

ADD, SUB, MUL, DIV, POW, MAX, MIN = range(7)
BINARY_CODES = {"Add": ADD, "Sub": SUB, "Mul": MUL, "Div": DIV, "Pow": POW, "Max": MAX, "Min": MIN}

RELU, SIGMOID, TANH, ERF, EXP, LOG, SQRT, NEG, ABS, CLIP = range(10)
UNARY_CODES = {"Relu": RELU, "Sigmoid": SIGMOID, "Tanh": TANH, "Erf": ERF, "Exp": EXP, "Log": LOG,
               "Sqrt": SQRT, "Neg": NEG, "Abs": ABS, "Clip": CLIP}


@njit(inline="always", **JIT)
def _binary(op, x, y):
    if op == ADD:
        return x + y
    if op == SUB:
        return x - y
    if op == MUL:
        return x * y
    if op == DIV:
        return x / y
    if op == POW:
        return x ** y
    if op == MAX:  # NaN propagates, like np.maximum
        return x if (x > y or x != x) else y
    return x if (x < y or x != x) else y


# One loop per op, the op tested once per row: with the test inside the loop (``_binary`` per
# element) LLVM did not unswitch the seven-way chain and the loops ran scalar, 6-8x slower
# than NumPy (a (196608,) float32 tensor divided by a scalar: 162 us against 22 us).
@njit(inline="always", **JIT)
def _row_vv(op, ov, av, bv):
    """ov[i] = av[i] (op) bv[i]."""
    if op == ADD:
        for i in range(ov.shape[0]):
            ov[i] = av[i] + bv[i]
    elif op == SUB:
        for i in range(ov.shape[0]):
            ov[i] = av[i] - bv[i]
    elif op == MUL:
        for i in range(ov.shape[0]):
            ov[i] = av[i] * bv[i]
    elif op == DIV:
        for i in range(ov.shape[0]):
            ov[i] = av[i] / bv[i]
    elif op == MAX:  # _binary with a constant op: the select, inlined and vectorised
        for i in range(ov.shape[0]):
            ov[i] = _binary(MAX, av[i], bv[i])
    elif op == MIN:
        for i in range(ov.shape[0]):
            ov[i] = _binary(MIN, av[i], bv[i])
    else:
        for i in range(ov.shape[0]):
            ov[i] = _binary(op, av[i], bv[i])


@njit(inline="always", **JIT)
def _row_vs(op, ov, av, y):
    """ov[i] = av[i] (op) y."""
    if op == ADD:
        for i in range(ov.shape[0]):
            ov[i] = av[i] + y
    elif op == SUB:
        for i in range(ov.shape[0]):
            ov[i] = av[i] - y
    elif op == MUL:
        for i in range(ov.shape[0]):
            ov[i] = av[i] * y
    elif op == DIV:
        for i in range(ov.shape[0]):
            ov[i] = av[i] / y
    elif op == MAX:  # _binary with a constant op: the select, inlined and vectorised
        for i in range(ov.shape[0]):
            ov[i] = _binary(MAX, av[i], y)
    elif op == MIN:
        for i in range(ov.shape[0]):
            ov[i] = _binary(MIN, av[i], y)
    else:
        for i in range(ov.shape[0]):
            ov[i] = _binary(op, av[i], y)


@njit(inline="always", **JIT)
def _row_sv(op, ov, x, bv):
    """ov[i] = x (op) bv[i]."""
    if op == ADD:
        for i in range(ov.shape[0]):
            ov[i] = x + bv[i]
    elif op == SUB:
        for i in range(ov.shape[0]):
            ov[i] = x - bv[i]
    elif op == MUL:
        for i in range(ov.shape[0]):
            ov[i] = x * bv[i]
    elif op == DIV:
        for i in range(ov.shape[0]):
            ov[i] = x / bv[i]
    elif op == MAX:  # _binary with a constant op: the select, inlined and vectorised
        for i in range(ov.shape[0]):
            ov[i] = _binary(MAX, x, bv[i])
    elif op == MIN:
        for i in range(ov.shape[0]):
            ov[i] = _binary(MIN, x, bv[i])
    else:
        for i in range(ov.shape[0]):
            ov[i] = _binary(op, x, bv[i])


@njit(**JIT)
def binary_kernel(op, a, b, out, sizes, sa, sb):
    """out[i] = a[i . sa] (op) b[i . sb] over the six collapsed axes ``sizes``."""
    n5 = sizes[5]
    a5, b5 = sa[5], sb[5]
    o = 0
    for i0 in range(sizes[0]):
        for i1 in range(sizes[1]):
            for i2 in range(sizes[2]):
                for i3 in range(sizes[3]):
                    for i4 in range(sizes[4]):
                        pa = i0 * sa[0] + i1 * sa[1] + i2 * sa[2] + i3 * sa[3] + i4 * sa[4]
                        pb = i0 * sb[0] + i1 * sb[1] + i2 * sb[2] + i3 * sb[3] + i4 * sb[4]
                        ov = out[o:o + n5]  # slices: indices from 0 vectorise
                        if a5 == 1 and b5 == 1:
                            _row_vv(op, ov, a[pa:pa + n5], b[pb:pb + n5])
                        elif a5 == 1 and b5 == 0:
                            _row_vs(op, ov, a[pa:pa + n5], b[pb])
                        elif a5 == 0 and b5 == 1:
                            _row_sv(op, ov, a[pa], b[pb:pb + n5])
                        else:
                            for i in range(n5):
                                ov[i] = _binary(op, a[pa + i * a5], b[pb + i * b5])
                        o += n5


@njit(**JIT)
def equal_kernel(a, b, out, sizes, sa, sb):
    """out[i] = a[i . sa] == b[i . sb] (bool), six collapsed axes."""
    o = 0
    for i0 in range(sizes[0]):
        for i1 in range(sizes[1]):
            for i2 in range(sizes[2]):
                for i3 in range(sizes[3]):
                    for i4 in range(sizes[4]):
                        pa = i0 * sa[0] + i1 * sa[1] + i2 * sa[2] + i3 * sa[3] + i4 * sa[4]
                        pb = i0 * sb[0] + i1 * sb[1] + i2 * sb[2] + i3 * sb[3] + i4 * sb[4]
                        for i in range(sizes[5]):
                            out[o + i] = a[pa + i * sa[5]] == b[pb + i * sb[5]]
                        o += sizes[5]


@njit(**JIT)
def where_kernel(c, x, y, out, sizes, sc, sx, sy):
    """out[i] = x[i . sx] if c[i . sc] else y[i . sy], six collapsed axes."""
    o = 0
    for i0 in range(sizes[0]):
        for i1 in range(sizes[1]):
            for i2 in range(sizes[2]):
                for i3 in range(sizes[3]):
                    for i4 in range(sizes[4]):
                        pc = i0 * sc[0] + i1 * sc[1] + i2 * sc[2] + i3 * sc[3] + i4 * sc[4]
                        px = i0 * sx[0] + i1 * sx[1] + i2 * sx[2] + i3 * sx[3] + i4 * sx[4]
                        py = i0 * sy[0] + i1 * sy[1] + i2 * sy[2] + i3 * sy[3] + i4 * sy[4]
                        for i in range(sizes[5]):
                            take_x = c[pc + i * sc[5]]
                            out[o + i] = x[px + i * sx[5]] if take_x else y[py + i * sy[5]]
                        o += sizes[5]


@njit(**JIT)
def unary_kernel(op, x, out, lo, hi):
    """out = op(x) over flat arrays; ``lo``/``hi`` are Clip's bounds (ignored otherwise)."""
    n = x.size
    if op == RELU:
        for i in range(n):
            v = x[i]
            out[i] = v if v > 0 else (v if v != v else np.float32(0))
    elif op == SIGMOID:
        for i in range(n):
            v = x[i]
            if v >= 0:
                out[i] = 1 / (1 + math.exp(-v))
            else:
                e = math.exp(v)
                out[i] = e / (1 + e)
    elif op == TANH:
        for i in range(n):
            out[i] = math.tanh(x[i])
    elif op == ERF:  # the reference's float32 rational fit: branch-free, vectorises
        for i in range(n):
            out[i] = erf32(x[i])
    elif op == EXP:
        for i in range(n):
            out[i] = math.exp(x[i])
    elif op == LOG:
        for i in range(n):
            v = x[i]
            out[i] = math.log(v) if v > 0 else (-np.inf if v == 0 else np.nan)
    elif op == SQRT:
        for i in range(n):
            v = x[i]
            out[i] = math.sqrt(v) if v >= 0 else np.nan
    elif op == NEG:
        for i in range(n):
            out[i] = -x[i]
    elif op == ABS:
        for i in range(n):
            out[i] = abs(x[i])
    else:  # CLIP: min(max(x, lo), hi), NaN passes through
        for i in range(n):
            v = x[i]
            if v < lo:
                v = lo
            if v > hi:
                v = hi
            out[i] = v


# ---------------------------------------------------------------------------------------------
# kernels


class Binary(BoundRun, Kernel):
    def __init__(self, op: str) -> None:
        self.op = op

    def prepare(self, spec: NodeSpec) -> None:
        layout = broadcast_layout(spec.outputs[0].shape, [t.shape for t in spec.inputs], RANK)
        assert layout is not None
        self.sizes, strides = layout
        self.strides = strides
        self.bound = Bound()

    def binding(self, inputs, outputs, workspace):  # type: ignore[no-untyped-def]
        def make():  # type: ignore[no-untyped-def]
            a, b = inputs
            if self.op == "Equal":
                return ((equal_kernel, (flat(a), flat(b), flat(outputs[0]), self.sizes,
                                        *self.strides)),)
            return ((binary_kernel, (BINARY_CODES[self.op], flat(a), flat(b), flat(outputs[0]),
                                     self.sizes, *self.strides)),)
        return (*inputs, outputs[0]), make, None


class Where(Binary):
    def __init__(self) -> None:
        super().__init__("Where")

    def binding(self, inputs, outputs, workspace):  # type: ignore[no-untyped-def]
        c, x, y = inputs
        return ((*inputs, outputs[0]),
                lambda: ((where_kernel, (flat(c), flat(x), flat(y), flat(outputs[0]), self.sizes,
                                         *self.strides)),), None)


class Unary(Kernel):
    def __init__(self, op: str) -> None:
        self.code = UNARY_CODES[op]
        self.limits = clip_limits(np.float32)  # Clip-11+'s absent bounds (lowest, max)

    def run(self, inputs, outputs, workspace):
        lo = hi = np.float32(0)
        if self.code == CLIP:
            given = [inputs[i] if len(inputs) > i else None for i in (1, 2)]
            lowest, highest = self.limits
            lo = np.float32(lowest if given[0] is None else given[0].item())
            hi = np.float32(highest if given[1] is None else given[1].item())
            if lo != lo or hi != hi:  # Min(max, Max(x, min)) with NaN-propagating Max and Min
                flat(outputs[0]).fill(np.nan)
                return
        unary_kernel(self.code, flat(inputs[0]), flat(outputs[0]), lo, hi)


# ---------------------------------------------------------------------------------------------
# declarations


def _layout_ok(spec: NodeSpec) -> bool:
    if len(spec.inputs) != (3 if spec.node.op == "Where" else 2):
        return False
    if any(t is None or t.shape is None for t in (*spec.inputs, *spec.outputs[:1])):
        return False
    return broadcast_layout(spec.outputs[0].shape, [t.shape for t in spec.inputs], RANK) is not None


def _elementwise_cost(per_element: float):
    def cost(spec: NodeSpec) -> float:
        return CALL + per_element * numel(spec.outputs[0])
    return cost


def _binary_def(op: str, since: int) -> KernelDef:
    return KernelDef(op, (Scheme("strided6", lambda b, s, op=op: Binary(op), applies=_layout_ok,
                                 cost=_elementwise_cost(10.0 if op == "Pow" else 1.0),
                                 doc="broadcast collapsed to 6 axes, contiguous inner loop"),),
                     since=since, dtypes=F32)


TRANSCENDENTAL = {"Sigmoid", "Tanh", "Erf", "Exp", "Log"}


def _clip_ok(spec: NodeSpec) -> bool:
    return all(t is None or (t.shape is not None and t.numel() == 1) for t in spec.inputs[1:])


def unary_def(op: str, since: int) -> KernelDef:
    applies = _clip_ok if op == "Clip" else (lambda spec: True)
    return KernelDef(op, (Scheme("flat", lambda b, s, op=op: Unary(op), applies=applies,
                                 cost=_elementwise_cost(10.0 if op in TRANSCENDENTAL else 1.0),
                                 doc="one loop over the flattened tensor"),),
                     since=since, dtypes=F32)


KERNELS = (
    _binary_def("Add", 7), _binary_def("Sub", 7), _binary_def("Mul", 7), _binary_def("Div", 7),
    _binary_def("Pow", 7), _binary_def("Max", 8), _binary_def("Min", 8),
    KernelDef("Equal", (Scheme("strided6", lambda b, s: Binary("Equal"), applies=_layout_ok,
                               cost=_elementwise_cost(1.0), doc="broadcast collapsed to 6 axes"),),
              since=7, dtypes=frozenset({DType.float32, DType.int64, DType.bool})),
    KernelDef("Where", (Scheme("strided6", lambda b, s: Where(), applies=_layout_ok,
                               cost=_elementwise_cost(1.0), doc="broadcast collapsed to 6 axes"),),
              since=9, dtypes=frozenset({DType.float32, DType.bool})),
    *(unary_def(op, since) for op, since in (("Erf", 9), ("Exp", 6), ("Log", 6), ("Sqrt", 6),
                                             ("Neg", 6), ("Abs", 6), ("Tanh", 6), ("Clip", 11))),
)
