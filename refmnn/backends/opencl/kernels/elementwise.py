"""Elementwise kernels (``cl/elementwise.cl``): binary ops with broadcasting, unary ops, Where,
Cast, QuantizeLinear and DequantizeLinear.

* Binary (Add, Sub, Mul, Div, Pow, Max, Min; Max/Min with exactly two inputs): the broadcast is
  collapsed on the host to at most 4 axes (sizes and per-operand strides, 0 on broadcast axes);
  scheme ``contiguous`` when both operands are read at the output index (no index arithmetic),
  else ``broadcast4``: a 3-D NDRange over the collapsed axes, inner strides 0/1 compiled in. Cost: output elements (x0.5 for contiguous).
* Unary (Relu, Sigmoid, Tanh, Erf (the reference's rational fit in double), Exp, Log, Sqrt, Neg, Abs, Reciprocal, LeakyRelu, Elu, and
  Clip with constant or absent bounds): one work-item per element.
* Where: the payload is moved as words of its element size (any dtype), cond as bytes.
* Cast between float32, float16, int32, int64, int8, uint8 and bool (float -> int truncates,
  -> bool is ``!= 0``, -> float16 rounds to nearest even).
* QuantizeLinear / DequantizeLinear per tensor between float32 and int8/uint8
  (:func:`refmnn.backends.base.per_tensor_quantization`), the scale and zero point constants
  passed as arguments; bit for bit the reference (the quotient correctly rounded through
  double, see ``cl/elementwise.cl``). Others (per axis, run-time scales) run on the reference.
All 1-D launches use a tuned work-group size (candidates 64/128/256, or the runtime's choice).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refmnn.backends.base import QUANT_DTYPES, KernelDef, NodeSpec, Scheme, per_tensor_quantization
from refmnn.backends.opencl.kernels._common import (
    FLOATS,
    CLKernel,
    Launch,
    broadcast4,
    numel,
    storage_defines,
)
from refmnn.dtypes import DType
from refmnn.ops.elementwise import clip_limits

BINARY = {"Add": 0, "Sub": 1, "Mul": 2, "Div": 3, "Pow": 4, "Max": 5, "Min": 6}
UNARY = {"Relu": 0, "Sigmoid": 1, "Tanh": 2, "Erf": 3, "Exp": 4, "Log": 5, "Sqrt": 6, "Neg": 7,
         "Abs": 8, "Clip": 9, "LeakyRelu": 10, "Reciprocal": 11, "Elu": 12}
CANDIDATES_1D = [None, (64,), (128,), (256,)]


class OneD(CLKernel):
    """A kernel of one 1-D launch over ``self.n`` items, work-group size tuned."""

    tunable = True

    def candidates(self) -> list[Any]:
        return [c for c in CANDIDATES_1D if c is None or self.n >= c[0]]


class Binary(OneD):
    def setup(self, spec: NodeSpec) -> None:
        out = spec.outputs[0]
        self.n = numel(out.shape)
        sizes, (sa, sb) = broadcast4(out.shape, [spec.inputs[0].shape, spec.inputs[1].shape])
        self.contiguous = all(tuple(t.shape) == tuple(out.shape) for t in spec.inputs)
        defines = {"OPCODE": BINARY[spec.node.op], **storage_defines(out)}
        if self.contiguous:
            defines["CONTIGUOUS"] = ""
        else:   # inner strides 0 / 1 become compile-time constants (cl/elementwise.cl)
            defines.update({k: v for k, v in (("A3", sa[3]), ("B3", sb[3])) if v in (0, 1)})
        self.knl = self.ctx.kernel("elementwise", "binary", **defines)
        self.sizes, self.sa, self.sb = sizes, sa, sb

    def candidates(self) -> list[Any]:
        return super().candidates() if self.contiguous else [None]

    def launches(self, local: Any) -> list[Launch]:
        s = self.sizes
        gsize = (self.n,) if self.contiguous else (s[3], s[2], s[0] * s[1])
        return [Launch(self.knl, gsize, local if self.contiguous else None,
                       [("in", 0), ("in", 1), ("out", 0), self.n, s[1], s[2], s[3], *self.sa, *self.sb])]


def _binary_ok(spec: NodeSpec) -> bool:
    if len(spec.inputs) != 2 or any(t is None for t in spec.inputs):
        return False
    return broadcast4(spec.outputs[0].shape, [t.shape for t in spec.inputs]) is not None


def _is_contiguous(spec: NodeSpec) -> bool:
    return _binary_ok(spec) and all(tuple(t.shape) == tuple(spec.outputs[0].shape) for t in spec.inputs)


class Unary(OneD):
    def setup(self, spec: NodeSpec) -> None:
        op = spec.node.op
        self.n = numel(spec.outputs[0].shape)
        self.alpha, self.beta = 0.0, 0.0
        if op == "Clip":
            names = spec.node.inputs
            if spec.opdef.since < 11:  # attributes, defaults applied (Clip-1's: None)
                lo, hi = (spec.attrs.get(key) for key in ("min", "max"))
                lo, hi = -np.inf if lo is None else lo, np.inf if hi is None else hi
            else:  # an absent bound is the type's lowest / max
                lowest, highest = clip_limits(spec.outputs[0].dtype.numpy) or (-np.inf, np.inf)
                lo = spec.constants.get(1, lowest) if len(names) > 1 and names[1] else lowest
                hi = spec.constants.get(2, highest) if len(names) > 2 and names[2] else highest
            self.alpha, self.beta = float(np.asarray(lo)), float(np.asarray(hi))
        elif op in ("LeakyRelu", "Elu"):
            self.alpha = float(spec.attrs["alpha"])
        self.knl = self.ctx.kernel("elementwise", "unary", UCODE=UNARY[op], **storage_defines(spec.outputs[0]))

    def launches(self, local: Any) -> list[Launch]:
        return [Launch(self.knl, (self.n,), local, [("in", 0), ("out", 0), self.n, self.alpha, self.beta])]


def _clip_ok(spec: NodeSpec) -> bool:
    names = spec.node.inputs
    return all(i in spec.constants for i in (1, 2) if i < len(names) and names[i])


class Where(OneD):
    def setup(self, spec: NodeSpec) -> None:
        out = spec.outputs[0]
        self.n = numel(out.shape)
        self.sizes, self.strides = broadcast4(out.shape, [t.shape for t in spec.inputs])
        self.knl = self.ctx.kernel("elementwise", "where_select", ELEM_SIZE=out.dtype.numpy.itemsize)

    def launches(self, local: Any) -> list[Launch]:
        s = self.sizes
        flat = [v for st in self.strides for v in st]
        return [Launch(self.knl, (self.n,), local,
                       [("in", 0), ("in", 1), ("in", 2), ("out", 0), self.n, s[1], s[2], s[3], *flat])]


def _where_ok(spec: NodeSpec) -> bool:
    return (spec.inputs[0].dtype == DType.bool and spec.outputs[0].dtype.numpy.itemsize in (1, 2, 4, 8)
            and broadcast4(spec.outputs[0].shape, [t.shape for t in spec.inputs]) is not None)


CAST_KINDS = {DType.float32: 0, DType.float16: 1, DType.int32: 2, DType.int64: 3, DType.bool: 4,
              DType.uint8: 5, DType.int8: 6}


class Cast(OneD):
    def setup(self, spec: NodeSpec) -> None:
        self.n = numel(spec.outputs[0].shape)
        self.knl = self.ctx.kernel("elementwise", "cast", SRC_KIND=CAST_KINDS[spec.inputs[0].dtype],
                                   DST_KIND=CAST_KINDS[spec.outputs[0].dtype])

    def launches(self, local: Any) -> list[Launch]:
        return [Launch(self.knl, (self.n,), local, [("in", 0), ("out", 0), self.n])]


def _cast_ok(spec: NodeSpec) -> bool:
    src, dst = spec.inputs[0].dtype, spec.outputs[0].dtype
    if src not in CAST_KINDS or dst not in CAST_KINDS:
        return False
    # float -> integer conversions of out-of-range values are undefined in OpenCL C and float ->
    # int8/uint8 saturation rules differ: only widening/narrowing among the safe pairs.
    return not (src in (DType.float32, DType.float16) and dst in (DType.uint8, DType.int8))


class Quantization(OneD):
    """QuantizeLinear / DequantizeLinear per tensor, the scale and zero point constants."""

    def setup(self, spec: NodeSpec) -> None:
        quantize = spec.node.op == "QuantizeLinear"
        code = spec.outputs[0].dtype if quantize else spec.inputs[0].dtype
        info = np.iinfo(code.numpy)
        self.n = numel(spec.outputs[0].shape)
        self.scale = float(np.asarray(spec.constants[1]).reshape(-1)[0])
        zero = spec.constants.get(2)
        self.zero = 0.0 if zero is None else float(np.asarray(zero).reshape(-1)[0])
        self.knl = self.ctx.kernel("elementwise", "quantize" if quantize else "dequantize",
                                   CODE_T="char" if code == DType.int8 else "uchar",
                                   CODE_MIN=f"{float(info.min)}f", CODE_MAX=f"{float(info.max)}f")

    def launches(self, local: Any) -> list[Launch]:
        return [Launch(self.knl, (self.n,), local,
                       [("in", 0), ("out", 0), self.n, self.scale, self.zero])]


def _quantization_ok(spec: NodeSpec) -> bool:
    names = spec.node.inputs
    constant = 1 in spec.constants and (len(names) < 3 or not names[2] or 2 in spec.constants)
    return constant and per_tensor_quantization(spec)


def _n(spec: NodeSpec) -> float:
    return float(numel(spec.outputs[0].shape))


def _binary_kernels() -> tuple[KernelDef, ...]:
    defs = []
    for op in BINARY:
        since = {"Pow": 7, "Max": 8, "Min": 8}.get(op, 7)
        defs.append(KernelDef(op, (
            Scheme("broadcast4", lambda b, s: Binary(b, s), applies=_binary_ok, cost=_n,
                   doc="4-D collapsed broadcast, strides per operand"),
            Scheme("contiguous", lambda b, s: Binary(b, s), applies=_is_contiguous,
                   cost=lambda s: 0.5 * _n(s), doc="same shapes: flat index"),
        ), since=since, dtypes=FLOATS))
    return tuple(defs)


def _unary_kernels() -> tuple[KernelDef, ...]:
    defs = []
    since = {"Clip": 6, "Relu": 6, "Sigmoid": 6, "Tanh": 6, "Exp": 6, "Log": 6, "Sqrt": 6,
             "Neg": 6, "Abs": 6, "LeakyRelu": 6, "Reciprocal": 6, "Elu": 6, "Erf": 9}
    for op in UNARY:
        applies = _clip_ok if op == "Clip" else (lambda s: True)
        defs.append(KernelDef(op, (Scheme("map", lambda b, s: Unary(b, s), applies=applies, cost=_n,
                                          doc="one work-item per element"),),
                              since=since[op], dtypes=FLOATS))
    return tuple(defs)


ALL_TYPES = frozenset(CAST_KINDS)

KERNELS = (
    *_binary_kernels(),
    *_unary_kernels(),
    KernelDef("Where", (Scheme("select", lambda b, s: Where(b, s), applies=_where_ok, cost=_n,
                               doc="4-D broadcast select, payload moved as words"),),
              since=9, dtypes=ALL_TYPES),
    KernelDef("Cast", (Scheme("convert", lambda b, s: Cast(b, s), applies=_cast_ok, cost=_n,
                              doc="one work-item per element, C conversion rules"),),
              since=6, dtypes=ALL_TYPES),
    *(KernelDef(op, (Scheme("per_tensor", lambda b, s: Quantization(b, s),
                            applies=_quantization_ok, cost=_n,
                            doc="one work-item per element, constant scale and zero point"),),
                since=10, dtypes=QUANT_DTYPES)
      for op in ("QuantizeLinear", "DequantizeLinear")),
)
