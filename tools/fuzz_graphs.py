"""Random graphs: refmnn's planned run of a model against a plain run of the same references.

    .venv/bin/python tools/fuzz_graphs.py                          # seeds 0-199, the reference
    .venv/bin/python tools/fuzz_graphs.py --seeds 0:1000 --dynamic --scale 3
    .venv/bin/python tools/fuzz_graphs.py --backend numba --seeds 0:300

The op-level suites (conformance, sweeps, tools/fuzz_models.py) run one node at a time. What
they cannot reach is what a Session does *between* nodes: shape inference, placement, the
fusion passes, Reshape/Squeeze/Concat/Split/Slice run as views of another value's bytes, ops
working in place over an input, the arena reusing a dead value's bytes, copies between
backends, and a plan re-made for other input shapes. Any mistake there is a wrong answer with
no error.

Each seed draws a random valid model (onnx's full checker passes it; float32, or ``--dtype``
float16 / float64) of at least 3 to 24 nodes: steps, each an op or a pattern the passes
rewrite, applied to a recent value (chains) or an old one (long live ranges), with fan-out, a
value used twice by one node, broadcast operands and intermediate values among the graph
outputs:

* elementwise: Relu, Sigmoid, Erf, Neg, Abs, Tanh, Sqrt, Exp, Clip (min above max too), Add,
  Sub, Mul, Div; Softmax and LayerNormalization over any axis;
* views and layout: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Transpose, Concat, Split,
  Slice;
* compute: MatMul, Gemm (transB, alpha), Conv (groups, strides, pads), MaxPool, AveragePool,
  GlobalAveragePool, GlobalMaxPool, BatchNormalization;
* the patterns of the fusion passes: Conv -> Add(residual) -> activation, MatMul -> Add(bias)
  -> activation, exporters' GELU (Div, Erf, Add, Mul, Mul) and attention (MatMul, scale,
  mask, Softmax, MatMul);
* host objects and control flow: If and Loop (0-3 trips, scan outputs) whose bodies read
  outer values, a sequence (SequenceConstruct, SequenceInsert) or an optional read back with
  SequenceAt / OptionalGetElement after all the other steps, a round trip through float16 or
  float64 (Cast, an op, Cast);
* shapes and indices from data: Shape -> Gather -> Concat -> Reshape as exporters write it,
  ConstantOfShape, Reduce*, Where on a comparison, Pad, Tile, Gather, Resize, ArgMax;
* several outputs, some left out: TopK, MaxPool's Indices, GRU/LSTM/RNN (Y, Y_h, Y_c),
  Dropout's mask; Constant nodes.

The oracle interprets the model node by node, calling each op's reference
(:class:`refmnn.ops._schema.OpDef`) on fresh C-contiguous arrays (If and Loop it runs itself,
their bodies seeing the enclosing values): no planning, no views shared between values,
nothing in place. (C-contiguous, as a Session's tensors are: the
reference MatMul of a strided view may differ in the last bit, since NumPy then leaves BLAS.)
On the reference backend the Session must match it bit for bit, NaN where NaN; on another
backend within ``--tolerance`` of each output's largest magnitude (and Inf and NaN at the same
places). Each model is run three times -- plain, with intermediates (every value checked, the
path of ``refmnn compare``) and plain again on other values (a second run in the same arena:
nothing may be left over from the first) -- and with
``--dynamic`` its inputs have a symbolic batch dim, the ops keep axis 0 the batch, and one
Session runs it at batch 2, 1, 3 and 2 again. ``--special`` puts NaN, infinities, signed
zeros, subnormals (and on the reference huge values) among the inputs; ``--no-arena`` and
``--optimize`` set the Session's options of those names; ``--backend`` takes a preference
order (``numba,opencl``).

Outcomes: ``ok``; ``MISMATCH`` (values differ: the finding names them); ``ERROR`` (a valid
model raised). The exit status is 1 when there was any finding; a seed reproduces its model
(``--seeds S:S+1 --show`` prints it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import refmnn
from refmnn.compare import OK, Tolerance, compare_arrays
from refmnn.graph import Node
from refmnn.ops import default_registry
from refmnn.ops._schema import OpContext

OPSET = 17
BATCHES = (2, 1, 3, 2)  # --dynamic: the batch of each run; the model is drawn at the first
# Off the reference, of each value's largest magnitude: float32 errors compound along a random
# graph, and a value squashed late (Tanh after numba's Winograd F(4,3) convolution of inputs
# near 30) keeps the absolute error of the larger one before it (1.3e-4 seen). A wrong
# index, pad or buffer is off by the values themselves.
TOLERANCE = 3e-4
REGISTRY = default_registry()
STEPS = ("unary", "binary", "binary", "reshape", "transpose", "concat", "split", "slice",
         "matmul", "softmax", "layernorm", "clip", "squeeze", "identity", "flatten", "conv",
         "conv", "pool", "batchnorm", "gelu", "bias_act", "attention", "gemm", "if", "loop",
         "cast", "sequence", "optional", "shape_reshape", "reduce", "where", "pad", "tile",
         "gather", "resize", "argmax", "topk", "pool_indices", "rnn", "dropout", "constant")


@dataclass(frozen=True)
class Drawn:
    """A drawn model, its graph inputs' shapes (batch first) and the outputs to check."""

    model: onnx.ModelProto
    inputs: dict[str, tuple[int, ...]]
    outputs: list[str]
    seed: int
    dtype: str = "float32"
    special: bool = False  # a tenth of the inputs' elements NaN, +-inf, +-0, tiny (or huge)
    huge: bool = True  # among the special values (see draw)

    def feeds(self, batch: int | None = None, again: bool = False) -> dict[str, np.ndarray]:
        """Seeded standard normal inputs; ``batch`` replaces every input's first dim;
        ``again`` draws other values."""
        rng = np.random.default_rng([self.seed, batch or 0, int(again)])
        feeds = {}
        for name, shape in self.inputs.items():
            x = rng.standard_normal((batch or shape[0], *shape[1:])).astype(self.dtype)
            if self.special:
                where = rng.random(x.shape) < 0.1
                x[where] = rng.choice(self._specials(), int(where.sum()))
            feeds[name] = x
        return feeds

    def _specials(self) -> np.ndarray:
        info = np.finfo(self.dtype)
        return np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, info.smallest_subnormal,
                         -info.tiny, *([info.max / 4, -info.max / 4] if self.huge else [])],
                        self.dtype)


