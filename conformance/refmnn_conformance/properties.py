"""Property-based samples: hypothesis strategies of random shapes, broadcasts and attributes.

The fixed samples of ``cases/`` pin down the edge cases someone thought of; the properties here
draw many more (random broadcast pairs, axes subsets, permutations, factorisations, slices,
convolution and pooling geometries) and check that a backend conforms to the reference on every
one, judged exactly like a fixed sample (:func:`refmnn_conformance.runner.check_value`).

A hypothesis example is an :class:`Example`: the few numbers that define a sample (shapes,
attributes, value domains) and the ``seed`` of its data. Its repr is what hypothesis prints as
the falsifying example, and it evaluates back to itself, so a failure is reproduced with::

    from refmnn.dtypes import DType
    from refmnn_conformance.properties import PROPERTIES, Example
    from refmnn_conformance.runner import check_value

    prop = PROPERTIES["Add"]
    sample = prop.sample(DType.float32, Example(shapes=((2, 1), (3,)), domains=("any", "any"), seed=0))
    check_value(prop.case, DType.float32, sample, "acme")

Each property runs under :data:`SETTINGS`: derandomized (the same examples on every run and
machine), no example database, no deadline, a fixed number of examples.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from refmnn.dtypes import DType

from refmnn_conformance.case import Domain, OpCase, Sample, SampleContext

SETTINGS = settings(derandomize=True, database=None, deadline=None, max_examples=20,
                    report_multiple_bugs=False, print_blob=False,
                    phases=(Phase.explicit, Phase.generate, Phase.shrink),
                    suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large))
"""The hypothesis profile of every property (``max_examples`` is the property's own): no example
database and no ``reuse``/``explain`` phases, so a run depends on nothing but the code."""

F32, F16, I32, I8 = DType.float32, DType.float16, DType.int32, DType.int8
SIDES = (1, 2, 3, 4, 5, 3, 2, 4, 1, 0)
"""Dimension sizes: mostly 1-5, a zero-size dimension one time in ten (shrinks toward 1)."""
BIG = (2**63 - 1, -(2**63), 2**31 - 1, -(2**31))
"""Out-of-range Slice bounds (clamped by the spec; INT64 extremes mean "to the end")."""


class Example:
    """The parameters of one drawn sample; ``repr`` evaluates back to an equal Example."""

    def __init__(self, seed: int = 0, **params: Any) -> None:
        self.seed = seed
        self.params = params

    def __repr__(self) -> str:
        args = [f"{k}={v!r}" for k, v in self.params.items()] + [f"seed={self.seed}"]
        return f"Example({', '.join(args)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Example) and (self.seed, self.params) == (other.seed, other.params)

    __hash__ = None  # type: ignore[assignment]


# ---------------------------------------------------------------------------------------------
# building blocks

seeds = st.integers(0, 2**16)


def shapes(min_dims: int = 0, max_dims: int = 4, zero: bool = True) -> st.SearchStrategy[tuple[int, ...]]:
    sides = st.sampled_from(SIDES if zero else SIDES[:-1])
    return st.lists(sides, min_size=min_dims, max_size=max_dims).map(tuple)


@st.composite
def broadcast_shapes(draw: Any, count: int, max_dims: int = 4,
                     zero: bool = True) -> tuple[tuple[int, ...], ...]:
    """``count`` shapes that broadcast together: a result shape, then per operand some leading
    dimensions dropped and some of the others replaced by 1."""
    result = draw(shapes(0, max_dims, zero))
    operands = []
    for _ in range(count):
        dims = result[draw(st.integers(0, len(result))):]
        ones = draw(st.lists(st.booleans(), min_size=len(dims), max_size=len(dims)))
        operands.append(tuple(1 if one else d for d, one in zip(dims, ones, strict=True)))
    return tuple(operands)


@st.composite
def axis_of(draw: Any, rank: int) -> int:
    """An axis of a rank-``rank`` tensor, negative half of the time."""
    axis = draw(st.integers(0, rank - 1))
    return axis - rank if draw(st.booleans()) else axis


def make(ctx: SampleContext, shape: tuple[int, ...], domain: str = "any", dtype: Any = None) -> np.ndarray:
    """``ctx.make`` plus "nonnegative" (|N(0,1)| with exact zeros mixed in)."""
    if domain == "nonnegative":
        data = np.abs(ctx.make(shape, Domain.ANY, dtype).astype(np.float32))
        return np.where(data < 0.2, np.float32(0), data).astype(ctx.dtype if dtype is None else dtype)
    return ctx.make(shape, Domain(domain), dtype)


def _i64(values: Any) -> np.ndarray:
    return np.array(values, dtype=np.int64).reshape(-1)


def _float(dtype: DType) -> bool:
    return dtype.is_float


# ---------------------------------------------------------------------------------------------
# elementwise


def binary_examples(count: int | tuple[int, int], floats: tuple[tuple[str, ...], ...],
                    ints: tuple[tuple[str, ...], ...]) -> Callable[[DType], st.SearchStrategy]:
    """Examples of a broadcasting op: ``count`` operands (or a range); per operand the value
    domains allowed for float and for integer dtypes."""

    def examples(dtype: DType) -> st.SearchStrategy:
        @st.composite
        def draw_example(draw: Any) -> Example:
            n = draw(st.integers(*count)) if isinstance(count, tuple) else count
            operand_shapes = draw(broadcast_shapes(n))
            allowed = floats if _float(dtype) else ints
            domains = tuple(draw(st.sampled_from(allowed[min(i, len(allowed) - 1)])) for i in range(n))
            return Example(shapes=operand_shapes, domains=domains, seed=draw(seeds))

        return draw_example()

    return examples


def build_elementwise(ctx: SampleContext, shapes: tuple, domains: tuple) -> Sample:
    return Sample(tuple(make(ctx, s, d) for s, d in zip(shapes, domains, strict=True)))


@st.composite
def _where_example(draw: Any, dtype: DType) -> Example:
    cond, x, y = draw(broadcast_shapes(3))
    domain = st.sampled_from(("any", "extremal") if _float(dtype) else ("any",))
    return Example(shapes=(cond, x, y), domains=("bool", draw(domain), draw(domain)), seed=draw(seeds))


def build_where(ctx: SampleContext, shapes: tuple, domains: tuple) -> Sample:
    cond = ctx.make(shapes[0], dtype=DType.bool)
    return Sample((cond, make(ctx, shapes[1], domains[1]), make(ctx, shapes[2], domains[2])))


def unary_examples(floats: tuple[str, ...], ints: tuple[str, ...] = ("any",)) -> Callable:
    def examples(dtype: DType) -> st.SearchStrategy:
        @st.composite
        def draw_example(draw: Any) -> Example:
            domain = draw(st.sampled_from(floats if _float(dtype) else ints))
            return Example(shape=draw(shapes(0, 4)), domain=domain, seed=draw(seeds))

        return draw_example()

    return examples


def build_unary(ctx: SampleContext, shape: tuple, domain: str) -> Sample:
    return Sample((make(ctx, shape, domain),))


# ---------------------------------------------------------------------------------------------
# reductions, softmax


def reduce_examples(dtype: DType) -> st.SearchStrategy:
    @st.composite
    def draw_example(draw: Any) -> Example:
        shape = draw(shapes(1, 4, zero=False))
        rank = len(shape)
        axes = None
        if draw(st.integers(0, 5)):  # one time in six: the axes input omitted
            chosen = draw(st.lists(st.integers(0, rank - 1), unique=True, max_size=rank))
            axes = tuple(a - rank if draw(st.booleans()) else a for a in chosen)
        domain = draw(st.sampled_from(("any", "extremal") if _float(dtype) else ("any",)))
        return Example(shape=shape, axes=axes, keepdims=draw(st.integers(0, 1)),
                       noop_with_empty_axes=draw(st.integers(0, 1)), domain=domain, seed=draw(seeds))

    return draw_example()


def build_reduce(ctx: SampleContext, shape: tuple, axes: tuple | None, keepdims: int,
                 noop_with_empty_axes: int, domain: str) -> Sample:
    x = make(ctx, shape, domain)
    inputs = (x,) if axes is None else (x, _i64(axes))
    return Sample(inputs, {"keepdims": keepdims, "noop_with_empty_axes": noop_with_empty_axes})


def softmax_examples(dtype: DType) -> st.SearchStrategy:
    @st.composite
    def draw_example(draw: Any) -> Example:
        shape = draw(shapes(1, 4))
        return Example(shape=shape, axis=draw(axis_of(len(shape))),
                       domain=draw(st.sampled_from(("any", "unit", "extremal"))), seed=draw(seeds))

    return draw_example()


def build_softmax(ctx: SampleContext, shape: tuple, axis: int, domain: str) -> Sample:
    return Sample((make(ctx, shape, domain),), {"axis": axis})


def _softmax_row(sample: Sample) -> int:
    x = sample.inputs[0]
    return x.shape[sample.attrs.get("axis", -1)] if x.ndim else 1


# ---------------------------------------------------------------------------------------------
# movement and indexing


def transpose_examples(dtype: DType) -> st.SearchStrategy:
    @st.composite
    def draw_example(draw: Any) -> Example:
        shape = draw(shapes(0, 5))
        perm = draw(st.one_of(st.none(), st.permutations(range(len(shape))).map(tuple)))
        return Example(shape=shape, perm=perm, seed=draw(seeds))

    return draw_example()


def build_transpose(ctx: SampleContext, shape: tuple, perm: tuple | None) -> Sample:
    return Sample((make(ctx, shape),), {} if perm is None else {"perm": perm})


def _prime_factors(n: int) -> list[int]:
    factors, p = [], 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    return factors


def reshape_examples(dtype: DType) -> st.SearchStrategy:
    """A random factorisation of the input's size, with -1 for one dimension and 0 ("copy the
    input's dimension", allowzero=0) where it means the same; zero-size inputs use allowzero=1."""

    @st.composite
    def draw_example(draw: Any) -> Example:
        shape = draw(shapes(0, 4))
        size = math.prod(shape)
        if size == 0:
            rank = draw(st.integers(1, 4))
            target = draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
            target[draw(st.integers(0, rank - 1))] = 0
            return Example(shape=shape, target=tuple(target), allowzero=1, seed=draw(seeds))
        rank = draw(st.integers(0 if size == 1 else 1, 4))
        target = [1] * rank
        for factor in _prime_factors(size):
            target[draw(st.integers(0, rank - 1))] *= factor
        if rank and draw(st.booleans()):
            target[draw(st.integers(0, rank - 1))] = -1
        allowzero = draw(st.integers(0, 1))
        if not allowzero:
            for i in range(min(rank, len(shape))):
                if target[i] == shape[i] and draw(st.booleans()):
                    target[i] = 0
        return Example(shape=shape, target=tuple(target), allowzero=allowzero, seed=draw(seeds))

    return draw_example()


def build_reshape(ctx: SampleContext, shape: tuple, target: tuple, allowzero: int) -> Sample:
    return Sample((make(ctx, shape), _i64(target)), {"allowzero": allowzero})


def concat_examples(dtype: DType) -> st.SearchStrategy:
    @st.composite
    def draw_example(draw: Any) -> Example:
        base = draw(shapes(1, 4))
        sizes = draw(st.lists(st.sampled_from(SIDES), min_size=1, max_size=4))
        return Example(shape=base, axis=draw(axis_of(len(base))), sizes=tuple(sizes), seed=draw(seeds))

    return draw_example()


def build_concat(ctx: SampleContext, shape: tuple, axis: int, sizes: tuple) -> Sample:
    pieces = []
    for size in sizes:
        piece = list(shape)
        piece[axis] = size
        pieces.append(make(ctx, tuple(piece)))
    return Sample(tuple(pieces), {"axis": axis})


def slice_examples(dtype: DType) -> st.SearchStrategy:
    """Random starts/ends (in range, out of range, negative, INT64 extremes), steps of either
    sign, axes given (some negative, any order) or omitted, steps given or omitted."""

    @st.composite
    def draw_example(draw: Any) -> Example:
        shape = draw(shapes(1, 4, zero=True))
        rank = len(shape)
        count = draw(st.integers(1, rank))
        axes = None
        if draw(st.booleans()):
            chosen = draw(st.permutations(range(rank)))[:count]
            axes = tuple(a - rank if draw(st.booleans()) else a for a in chosen)
        steps = None
        if draw(st.booleans()):
            steps = tuple(draw(st.sampled_from((1, -1, 2, -2, 3, -3))) for _ in range(count))
        starts, ends = [], []
        for i in range(count):
            d = shape[axes[i] if axes is not None else i]
            bound = st.one_of(st.integers(-d - 2, d + 2), st.sampled_from(BIG))
            starts.append(draw(bound))
            ends.append(draw(bound))
        return Example(shape=shape, starts=tuple(starts), ends=tuple(ends), axes=axes, steps=steps,
                       seed=draw(seeds))

    return draw_example()


def build_slice(ctx: SampleContext, shape: tuple, starts: tuple, ends: tuple, axes: tuple | None,
                steps: tuple | None) -> Sample:
    inputs: list[np.ndarray | None] = [make(ctx, shape), _i64(starts), _i64(ends)]
    if axes is not None or steps is not None:
        inputs.append(None if axes is None else _i64(axes))
    if steps is not None:
        inputs.append(_i64(steps))
    return Sample(tuple(inputs))


def gather_examples(dtype: DType) -> st.SearchStrategy:
    @st.composite
    def draw_example(draw: Any) -> Example:
        shape = list(draw(shapes(1, 4)))
        axis = draw(axis_of(len(shape)))
        shape[axis] = max(1, shape[axis])  # indices in range need a non-empty axis
        return Example(shape=tuple(shape), axis=axis, indices=draw(shapes(0, 2)),
                       index_dtype=draw(st.sampled_from(("int64", "int32"))), seed=draw(seeds))

    return draw_example()


def build_gather(ctx: SampleContext, shape: tuple, axis: int, indices: tuple, index_dtype: str) -> Sample:
    d = shape[axis]
    index = ctx.rng.integers(-d, d, indices).astype(index_dtype)  # negative ones count from the end
    return Sample((make(ctx, shape), index), {"axis": axis})


# ---------------------------------------------------------------------------------------------
# MatMul, Conv, pools


def matmul_examples(dtype: DType) -> st.SearchStrategy:
    @st.composite
    def draw_example(draw: Any) -> Example:
        m, n = draw(st.integers(1, 5)), draw(st.integers(1, 5))
        k = draw(st.sampled_from((1, 2, 3, 4, 5, 8, 0)))
        batch_a, batch_b = draw(broadcast_shapes(2, max_dims=2))
        a = (k,) if draw(st.integers(0, 4)) == 0 else (*batch_a, m, k)
        b = (k,) if draw(st.integers(0, 4)) == 0 else (*batch_b, k, n)
        return Example(a=a, b=b, seed=draw(seeds))

    return draw_example()


def build_matmul(ctx: SampleContext, a: tuple, b: tuple) -> Sample:
    domain = "unit" if ctx.is_float else "small_int"
    return Sample((make(ctx, a, domain), make(ctx, b, domain)))


@st.composite
def _window(draw: Any, max_pad: int | None) -> tuple[int, int, int, int, int]:
    """(kernel, stride, dilation, pad_begin, pad_end); pads < kernel when ``max_pad`` is None."""
    kernel = draw(st.integers(1, 3))
    limit = kernel - 1 if max_pad is None else max_pad
    return (kernel, draw(st.integers(1, 3)), draw(st.integers(1, 2)),
            draw(st.integers(0, limit)), draw(st.integers(0, limit)))


def _input_size(draw: Any, kernel: int, dilation: int, pads: int, auto_pad: str = "NOTSET") -> int:
    """An input length whose output is non-empty."""
    effective = (kernel - 1) * dilation + 1
    low = {"NOTSET": effective - pads, "VALID": effective}.get(auto_pad, 1)
    low = max(1, low)
    return draw(st.integers(low, low + 4))


def conv_examples(rank: int) -> Callable[[DType], st.SearchStrategy]:
    def examples(dtype: DType) -> st.SearchStrategy:
        @st.composite
        def draw_example(draw: Any) -> Example:
            group = draw(st.integers(1, 3))
            channels, maps = group * draw(st.integers(1, 3)), group * draw(st.integers(1, 3))
            auto_pad = draw(st.sampled_from(("NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")))
            windows = [draw(_window(2)) for _ in range(rank)]
            sizes = [_input_size(draw, k, d, pb + pe, auto_pad) for k, s, d, pb, pe in windows]
            attrs: dict[str, Any] = {"strides": tuple(w[1] for w in windows),
                                     "dilations": tuple(w[2] for w in windows)}
            if group > 1:
                attrs["group"] = group
            if auto_pad == "NOTSET":
                attrs["pads"] = tuple(w[3] for w in windows) + tuple(w[4] for w in windows)
            else:
                attrs["auto_pad"] = auto_pad
            if draw(st.booleans()):
                attrs["kernel_shape"] = tuple(w[0] for w in windows)
            x = (draw(st.integers(1, 2)), channels, *sizes)
            w = (maps, channels // group, *(w[0] for w in windows))
            return Example(x=x, w=w, bias=draw(st.booleans()), attrs=attrs, seed=draw(seeds))

        return draw_example()

    return examples


def build_conv(ctx: SampleContext, x: tuple, w: tuple, bias: bool, attrs: dict) -> Sample:
    inputs = [make(ctx, x, "unit"), make(ctx, w, "unit")]
    if bias:
        inputs.append(make(ctx, (w[0],), "unit"))
    return Sample(tuple(inputs), attrs)


def pool_examples(op: str) -> Callable[[DType], st.SearchStrategy]:
    def examples(dtype: DType) -> st.SearchStrategy:
        @st.composite
        def draw_example(draw: Any) -> Example:
            rank = draw(st.integers(1, 2))
            windows = [draw(_window(None)) for _ in range(rank)]
            sizes = [_input_size(draw, k, d, pb + pe) for k, s, d, pb, pe in windows]
            attrs: dict[str, Any] = {"kernel_shape": tuple(w[0] for w in windows),
                                     "strides": tuple(w[1] for w in windows),
                                     "dilations": tuple(w[2] for w in windows),
                                     "pads": tuple(w[3] for w in windows) + tuple(w[4] for w in windows),
                                     "ceil_mode": draw(st.integers(0, 1))}
            outputs = 1
            if op == "AveragePool":
                attrs["count_include_pad"] = draw(st.integers(0, 1))
            elif draw(st.booleans()):
                outputs = 2  # with Indices
                attrs["storage_order"] = draw(st.integers(0, 1))
            x = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), *sizes)
            return Example(x=x, attrs=attrs, outputs=outputs, seed=draw(seeds))

        return draw_example()

    return examples