class _Builder:
    """Grows one graph: values and their shapes (at the drawn batch), nodes, initializers.
    ``lo`` is the first axis an op may act on: 1 when axis 0 is a symbolic batch."""

    def __init__(self, rng: np.random.Generator, dynamic: bool, scale: int, exact: bool,
                 dtype: str) -> None:
        self.rng, self.lo, self.scale, self.exact = rng, int(dynamic), scale, exact
        self.dtype = np.dtype(dtype)  # the model's float type, and its ONNX code
        self.elem = helper.np_dtype_to_tensor_dtype(self.dtype)
        self.batch = BATCHES[0] if dynamic else None
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.values: dict[str, tuple[int, ...]] = {}  # the values an op may pick
        self.consts: dict[str, tuple[int, ...]] = {}  # the initializers
        self.inputs: dict[str, tuple[int, ...]] = {}
        self.later: list[Callable[[], None]] = []  # reads of sequences and optionals, at the end
        self.count = 0

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, value: np.ndarray | float, prefix: str = "c") -> str:
        name = self.fresh(prefix)
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        self.consts[name] = np.shape(value)
        return name

    def weight(self, *shape: int) -> str:
        return self.const((self.rng.standard_normal(shape) / 2).astype(self.dtype), "w")

    def scalar(self, value: float) -> str:
        """A constant of the model's float type."""
        return self.const(np.array(value, self.dtype))

    def ints(self, values: Sequence[int], prefix: str) -> str:
        return self.const(np.array(values, np.int64), prefix)

    def dim(self, low: int, high: int) -> int:
        return int(self.rng.integers(low, high)) * self.scale

    def add_input(self, shape: tuple[int, ...]) -> str:
        if self.batch is not None:
            shape = (self.batch, *shape[1:])
        name = self.fresh("in")
        self.inputs[name] = self.values[name] = shape
        return name

    def node(self, op: str, inputs: Sequence[str], shapes: Sequence[tuple[int, ...]],
             pickable: bool = True, omit: Sequence[int] = (), **attrs: object) -> list[str]:
        """Add a node; its outputs join the values later ops pick from unless ``pickable`` is
        False (a constant's derivative, which has no batch dim). The outputs numbered in
        ``omit`` are left out ("" in the middle, dropped at the end)."""
        outputs = ["" if i in omit else self.fresh("v") for i in range(len(shapes))]
        listed = list(outputs)
        while listed and not listed[-1]:
            listed.pop()
        self.nodes.append(helper.make_node(op, list(inputs), listed,
                                           name=f"{op}_{self.count}", **attrs))
        if pickable:
            self.values.update((o, tuple(s)) for o, s in zip(outputs, shapes, strict=True) if o)
        return outputs

    def pick(self, fits: Callable[[tuple[int, ...]], bool] = lambda s: True) -> str | None:
        """A value that fits: mostly one of the last three made, sometimes any."""
        names = [n for n, s in self.values.items() if fits(s)]
        if not names:
            return None
        if self.rng.random() < 0.7:
            return names[-1 - int(self.rng.integers(0, min(3, len(names))))]
        return names[int(self.rng.integers(0, len(names)))]

    def axis(self, shape: tuple[int, ...], fits: Callable[[int], bool] = lambda d: True
             ) -> int | None:
        """An axis >= lo whose size fits, or None."""
        axes = [i for i in range(self.lo, len(shape)) if fits(shape[i])]
        return int(self.rng.choice(axes)) if axes else None


def _elementwise(b: _Builder, kind: str, x: str, s: tuple[int, ...]) -> None:
    rng = b.rng
    if kind == "unary":
        op = str(rng.choice(["Relu", "Sigmoid", "Erf", "Neg", "Abs", "Tanh", "Sqrt", "Exp"]))
        b.node(op, [x], [s])
    elif kind == "binary":
        r = rng.random()
        if r < 0.2:
            y = x  # x op x: one value as both inputs
        elif r < 0.5 and len(s) > b.lo:  # a broadcast constant of trailing dims
            y = b.weight(*s[int(rng.integers(b.lo, len(s) + 1)):])
        else:
            y = b.pick(lambda t: t == s) or x
        pair = [x, y] if rng.random() < 0.5 else [y, x]
        op = str(rng.choice(["Add", "Sub", "Mul", "Div"]))
        if op == "Div" and not b.exact:  # a divisor away from 0 (see draw)
            value = pair[1] in b.values
            shape = b.values[pair[1]] if value else b.consts[pair[1]]
            (magnitude,) = b.node("Abs", [pair[1]], [shape], pickable=value)
            (pair[1],) = b.node("Add", [magnitude, b.scalar(0.5)], [shape],
                                pickable=value)
        b.node(op, pair, [s])
    elif kind == "clip":
        low = float(rng.normal())
        high = low + abs(float(rng.normal())) if rng.random() < 0.9 else low - 1  # min > max
        b.node("Clip", [x, b.scalar(low), b.scalar(high)], [s])
    elif kind == "softmax" and len(s) > b.lo:
        b.node("Softmax", [x], [s], axis=b.axis(s) - (len(s) if rng.random() < 0.5 else 0))
    elif kind == "layernorm" and len(s) > b.lo:
        axis = b.axis(s)
        scale_bias = [b.weight(*s[axis:]) for _ in range(1 + (rng.random() < 0.7))]
        b.node("LayerNormalization", [x, *scale_bias], [s], axis=axis - len(s))
    elif kind == "gelu":  # as exporters write it; the passes make it one Gelu
        (d,) = b.node("Div", [x, b.scalar(np.sqrt(2))], [s])
        (e,) = b.node("Erf", [d], [s])
        (a,) = b.node("Add", [e, b.scalar(1)], [s])
        (m,) = b.node("Mul", [x, a], [s])
        b.node("Mul", [m, b.scalar(0.5)], [s])