def build_pool(ctx: SampleContext, x: tuple, attrs: dict, outputs: int) -> Sample:
    return Sample((make(ctx, x),), attrs, outputs=outputs)


# ---------------------------------------------------------------------------------------------
# the table


def _no_samples(ctx: SampleContext) -> tuple[Sample, ...]:
    return ()


@dataclass(frozen=True)
class Property:
    """One property: ``op`` conforms on every example ``examples(dtype)`` draws.

    The case judging it is the op's fixed case from ``cases/`` when there is one (so its
    tolerance overrides and ``accumulates`` apply unchanged), else a case made here.
    """

    op: str
    dtypes: tuple[DType, ...]
    examples: Callable[[DType], st.SearchStrategy]
    build: Callable[..., Sample]
    variant: str = ""
    max_examples: int = 20
    accumulates: Callable[[Sample], int] | None = None

    @property
    def name(self) -> str:
        return self.op + (f".{self.variant}" if self.variant else "")

    @property
    def sample_name(self) -> str:
        """The ``sample`` of its test records (and of xfail entries): property[_variant]."""
        return "property" + (f"_{self.variant}" if self.variant else "")

    @cached_property
    def case(self) -> OpCase:
        from refmnn_conformance.cases import ALL_CASES

        for case in ALL_CASES:
            if case.op == self.op and case.opset is None and not case.variant and not case.domain:
                return case
        return OpCase(self.op, dtypes=self.dtypes, samples=_no_samples, accumulates=self.accumulates)

    @property
    def settings(self) -> settings:
        return settings(SETTINGS, max_examples=self.max_examples)

    def sample(self, dtype: DType, example: Example) -> Sample:
        """The sample an example stands for (its data drawn from ``example.seed``)."""
        ctx = SampleContext(f"property:{self.name}", dtype)
        ctx.seed, ctx.rng = example.seed, np.random.default_rng(example.seed)
        sample = self.build(ctx, **example.params)
        return Sample(sample.inputs, sample.attrs, name=self.sample_name, outputs=sample.outputs)