def _layout(b: _Builder, kind: str, x: str, s: tuple[int, ...]) -> None:
    rng = b.rng
    if kind == "reshape":
        rest = int(np.prod(s[b.lo:]))
        if not rest:  # an empty tensor (a Loop of no iterations stacks nothing)
            return
        d = int(rng.choice([d for d in range(1, rest + 1) if rest % d == 0]))
        if b.lo:  # 0 keeps the batch
            b.node("Reshape", [x, b.ints([0, d, -1], "shape")], [(s[0], d, rest // d)])
        else:
            new = (d, rest // d) if rng.random() < 0.6 else (rest,)
            b.node("Reshape", [x, b.ints(new, "shape")], [new])
    elif kind == "transpose" and len(s) - b.lo >= 2:
        perm = [*range(b.lo), *(int(i) + b.lo for i in rng.permutation(len(s) - b.lo))]
        b.node("Transpose", [x], [tuple(s[p] for p in perm)], perm=perm)
    elif kind == "concat" and len(s) > b.lo:
        axis = b.axis(s)
        same = [n for n, t in b.values.items() if len(t) == len(s) and
                all(a == c for i, (a, c) in enumerate(zip(t, s, strict=True)) if i != axis)]
        parts = [x, *(same[int(rng.integers(0, len(same)))] for _ in range(rng.integers(1, 4)))]
        out = list(s)
        out[axis] = sum(b.values[p][axis] for p in parts)
        b.node("Concat", parts, [tuple(out)], axis=axis)
    elif kind == "split" and (axis := b.axis(s, lambda d: d >= 2)) is not None:
        first = int(rng.integers(1, s[axis]))
        shapes = [tuple(n if i == axis else d for i, d in enumerate(s))
                  for n in (first, s[axis] - first)]
        b.node("Split", [x, b.ints([first, s[axis] - first], "split")], shapes, axis=axis)
    elif kind == "slice" and (axis := b.axis(s, lambda d: d >= 2)) is not None:
        start = int(rng.integers(0, s[axis] - 1))
        end = int(rng.integers(start + 1, s[axis] + 1))
        out = tuple(end - start if i == axis else d for i, d in enumerate(s))
        b.node("Slice", [x, b.ints([start], "start"), b.ints([end], "end"),
                         b.ints([axis], "axes")], [out])
    elif kind == "squeeze":
        ones = [i for i in range(b.lo, len(s)) if s[i] == 1]
        if ones and rng.random() < 0.5:
            b.node("Squeeze", [x, b.ints(ones[:1], "axes")],
                   [tuple(d for i, d in enumerate(s) if i != ones[0])])
        else:
            at = int(rng.integers(b.lo, len(s) + 1))
            b.node("Unsqueeze", [x, b.ints([at], "axes")], [(*s[:at], 1, *s[at:])])
    elif kind == "identity":
        b.node("Identity", [x], [s])
    elif kind == "flatten":
        at = int(rng.integers(b.lo, len(s) + 1))
        b.node("Flatten", [x], [(int(np.prod(s[:at])), int(np.prod(s[at:])))], axis=at)


def _activation(b: _Builder, y: str, s: tuple[int, ...], choices: Sequence[str]) -> None:
    act = str(b.rng.choice(list(choices)))
    if act == "Clip":  # relu6
        b.node("Clip", [y, b.scalar(0), b.scalar(6)], [s])
    elif act == "LeakyRelu":
        b.node(act, [y], [s], alpha=0.1)
    elif act != "none":
        b.node(act, [y], [s])


def _compute(b: _Builder, kind: str, x: str, s: tuple[int, ...]) -> None:
    rng = b.rng
    if kind in ("conv", "pool"):
        n, c, h, w = s
        k, stride = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        pad = int(rng.integers(0, k))
        oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
        window = {"kernel_shape": [k, k], "strides": [stride, stride], "pads": [pad] * 4}
        if kind == "pool":
            op = str(rng.choice(["MaxPool", "AveragePool", "GlobalAveragePool",
                                 "GlobalMaxPool"]))
            if op.startswith("Global"):
                b.node(op, [x], [(n, c, 1, 1)])
            elif oh >= 1 and ow >= 1:
                b.node(op, [x], [(n, c, oh, ow)], **window)
            return
        if oh < 1 or ow < 1:
            return
        group = int(rng.choice([g for g in (1, 2, c) if g and c % g == 0]))  # c may be 0
        m = group * b.dim(1, 4)
        operands = [x, b.weight(m, c // group, k, k)] + \
            ([b.weight(m)] if rng.random() < 0.7 else [])
        out = (n, m, oh, ow)
        (y,) = b.node("Conv", operands, [out], group=group, **window)
        residual = b.pick(lambda t: t == out) if rng.random() < 0.3 else None
        if residual is not None and residual != y:
            (y,) = b.node("Add", [y, residual], [out])
        _activation(b, y, out, ["Relu", "Sigmoid", "Tanh", "Clip", "LeakyRelu", "none"])
    elif kind == "batchnorm":
        c = s[1]
        b.node("BatchNormalization", [x, b.weight(c), b.weight(c), b.weight(c),
                                      b.const((b.rng.random(c) + 0.5).astype(b.dtype))], [s])
    elif kind in ("matmul", "bias_act") and len(s) > b.lo and s[-1] <= 4096:
        n = b.dim(1, 9)
        out = (*s[:-1], n)
        (y,) = b.node("MatMul", [x, b.weight(s[-1], n)], [out])
        if kind == "bias_act":
            (y,) = b.node("Add", [y, b.weight(n)], [out])
            _activation(b, y, out, ["Relu", "Sigmoid", "Tanh", "none"])
    elif kind == "gemm" and len(s) == 2 and s[1] <= 4096:
        n, trans_b = b.dim(1, 9), int(rng.integers(0, 2))
        operands = [x, b.weight(*((n, s[1]) if trans_b else (s[1], n)))] + \
            ([b.weight(n)] if rng.random() < 0.7 else [])
        (y,) = b.node("Gemm", operands, [(s[0], n)], transB=trans_b,
                      alpha=float(rng.choice([1.0, 0.5])))
        _activation(b, y, (s[0], n), ["Relu", "none"])
    elif kind == "attention" and len(s) >= 2 + b.lo and s[-2] <= 64 and s[-1] <= 256:
        t, d = s[-2], s[-1]
        scores = (*s[:-1], t)
        (y,) = b.node("MatMul", [x, b.weight(d, t)], [scores])
        (y,) = b.node(str(rng.choice(["Mul", "Div"])), [y, b.scalar(0.35)],
                      [scores])
        if rng.random() < 0.5:
            (y,) = b.node("Add", [y, b.weight(t, t)], [scores])  # a mask
        (y,) = b.node("Softmax", [y], [scores], axis=-1)
        b.node("MatMul", [y, b.weight(t, d)], [s])


def _shaped(b: _Builder, kind: str, x: str, s: tuple[int, ...]) -> None:
    """Ops whose output shape, or index, comes from data: an exporter's Shape -> Gather ->
    Concat -> Reshape, reductions, Where on a comparison, Pad, Tile, Gather, Resize, ArgMax."""
    rng, int64 = b.rng, np.int64
    if kind == "shape_reshape" and s and all(s):  # [d0, -1] from its own shape, at run time
        (shape,) = b.node("Shape", [x], [(len(s),)], pickable=False)
        (first,) = b.node("Gather", [shape, b.const(np.array(0, int64))], [()], pickable=False,
                          axis=0)
        (first,) = b.node("Unsqueeze", [first, b.ints([0], "axes")], [(1,)], pickable=False)
        (target,) = b.node("Concat", [first, b.ints([-1], "rest")], [(2,)], pickable=False,
                           axis=0)
        b.node("Reshape", [x, target], [(s[0], int(np.prod(s[1:])))])
    elif kind == "reduce" and (axis := b.axis(s)) is not None:
        op = str(rng.choice(["ReduceMean", "ReduceMax", "ReduceSum", "ReduceL2"]))
        out = tuple(1 if i == axis else d for i, d in enumerate(s))
        if op == "ReduceSum":  # axes became an input at opset 13
            b.node(op, [x, b.ints([axis], "axes")], [out], keepdims=1)
        else:
            b.node(op, [x], [out], axes=[axis], keepdims=1)
    elif kind == "where":
        other = b.pick(lambda t: t == s) or x
        (mask,) = b.node(str(rng.choice(["Greater", "Less", "Equal"])), [x, other], [s],
                         pickable=False)
        b.node("Where", [mask, x, other] if rng.random() < 0.5 else [mask, other, x], [s])
    elif kind == "pad" and (axis := b.axis(s, lambda d: d >= 2)) is not None:
        mode = str(rng.choice(["constant", "reflect", "edge"]))
        before, after = (int(v) for v in rng.integers(0, min(3, s[axis]), 2))
        pads = [0] * (2 * len(s))
        pads[axis], pads[len(s) + axis] = before, after
        out = tuple(d + before + after if i == axis else d for i, d in enumerate(s))
        b.node("Pad", [x, b.ints(pads, "pads")], [out], mode=mode)
    elif kind == "tile" and (axis := b.axis(s)) is not None:
        times = int(rng.integers(1, 4))
        repeats = [times if i == axis else 1 for i in range(len(s))]
        b.node("Tile", [x, b.ints(repeats, "repeats")],
               [tuple(d * times if i == axis else d for i, d in enumerate(s))])
    elif kind == "gather" and (axis := b.axis(s, lambda d: d >= 1)) is not None:
        count = int(rng.integers(1, 5))
        picks = rng.integers(-s[axis], s[axis], count)  # negative indices count from the end
        b.node("Gather", [x, b.const(picks.astype(int64), "idx")],
               [(*s[:axis], count, *s[axis + 1:])], axis=axis)
    elif kind == "resize" and len(s) == 4:
        mode = str(rng.choice(["nearest", "linear", "cubic"]))
        factor = float(rng.choice([0.5, 2.0, 1.5]))
        out = (s[0], s[1], int(s[2] * factor), int(s[3] * factor))
        if min(out[2:]) >= 1:
            b.node("Resize", [x, "", b.const(np.array([1, 1, factor, factor], np.float32),
                                             "scales")], [out], mode=mode)
    elif kind == "argmax" and (axis := b.axis(s, lambda d: d >= 1)) is not None:
        out = tuple(1 if i == axis else d for i, d in enumerate(s))
        (index,) = b.node(str(rng.choice(["ArgMax", "ArgMin"])), [x], [out], pickable=False,
                          axis=axis, keepdims=1)
        b.node("Cast", [index], [out], to=b.elem)


def _outputs(b: _Builder, kind: str, x: str, s: tuple[int, ...]) -> None:
    """Ops with several outputs, some left out ("" in the middle) or of another dtype; and
    constants made by nodes (Constant, ConstantOfShape of a run-time shape)."""
    rng = b.rng
    if kind == "topk" and (axis := b.axis(s, lambda d: d >= 1)) is not None:
        k = int(rng.integers(1, s[axis] + 1))
        out = tuple(k if i == axis else d for i, d in enumerate(s))
        _, index = b.node("TopK", [x, b.ints([k], "k")], [out, out], axis=axis,
                          largest=int(rng.integers(0, 2)))
        b.values.pop(index)  # int64
        b.node("Cast", [index], [out], to=b.elem)
    elif kind == "pool_indices" and len(s) == 4 and min(s[2:]) >= 2:
        n, c, h, w = s
        out = (n, c, h - 1, w - 1)
        _, index = b.node("MaxPool", [x], [out, out], kernel_shape=[2, 2])
        b.values.pop(index)  # int64
        b.node("Cast", [index], [out], to=b.elem)
    elif kind == "rnn" and len(s) == 3 and s[2] <= 256:
        t, n, size = s  # layout 0: [seq, batch, input]; with --dynamic the seq length varies
        hidden = b.dim(1, 6)
        op = str(rng.choice(["GRU", "LSTM", "RNN"]))
        gates = {"GRU": 3, "LSTM": 4, "RNN": 1}[op]
        operands = [x, b.weight(1, gates * hidden, size), b.weight(1, gates * hidden, hidden)]
        if rng.random() < 0.7:
            operands.append(b.weight(1, 2 * gates * hidden))
        shapes = [(t, 1, n, hidden), (1, n, hidden)] + ([(1, n, hidden)] if op == "LSTM" else [])
        omit = [int(rng.integers(0, len(shapes)))] if rng.random() < 0.5 else []
        outputs = b.node(op, operands, shapes, pickable=False, omit=omit, hidden_size=hidden)
        for name, shape in zip(outputs, shapes, strict=True):
            if name and (shape[0] == t or not b.lo):  # Y_h, Y_c have no seq axis
                b.values[name] = shape
    elif kind == "dropout":  # inference: Y = X, the mask all true
        _, mask = b.node("Dropout", [x, b.const(np.float32(0.3)), b.const(np.array(False))],
                         [s, s])
        b.values.pop(mask)  # bool
        b.node("Cast", [mask], [s], to=b.elem)
    elif kind == "constant" and s:
        value = numpy_helper.from_array(rng.standard_normal(s[b.lo:]).astype(b.dtype),
                                        b.fresh("k"))
        (k,) = b.node("Constant", [], [s[b.lo:]], pickable=False, value=value)
        (shape,) = b.node("Shape", [x], [(len(s),)], pickable=False)
        fill = numpy_helper.from_array(np.array([rng.normal()], b.dtype), b.fresh("fill"))
        (filled,) = b.node("ConstantOfShape", [shape], [s], pickable=False, value=fill)
        (y,) = b.node("Mul", [x, k], [s])
        b.node("Add", [y, filled], [s])


def _info(b: _Builder, name: str, shape: tuple[int, ...]) -> onnx.ValueInfoProto:
    """A value's declaration (the model's float type): with --dynamic its first dim
    symbolic."""
    dims = (f"{name}_batch", *shape[1:]) if b.lo and shape else shape
    return helper.make_tensor_value_info(name, b.elem, dims)


def _control(b: _Builder, kind: str, x: str, s: tuple[int, ...]) -> None:
    """If and Loop whose bodies read outer values (captures, which must stay alive and
    unchanged until the node runs); a sequence or an optional holding values, read back after
    every other step; a round trip through float16 or float64."""
    rng, other = b.rng, b.pick(lambda t: t == s) or x
    if kind == "if":
        (top,) = b.node("ReduceMax", [x], [()], pickable=False, keepdims=0)
        (cond,) = b.node("Greater", [top, b.scalar(rng.normal())], [()],
                         pickable=False)
        then_out, else_out = b.fresh("t"), b.fresh("e")
        then_branch = helper.make_graph(
            [helper.make_node("Add", [x, other], [then_out])], b.fresh("then"), [],
            [_info(b, then_out, s)])
        else_branch = helper.make_graph(
            [helper.make_node("Mul", [other, b.scalar(rng.normal())], [else_out])],
            b.fresh("else"), [], [_info(b, else_out, s)])
        b.node("If", [cond], [s], then_branch=then_branch, else_branch=else_branch)
    elif kind == "loop":
        trips = int(rng.integers(0, 4))
        i, keep, v = b.fresh("i"), b.fresh("cond"), b.fresh("carried")
        keep_out, index, total, v_out, scan = (b.fresh(p) for p in (
            "cond", "index", "sum", "carried", "scan"))
        nodes = [helper.make_node("Identity", [keep], [keep_out]),  # v' = (v + other) * i
                 helper.make_node("Cast", [i], [index], to=b.elem),
                 helper.make_node("Add", [v, other], [total]),
                 helper.make_node("Mul", [total, index], [v_out])]
        outputs = [helper.make_tensor_value_info(keep_out, TensorProto.BOOL, []),
                   _info(b, v_out, s)]
        if not b.lo:  # a scan output stacks [trips, *s]: axis 0 is no batch
            nodes.append(helper.make_node("Identity", [total], [scan]))
            outputs.append(_info(b, scan, s))
        body = helper.make_graph(
            nodes, b.fresh("body"),
            [helper.make_tensor_value_info(i, TensorProto.INT64, []),
             helper.make_tensor_value_info(keep, TensorProto.BOOL, []), _info(b, v, s)],
            outputs)
        shapes = [s] if b.lo else [s, (trips, *s)]
        b.node("Loop", [b.const(np.array(trips, np.int64), "trips"),
                        b.const(np.array(True), "true"), x], shapes, body=body)
    elif kind == "sequence":  # read back after the steps still to come (bytes reused)
        (seq,) = b.node("SequenceConstruct", [x, other], [()], pickable=False)
        if rng.random() < 0.5:
            where = b.const(np.array(int(rng.integers(-2, 3)), np.int64), "at")
            (seq,) = b.node("SequenceInsert", [seq, other, where], [()], pickable=False)
        at = b.const(np.array(int(rng.integers(-2, 2)), np.int64), "at")
        b.later.append(lambda: b.node("SequenceAt", [seq, at], [s]))
    elif kind == "optional":
        (held,) = b.node("Optional", [x], [()], pickable=False)
        b.later.append(lambda: b.node("OptionalGetElement", [held], [s]))
    elif kind == "cast":
        # float16 only where the check is exact: rounding to it turns another order's 1e-7
        # into a float16 ulp, which a later LayerNormalization scales up without bound
        elem = int(rng.choice([TensorProto.FLOAT16, TensorProto.DOUBLE])) if b.exact else \
            TensorProto.DOUBLE
        (y,) = b.node("Cast", [x], [s], pickable=False, to=elem)
        op = str(rng.choice(["Relu", "Sigmoid", "Add", "Mul", "Softmax"]))
        (y,) = b.node(op, [y, y] if op in ("Add", "Mul") else [y], [s], pickable=False)
        b.node("Cast", [y], [s], to=b.elem)


def draw(seed: int, *, dynamic: bool = False, scale: int = 1, exact: bool = True,
         dtype: str = "float32", special: bool = False) -> Drawn:
    """The seed's model; ``dynamic``: a symbolic batch dim; ``scale`` multiplies the drawn
    sizes (channels, widths) to reach the kernels' larger-shape paths; ``dtype`` is the
    model's float type (inputs, weights, most values). ``exact=False`` (for a
    comparison within a tolerance) keeps every Div's divisor 0.5 or more away from 0 (through
    Abs and Add) and round trips through float64 only, never float16: near 0 a division, and a
    rounding to float16 anywhere, turn the float32 rounding of a value computed in another
    order into any error at all. Its ``special`` inputs are never huge: where float32
    arithmetic overflows (a variance of values near 1e37), a backend that computes in float64
    gives another answer than the reference, which computes in the precision the spec names."""
    rng = np.random.default_rng(seed)
    b = _Builder(rng, dynamic, scale, exact, dtype)
    shapes = [(2, 3, 4), (3, 4), (4,), (1, 3, 4), (2, 1, 4), (6,)] if not dynamic else \
        [(2, 3, 4), (2, 4), (2, 1, 4), (2, 6)]
    for _ in range(int(rng.integers(1, 4))):
        shape = shapes[int(rng.integers(0, len(shapes)))]
        b.add_input((shape[0], *(d * scale for d in shape[1:])) if dynamic else
                    tuple(d * scale if d > 1 else d for d in shape))
    steps = int(rng.integers(3, 25))
    while len(b.nodes) < steps:
        kind = str(rng.choice(STEPS))
        if kind in ("conv", "pool", "batchnorm"):
            x = b.pick(lambda t: len(t) == 4) or \
                b.add_input((1, b.dim(1, 5), b.dim(3, 9), b.dim(3, 9)))
        else:
            x = b.pick()
        s = b.values[x]
        for family in (_elementwise, _layout, _compute, _control, _shaped, _outputs):
            family(b, kind, x, s)
    for read in b.later:
        read()
    made = [o for node in b.nodes for o in node.output if o in b.values]
    outputs = {made[-1], *(made[int(rng.integers(0, len(made)))]
                           for _ in range(rng.integers(0, 4)))}
    if rng.random() < 0.1:
        outputs.add(next(iter(b.inputs)))  # a graph input as an output
    order = list(b.inputs) + made
    ordered = sorted(outputs, key=order.index)

    def info(name: str, shape: tuple[int, ...] | None) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, b.elem, shape)

    graph = helper.make_graph(
        b.nodes, f"fuzz{seed}",
        [info(n, ("N", *s[1:]) if dynamic else s) for n, s in b.inputs.items()],
        [info(n, (f"{n}_batch", *b.values[n][1:]) if dynamic else b.values[n])
         for n in ordered],
        initializer=b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return Drawn(model, b.inputs, ordered, seed, dtype, special, huge=exact)


def interpret(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every value of the model, node by node through the references, each a new C-contiguous
    array (the oracle: nothing planned, nothing shared)."""
    values = {k: np.array(v, order="C") for k, v in feeds.items()}
    values.update({t.name: numpy_helper.to_array(t) for t in model.graph.initializer})
    with np.errstate(all="ignore"):
        _run_nodes(model.graph.node, values)
    return values


def _run_nodes(nodes: Sequence[onnx.NodeProto], values: dict[str, np.ndarray]) -> None:
    """Run ``nodes`` in order, adding their outputs to ``values`` (If and Loop run their
    bodies here, on a copy of the enclosing values: the outer scope)."""
    for proto in nodes:
        inputs = [values[i] if i else None for i in proto.input]  # "": an omitted input
        attrs = {a.name: helper.get_attribute_value(a) for a in proto.attribute}
        attrs = {k: v.decode() if isinstance(v, bytes) else numpy_helper.to_array(v)
                 if isinstance(v, onnx.TensorProto) else v for k, v in attrs.items()}
        if proto.op_type == "If":
            branch = attrs["then_branch" if bool(inputs[0]) else "else_branch"]
            result = tuple(_run_body(branch, values, []))
        elif proto.op_type == "Loop":
            trips, carried, scans = int(inputs[0]), inputs[2:], []
            for i in range(trips):
                outs = _run_body(attrs["body"], values, [np.array(i, np.int64),
                                                         np.array(True), *carried])
                carried = outs[1:1 + len(carried)]
                scans.append(outs[1 + len(carried):])
            stacked = [np.stack([s[k] for s in scans]) if scans else
                       np.zeros((0, *carried[0].shape), carried[0].dtype)
                       for k in range(len(proto.output) - len(carried))]
            result = (*carried, *stacked)
        else:
            opdef = REGISTRY.resolve("", proto.op_type, OPSET)
            node = Node(name=proto.name, op=proto.op_type, domain="", inputs=tuple(proto.input),
                        outputs=tuple(proto.output))
            ctx = OpContext(node, OPSET) if opdef.takes_context else None
            result = opdef(*inputs, ctx=ctx, **attrs)
        for name, value in zip(proto.output, result if isinstance(result, tuple)
                               else (result,), strict=False):
            is_tensor = isinstance(value, np.ndarray | np.generic)
            values[name] = np.array(value, order="C") if is_tensor else value  # or a list


def _run_body(graph: onnx.GraphProto, outer: dict[str, np.ndarray],
              inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    scope = {**outer, **{v.name: x for v, x in zip(graph.input, inputs, strict=True)}}
    _run_nodes(graph.node, scope)
    return [scope[v.name] for v in graph.output]


def differs(got: np.ndarray, want: np.ndarray, tolerance: float | None) -> str:
    """Why ``got`` is not ``want`` ('' when it is): bit for bit (NaN where NaN, the sign of
    zero too) when ``tolerance`` is None, else ``refmnn compare``'s rule with ``atol`` the
    tolerance (at least two of a float dtype's epsilons: float16's ulp) and no ``rtol``:
    ``|got - want| <= atol * max(1, max|want|)``, Inf and NaN at the same places, non-floats
    equal."""
    got, want = np.asarray(got), np.asarray(want)
    if tolerance is not None:
        if want.dtype.kind == "f":
            tolerance = max(tolerance, 2 * float(np.finfo(want.dtype).eps))
        diff = compare_arrays(got, want, Tolerance(atol=tolerance, rtol=0.0))
        return "" if diff.status == OK else f"{diff.detail} (max error {diff.max_abs:.3g})"
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype}{list(got.shape)} where {want.dtype}{list(want.shape)}"
    number = ~np.isnan(want) if want.dtype.kind in "fc" else np.ones(want.shape, bool)
    same = np.array_equal(got, want, equal_nan=want.dtype.kind in "fc") and \
        np.array_equal(np.signbit(got[number]), np.signbit(want[number]))  # -0.0 too
    return "" if same else f"{int((got != want).sum())} of {want.size} elements differ"


def check(drawn: Drawn, backend: str = "reference", tolerance: float | None = None,
          dynamic: bool = False, **options: bool) -> list[str]:
    """The findings of one drawn model on ``backend`` (a comma-separated preference order;
    ``options``: the Session's ``arena`` and ``optimize``), see the module docstring."""
    session = refmnn.Session(drawn.model, backends=tuple(backend.split(",")), **options)
    findings: list[str] = []
    for batch in BATCHES if dynamic else (None,):
        feeds = drawn.feeds(batch)
        want = interpret(drawn.model, feeds)
        for label, intermediates in (("run", False), ("intermediates", True), ("again", False)):
            if label == "again":  # the same shapes, other values: nothing may be stale
                feeds = drawn.feeds(batch, again=True)
                want = interpret(drawn.model, feeds)
            with np.errstate(all="ignore"):
                got = session.run({k: v.copy() for k, v in feeds.items()},
                                  intermediates=intermediates)
            for name in got if intermediates else drawn.outputs:
                if name in want and (why := differs(got[name], want[name], tolerance)):
                    findings.append(f"batch {batch}, {label}: {name}: {why}")
    return findings


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:200", help="START:STOP")
    parser.add_argument("--backend", default="reference",
                        help="a backend, or a comma-separated preference order")
    parser.add_argument("--no-arena", action="store_true", help="Session(arena=False)")
    parser.add_argument("--optimize", action="store_true",
                        help="Session(optimize=True): the fusion passes on any backend")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE,
                        help="off the reference backend: of each output's largest magnitude")
    parser.add_argument("--dynamic", action="store_true", help="a symbolic batch dim")
    parser.add_argument("--scale", type=int, default=1, help="multiply the drawn sizes")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16", "float64"),
                        help="the models' float type")
    parser.add_argument("--special", action="store_true",
                        help="a tenth of the input elements NaN, +-inf, +-0, tiny or huge")
    parser.add_argument("--show", action="store_true", help="print each model")
    args = parser.parse_args(argv)
    start, stop = (int(v) for v in args.seeds.split(":"))
    # exact only on the reference as written (its fused Gelu rounds once, not per step)
    exact = args.backend == "reference" and not args.optimize
    tolerance = None if exact else args.tolerance
    options = {"arena": not args.no_arena, "optimize": True if args.optimize else None}
    found = 0
    for seed in range(start, stop):
        drawn = draw(seed, dynamic=args.dynamic, scale=args.scale, exact=tolerance is None,
                     dtype=args.dtype, special=args.special)
        if args.show:  # the graph without the initializers' values
            graph = onnx.GraphProto()
            graph.CopyFrom(drawn.model.graph)
            for t in graph.initializer:
                t.ClearField("raw_data")
            print(onnx.printer.to_text(graph))
        try:
            findings = check(drawn, args.backend, tolerance, args.dynamic, **options)
        except Exception as exc:  # any exception on a valid model is a finding
            findings = [f"ERROR {type(exc).__name__}: {str(exc)[:400]}"]
        if findings:
            found += 1
            kind = "ERROR" if findings[0].startswith("ERROR") else "MISMATCH"
            print(f"seed {seed}: {kind} ({len(drawn.model.graph.node)} nodes): "
                  + "; ".join(findings[:4]))
    print(f"{stop - start} {args.dtype} models on {args.backend}"
          f"{' (dynamic)' if args.dynamic else ''}, scale {args.scale}: {found} with findings")
    return int(found > 0)


if __name__ == "__main__":
    sys.exit(main())