FLOAT_ANY = ("any", "extremal")
_BINARY = binary_examples(2, floats=(FLOAT_ANY,), ints=(("any",),))
_DIV = binary_examples(2, floats=(FLOAT_ANY, ("nonzero", "extremal")), ints=(("any",), ("nonzero",)))
_MINMAX = binary_examples((1, 3), floats=(FLOAT_ANY,), ints=(("any",),))
_POW = binary_examples(2, floats=(("positive",), ("unit", "any")), ints=(("positive",),))
_COMPARE = binary_examples(2, floats=(("small_int", "extremal"),), ints=(("small_int",),))
_UNARY = unary_examples(("any", "unit", "extremal"))

_LIST = (
    *(Property(op, (F32, F16, I32), _BINARY, build_elementwise) for op in ("Add", "Sub", "Mul")),
    Property("Div", (F32, F16, I32), _DIV, build_elementwise),
    *(Property(op, (F32, F16, I32), _MINMAX, build_elementwise) for op in ("Max", "Min")),
    Property("Pow", (F32, F16), _POW, build_elementwise),
    *(Property(op, (F32, F16, I32), _COMPARE, build_elementwise) for op in ("Equal", "Greater")),
    Property("Where", (F32, F16, I32), _where_example, build_where),
    *(Property(op, (F32, F16, I32), _UNARY, build_unary) for op in ("Relu", "Abs", "Neg")),
    *(Property(op, (F32, F16), _UNARY, build_unary) for op in ("Sigmoid", "Tanh", "Exp", "Erf")),
    Property("Sqrt", (F32, F16), unary_examples(("nonnegative", "positive")), build_unary),
    Property("Log", (F32, F16), unary_examples(("positive",)), build_unary),
    *(Property(op, (F32, F16, I32), reduce_examples, build_reduce, max_examples=30)
      for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin")),
    *(Property(op, (F32, F16), softmax_examples, build_softmax, accumulates=_softmax_row)
      for op in ("Softmax", "LogSoftmax")),
    Property("Transpose", (F32, F16, I32), transpose_examples, build_transpose),
    Property("Reshape", (F32, F16, I32), reshape_examples, build_reshape, max_examples=30),
    Property("Concat", (F32, F16, I32), concat_examples, build_concat),
    Property("Slice", (F32, I32), slice_examples, build_slice, max_examples=40),
    Property("Gather", (F32, I32), gather_examples, build_gather, max_examples=30),
    Property("MatMul", (F32, F16, I32), matmul_examples, build_matmul, max_examples=30),
    Property("Conv", (F32, F16), conv_examples(1), build_conv, variant="1d", max_examples=30),
    Property("Conv", (F32, F16), conv_examples(2), build_conv, variant="2d", max_examples=30),
    Property("MaxPool", (F32, F16, I8), pool_examples("MaxPool"), build_pool, max_examples=30),
    Property("AveragePool", (F32, F16), pool_examples("AveragePool"), build_pool, max_examples=30),
)

PROPERTIES: Mapping[str, Property] = MappingProxyType({p.name: p for p in _LIST})
"""Every property by name (``Op`` or ``Op.variant``), in a fixed order."""
