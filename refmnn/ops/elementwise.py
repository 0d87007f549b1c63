"""Elementwise arithmetic, math, comparison, logic and bitwise ops.

Conventions shared by every op here:

* Broadcasting is NumPy's (multidirectional) from opset 7; the opset-1/6 binary ops instead
  take ``broadcast``/``axis`` attributes and broadcast B onto A only (:func:`_legacy_b`).
* The output dtype is the (first) input's dtype; comparisons and logic give bool.
* Integers wrap around on overflow (two's complement), as NumPy does for arrays.
* float16 computes in NumPy's float16 loops (which round once per op); bfloat16 and the other
  ``ml_dtypes`` formats compute in float32 and round once (:func:`_in_compute`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import reduce
from typing import Any

import ml_dtypes
import numpy as np

from refmnn.dtypes import DType, compute_dtype, is_narrow
from refmnn.graph import TensorType
from refmnn.ops._infer import broadcast, broadcast_dims, dtype_of, same_as, shape_of
from refmnn.ops._erf import _erf, _erf_float32  # noqa: F401 (re-exported)
from refmnn.ops._schema import Attr, InferContext, OpDef, flag, into, op

# --------------------------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------------------------

CONSUMED = Attr("consumed_inputs", "ints", None, "legacy (opset < 6) optimisation hint; ignored")
_LEGACY_BCAST = (
    Attr("axis", "int", None, "first dim of A that B's dims align with (suffix match if absent)"),
    flag("broadcast", 0, "1: broadcast B onto A (legacy rule); 0: shapes must be equal"),
)


def with_consumed_inputs(opdef: OpDef, since: int = 1, attrs: tuple[Attr, ...] | None = None,
                         note: str = "") -> OpDef:
    """The opset-1 twin of ``opdef``: same meaning, plus the ignored ``consumed_inputs``
    attribute (and ``attrs`` replacing its attribute schema when the defaults differed)."""
    own = opdef.attrs if attrs is None else attrs
    target = opdef.reference

    def reference(*inputs: Any, consumed_inputs: Any = None, **kwargs: Any) -> Any:
        return target(*inputs, **kwargs)

    params = [inspect.Parameter("inputs", inspect.Parameter.VAR_POSITIONAL)]
    params += [inspect.Parameter(a.name, inspect.Parameter.KEYWORD_ONLY) for a in (CONSUMED, *own)]
    reference.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    reference.__name__ = f"{target.__name__}_{since}"
    reference.__doc__ = (f"{opdef.doc}\n\n{opdef.name}-{since}: as {opdef.name}-{opdef.since}; "
                         "the legacy ``consumed_inputs`` attribute is accepted and ignored. "
                         f"{note}")
    return op(opdef.name, since=since, inputs=[_port_text(p) for p in opdef.inputs],
              outputs=[_port_text(p) for p in opdef.outputs], attrs=(CONSUMED, *own),
              infer=opdef.infer)(reference)


def _port_text(port: Any) -> str:
    return port.name + ("..." if port.variadic else "?" if port.optional else "")


def _in_compute(fn: Callable[[np.ndarray], np.ndarray], X: np.ndarray) -> np.ndarray:
    """Apply a float function, computing narrow formats (bfloat16, float8, ...) in float32 and
    rounding once to X's dtype."""
    if is_narrow(X.dtype):
        return fn(X.astype(compute_dtype(X.dtype))).astype(X.dtype)
    return np.asarray(fn(X))


def _legacy_b(A: np.ndarray, B: np.ndarray, broadcast_: int, axis: int | None) -> np.ndarray:
    """The opset-1/6 broadcast: return B reshaped so NumPy broadcasting maps it onto A.

    With ``broadcast=0`` the shapes must be equal. With ``broadcast=1`` B is a scalar, a
    one-element tensor, or its shape is a contiguous run of A's shape starting at ``axis``
    (or ending at A's last dim when ``axis`` is absent).  B: [b...], A: [a...].
    """
    if not broadcast_:
        if A.shape != B.shape:
            raise ValueError(f"shapes {list(A.shape)} and {list(B.shape)} differ and the node has "
                             "broadcast=0 (legacy opset < 7 semantics)")
        return B
    if B.size == 1:
        return B.reshape(())
    start = A.ndim - B.ndim if axis is None else (axis + A.ndim if axis < 0 else axis)
    if start < 0 or start + B.ndim > A.ndim or any(
            b not in (1, a) for a, b in zip(A.shape[start:], B.shape, strict=False)):
        raise ValueError(f"legacy broadcast of B {list(B.shape)} onto A {list(A.shape)} at axis "
                         f"{start} is not possible")
    return B.reshape(B.shape + (1,) * (A.ndim - start - B.ndim))


def _legacy_rule(dtype: DType | None = None) -> Callable[..., TensorType]:
    """Shape rule of the legacy binary ops: A's shape (or NumPy broadcasting when broadcast=0
    and shapes match); dtype of A unless given."""

    def rule(ctx: InferContext, a: Any, b: Any, *, axis: int | None = None, broadcast: int = 0,
             **attrs: Any) -> TensorType:
        shape = shape_of(a) if broadcast else broadcast_dims(ctx, shape_of(a), shape_of(b))
        return TensorType(dtype if dtype is not None else dtype_of(a), shape)

    return rule


def _legacy_binary(name: str, modern: OpDef, dtype: DType | None = None,
                   since: tuple[int, ...] = (1, 6)) -> tuple[OpDef, ...]:
    """Opset-1 (with consumed_inputs where the schema had it) and opset-6 versions of a binary
    op, with the legacy ``broadcast``/``axis`` attributes, reusing ``modern``'s meaning."""
    fn = modern.reference
    defs = []
    for v in since:
        consumed = v == 1 and name in ("Add", "Sub", "Mul", "Div")

        def reference(A: np.ndarray, B: np.ndarray, *, axis: int | None, broadcast: int,
                      consumed_inputs: Any = None) -> np.ndarray:
            return fn(A, _legacy_b(A, B, broadcast, axis))

        attrs = (*_LEGACY_BCAST, CONSUMED) if consumed else _LEGACY_BCAST
        if not consumed:
            params = [p for k, p in inspect.signature(reference).parameters.items()
                      if k != "consumed_inputs"]
            reference.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        reference.__name__ = f"{fn.__name__}_{v}"
        reference.__doc__ = (
            f"{modern.doc}\n\n{name}-{v} (legacy broadcast): with ``broadcast=1`` B is "
            "broadcast onto A only: B is a scalar/one-element tensor, or B's shape equals the "
            "run of A's dims starting at ``axis`` (suffix-aligned when ``axis`` is absent); the "
            "result has A's shape. With ``broadcast=0`` the shapes must be equal."
            + (" ``consumed_inputs`` is accepted and ignored." if consumed else ""))
        defs.append(op(name, since=v, inputs=("A", "B"), outputs=("C",), attrs=attrs,
                       infer=_legacy_rule(dtype))(reference))
    return tuple(defs)


def _scalar(value: float, dtype: np.dtype) -> Any:
    """A Python number as a scalar of ``dtype`` (for NumPy expressions that keep the dtype)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.dtype(dtype).type(value)


# --------------------------------------------------------------------------------------------
# unary math
# --------------------------------------------------------------------------------------------


@op("Abs", since=6, inputs=("X",), outputs=("Y",), infer=same_as(0))
def abs_(X: np.ndarray) -> np.ndarray:
    """Y = |X|. Any numeric type; unsigned unchanged; the most negative signed integer wraps to
    itself (two's complement); abs(-0.0) = 0.0, abs(NaN) = NaN."""
    return np.abs(X)


@op("Neg", since=6, inputs=("X",), outputs=("Y",), infer=same_as(0))
def neg(X: np.ndarray) -> np.ndarray:
    """Y = -X. Signed integers and floats; the most negative integer wraps to itself."""
    return np.negative(X)


@op("Reciprocal", since=6, inputs=("X",), outputs=("Y",), infer=same_as(0))
def reciprocal(X: np.ndarray) -> np.ndarray:
    """Y = 1 / X, float; 1/(+-0) = +-inf."""
    with np.errstate(divide="ignore"):
        return _in_compute(lambda v: np.reciprocal(v), X)


@op("Sqrt", since=6, inputs=("X",), outputs=("Y",), infer=same_as(0))
def sqrt(X: np.ndarray) -> np.ndarray:
    """Y = sqrt(X), float; negative X gives NaN; sqrt(-0.0) = -0.0."""
    with np.errstate(invalid="ignore"):
        return _in_compute(np.sqrt, X)


@op("Exp", since=6, inputs=("X",), outputs=("Y",), infer=same_as(0))
def exp(X: np.ndarray) -> np.ndarray:
    """Y = e^X, float; overflows to inf."""
    with np.errstate(over="ignore"):
        return _in_compute(np.exp, X)


@op("Log", since=6, inputs=("X",), outputs=("Y",), infer=same_as(0))
def log(X: np.ndarray) -> np.ndarray:
    """Y = ln(X), float; log(0) = -inf, log(x < 0) = NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _in_compute(np.log, X)


@op("Ceil", since=6, inputs=("X",), outputs=("Y",), infer=same_as(0))
def ceil(X: np.ndarray) -> np.ndarray:
    """Y = smallest integer >= X, float; +-0, +-inf and NaN unchanged."""
    return _in_compute(np.ceil, X)


@op("Floor", since=6, inputs=("X",), outputs=("Y",), infer=same_as(0))
def floor(X: np.ndarray) -> np.ndarray:
    """Y = largest integer <= X, float; +-0, +-inf and NaN unchanged."""
    return _in_compute(np.floor, X)


@op("Tanh", since=6, inputs=("input",), outputs=("output",), infer=same_as(0))
def tanh(input: np.ndarray) -> np.ndarray:
    """output = tanh(input), float."""
    return _in_compute(np.tanh, input)


def _trig(name: str, since: int, fn: Callable[[np.ndarray], np.ndarray], formula: str) -> OpDef:
    def reference(input: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            return _in_compute(fn, input)

    reference.__name__ = name.lower()
    reference.__doc__ = (f"output = {formula}(input), elementwise, float. Outside the domain the "
                         "result is NaN (+-inf at a pole). float16 computes in NumPy's float16 "
                         "loop, bfloat16 in float32; one rounding.")
    return op(name, since=since, inputs=("input",), outputs=("output",),
              infer=same_as(0))(reference)


_TRIG = tuple(
    _trig(name, since, fn, formula)
    for name, since, fn, formula in (
        ("Sin", 7, np.sin, "sin"), ("Cos", 7, np.cos, "cos"), ("Tan", 7, np.tan, "tan"),
        ("Asin", 7, np.arcsin, "arcsin"), ("Acos", 7, np.arccos, "arccos"),
        ("Atan", 7, np.arctan, "arctan"), ("Sinh", 9, np.sinh, "sinh"),
        ("Cosh", 9, np.cosh, "cosh"), ("Asinh", 9, np.arcsinh, "arcsinh"),
        ("Acosh", 9, np.arccosh, "arccosh"), ("Atanh", 9, np.arctanh, "arctanh"),
    )
)


@op("Erf", since=9, inputs=("input",), outputs=("output",), infer=same_as(0),
    in_place=(0,))
def erf(input: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
    """output = erf(input) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt, elementwise.

    * float32: :func:`_erf_float32`, float64 arithmetic on a float32-specific rational fit,
      rounded once: within 0.52 ulp of the exact erf (99% correctly rounded, else 1 ulp off).
    * float64: :func:`_erf` (fdlibm), within 1 ulp.
    * float16, bfloat16: :func:`_erf` in float64, rounded once to the input type.
    * integers (Erf-9 allows them): float64 then truncation toward zero, as a Cast would:
      0 for |x| < 6 and +-1 beyond (where erf rounds to exactly +-1).

    erf(+-0) = +-0, erf(+-inf) = +-1, erf(NaN) = NaN. Speed (medians on a loaded, shared
    2-core machine): a (1, 197, 768) float32 tensor 0.7-0.8 ms, 1.8M float32 elements 9-19 ms,
    4.5-12x faster than the former all-fdlibm path (float64 path: 1.6-4.5x, blockwise).
    """
    if input.dtype == np.float32:
        return _erf_float32(input, into(out, input.shape, np.float32))
    result = _erf(input)
    if input.dtype.kind in "iu":
        return np.trunc(result).astype(input.dtype)
    return result.astype(input.dtype, copy=False)


@op("Round", since=11, inputs=("X",), outputs=("Y",), infer=same_as(0))
def round_(X: np.ndarray) -> np.ndarray:
    """Y = X rounded to the nearest integer, halves to even (2.5 -> 2, -4.5 -> -4); integral
    values, +-0, +-inf and NaN are returned unchanged. Float."""
    return _in_compute(np.round, X)


@op("Sign", since=9, inputs=("input",), outputs=("output",), infer=same_as(0))
def sign(input: np.ndarray) -> np.ndarray:
    """output = -1, 0 or 1 by the sign of input (any numeric type); sign(NaN) = NaN,
    sign(-0.0) = 0."""
    return _in_compute(np.sign, input)


@op("IsNaN", since=9, inputs=("X",), outputs=("Y",), infer=same_as(0, DType.bool))
def isnan(X: np.ndarray) -> np.ndarray:
    """Y = (X is NaN), bool. Float (float8 formats included)."""
    return np.isnan(X.astype(np.float32) if is_narrow(X.dtype) else X)


@op("IsInf", since=10, inputs=("X",), outputs=("Y",), infer=same_as(0, DType.bool),
    attrs=(flag("detect_negative", 1, "1: -inf maps to true"),
           flag("detect_positive", 1, "1: +inf maps to true")))
def isinf(X: np.ndarray, *, detect_negative: int, detect_positive: int) -> np.ndarray:
    """Y = (X == +inf and detect_positive) or (X == -inf and detect_negative), bool.
    NaN is never inf. Float (float8 formats included from opset 20)."""
    X = X.astype(np.float32) if is_narrow(X.dtype) else X
    if detect_negative and detect_positive:
        return np.isinf(X)
    if detect_positive:
        return np.isposinf(X)
    if detect_negative:
        return np.isneginf(X)
    return np.zeros(X.shape, dtype=np.bool_)


@op("Not", since=1, inputs=("X",), outputs=("Y",), infer=same_as(0))
def not_(X: np.ndarray) -> np.ndarray:
    """Y = logical not X, bool."""
    return np.logical_not(X)


# --------------------------------------------------------------------------------------------
# binary arithmetic
# --------------------------------------------------------------------------------------------


def _binary_out(out: np.ndarray | None, A: np.ndarray, B: np.ndarray) -> np.ndarray | None:
    """The planned buffer (``out``) when it is exactly C's broadcast shape and A's dtype (and B
    has that dtype too), else None: never a silent broadcast or cast into a wrong buffer."""
    if out is None or A.dtype != B.dtype:
        return None
    return into(out, np.broadcast(A, B).shape, A.dtype)  # (a C call; broadcast_shapes is slow)


@op("Add", since=7, inputs=("A", "B"), outputs=("C",), infer=broadcast(),
    in_place=(0, 1))
def add(A: np.ndarray, B: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
    """C = A + B with NumPy broadcasting; integers wrap around on overflow.
    A, B: same dtype, broadcastable shapes; C: the broadcast shape."""
    return np.add(A, B, out=_binary_out(out, A, B))


@op("Sub", since=7, inputs=("A", "B"), outputs=("C",), infer=broadcast(),
    in_place=(0, 1))
def sub(A: np.ndarray, B: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
    """C = A - B with NumPy broadcasting; integers wrap around on overflow."""
    return np.subtract(A, B, out=_binary_out(out, A, B))


@op("Mul", since=7, inputs=("A", "B"), outputs=("C",), infer=broadcast(),
    in_place=(0, 1))
def mul(A: np.ndarray, B: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
    """C = A * B with NumPy broadcasting; integers wrap around on overflow."""
    return np.multiply(A, B, out=_binary_out(out, A, B))


@op("Div", since=7, inputs=("A", "B"), outputs=("C",), infer=broadcast(),
    in_place=(0, 1))
def div(A: np.ndarray, B: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
    """C = A / B with NumPy broadcasting.

    Floats: IEEE division (x/0 = +-inf, 0/0 = NaN). Integers: the quotient truncated toward
    zero (C semantics: -7/2 = -3, not NumPy's floor -4); division by zero is undefined (0 here).
    """
    if A.dtype.kind in "iu":
        with np.errstate(divide="ignore", over="ignore"):
            q = np.floor_divide(A, B)
            if A.dtype.kind == "i":
                # floor and truncation differ when the division is inexact and the signs differ
                q += (np.remainder(A, B) != 0) & ((A < 0) != (B < 0))
        return q
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(A, B, out=_binary_out(out, A, B))


def _power(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    if X.dtype.kind in "iu" and Y.dtype.kind in "iu":
        # integer ** integer: exact, wrapping; a negative exponent gives trunc(1 / X^-n):
        # 1 for X = 1, +-1 for X = -1, 0 otherwise (X = 0: undefined; 0 here)
        Yc = np.maximum(Y, 0).astype(np.int64)
        result = np.power(X, Yc.astype(X.dtype) if X.dtype.kind == "u" else Yc).astype(X.dtype)
        negative = Y < 0
        if negative.any():
            tiny = np.where(X == 1, 1, np.where(X == -1, np.where(Y % 2 == 0, 1, -1), 0))
            result = np.where(negative, tiny.astype(X.dtype), result)
        return result
    if X.dtype == Y.dtype and not is_narrow(X.dtype):
        with np.errstate(all="ignore"):
            return np.power(X, Y)
    # mixed types: compute in float64 (or the float type) and round once to X's type
    wide = np.float64
    with np.errstate(all="ignore"):
        result = np.power(X.astype(wide, copy=False), Y.astype(wide, copy=False))
        if X.dtype.kind in "iu":
            return np.trunc(result).astype(X.dtype)
        return result.astype(X.dtype)


@op("Pow", since=7, inputs=("X", "Y"), outputs=("Z",), infer=broadcast(inputs=(0, 1)))
def pow_(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Z = X ** Y with NumPy broadcasting; Z has X's dtype.

    From opset 12 the exponent may have another numeric type (T1): mixed pairs compute in
    float64 and round once to X's type (an integer base truncates toward zero). integer **
    integer is exact with wrap-around; a negative integer exponent gives trunc(1 / X^|Y|).
    Floats follow C pow (0 ** -1 = inf, (-8) ** (1/3) = NaN, x ** 0 = 1).
    """
    return _power(X, Y)


@op("Mod", since=10, inputs=("A", "B"), outputs=("C",), infer=broadcast(),
    attrs=(flag("fmod", 0, "0: sign of the divisor (Python %); 1: sign of the dividend "
                "(C fmod)"),))
def mod(A: np.ndarray, B: np.ndarray, *, fmod: int) -> np.ndarray:
    """C = A mod B with NumPy broadcasting.

    fmod=0: A - floor(A / B) * B, the result has B's sign (Python ``%``). For floats (allowed
    with fmod=0 from opset 28): +-0 mod y = 0 with y's sign, inf mod y = NaN, x mod 0 = NaN,
    x mod +-inf = x when signs agree else +-inf (y).
    fmod=1: A - trunc(A / B) * B, the result has A's sign (C ``fmod``): inf mod y = NaN,
    x mod 0 = NaN, x mod inf = x. Integer division by zero is undefined (0 here).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        if is_narrow(A.dtype):
            fn = np.fmod if fmod else np.mod
            return fn(A.astype(np.float32), B.astype(np.float32)).astype(A.dtype)
        return np.fmod(A, B) if fmod else np.mod(A, B)


def _variadic_same_shape(name: str, inputs: tuple[np.ndarray, ...]) -> None:
    shapes = {x.shape for x in inputs}
    if len(shapes) > 1:
        raise ValueError(f"{name} before opset 8 needs inputs of one shape, got "
                         f"{[list(x.shape) for x in inputs]}")


@op("Max", since=8, inputs=("data_0...",), outputs=("max",), infer=broadcast())
def max_(*data_0: np.ndarray) -> np.ndarray:
    """max = elementwise maximum of all inputs, NumPy broadcasting; NaN propagates (if any
    input is NaN the result is NaN). Any numeric type from opset 12 (floats before)."""
    return reduce(np.maximum, data_0)


@op("Min", since=8, inputs=("data_0...",), outputs=("min",), infer=broadcast())
def min_(*data_0: np.ndarray) -> np.ndarray:
    """min = elementwise minimum of all inputs, NumPy broadcasting; NaN propagates."""
    return reduce(np.minimum, data_0)


@op("Sum", since=8, inputs=("data_0...",), outputs=("sum",), infer=broadcast())
def sum_(*data_0: np.ndarray) -> np.ndarray:
    """sum = data_0 + data_1 + ..., left to right, NumPy broadcasting. Float; float16 and
    bfloat16 accumulate in float32 and round once (as Mean: a float16 partial sum rounded at
    every step loses all of a cancelling total, 2048 + 1 + 1 -> 2048)."""
    dtype = data_0[0].dtype
    wide = np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    return reduce(np.add, (x.astype(wide, copy=False) for x in data_0)).astype(dtype, copy=False)


@op("Mean", since=8, inputs=("data_0...",), outputs=("mean",), infer=broadcast())
def mean(*data_0: np.ndarray) -> np.ndarray:
    """mean = (data_0 + ... + data_{n-1}) / n, NumPy broadcasting. Float; float16 and
    bfloat16 accumulate in float32 and round once."""
    dtype = data_0[0].dtype
    wide = np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    total = reduce(np.add, (x.astype(wide, copy=False) for x in data_0))
    if len(data_0) > 1:
        total = total / wide.type(len(data_0))
    return total.astype(dtype, copy=False)


def _same_shape_version(opdef: OpDef, since: int, consumed: bool) -> OpDef:
    target = opdef.reference

    def reference(*inputs: np.ndarray, **attrs: Any) -> np.ndarray:
        _variadic_same_shape(opdef.name, inputs)
        return target(*inputs)

    params = [inspect.Parameter("inputs", inspect.Parameter.VAR_POSITIONAL)]
    if consumed:
        params.append(inspect.Parameter("consumed_inputs", inspect.Parameter.KEYWORD_ONLY))
    reference.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    reference.__name__ = f"{target.__name__}_{since}"
    reference.__doc__ = (f"{opdef.doc}\n\n{opdef.name}-{since}: no broadcasting, every input has "
                         "the same shape"
                         + ("; ``consumed_inputs`` is ignored." if consumed else "."))
    return op(opdef.name, since=since, inputs=("data_0...",),
              outputs=[_port_text(p) for p in opdef.outputs],
              attrs=(CONSUMED,) if consumed else (), infer=opdef.infer)(reference)


# --------------------------------------------------------------------------------------------
# comparison and logic
# --------------------------------------------------------------------------------------------

_BOOL = broadcast(DType.bool)


def _compare(name: str, since: int, fn: Callable[..., np.ndarray], formula: str) -> OpDef:
    def reference(A: np.ndarray, B: np.ndarray) -> np.ndarray:
        if A.dtype == object or B.dtype == object:
            return np.asarray(fn(A.astype(object), B.astype(object)), dtype=np.bool_)
        if is_narrow(A.dtype):
            A, B = A.astype(np.float32), B.astype(np.float32)
        return fn(A, B)

    reference.__name__ = name.lower()
    reference.__doc__ = (f"C = ({formula}), elementwise with NumPy broadcasting; bool. Any "
                         "comparison with NaN is false (NaN != NaN for Equal). A, B: same type "
                         "(numbers, bool from opset 11, strings for Equal from opset 19).")
    return op(name, since=since, inputs=("A", "B"), outputs=("C",), infer=_BOOL)(reference)


equal = _compare("Equal", 7, np.equal, "A == B")
greater = _compare("Greater", 7, np.greater, "A > B")
less = _compare("Less", 7, np.less, "A < B")
greater_or_equal = _compare("GreaterOrEqual", 12, np.greater_equal, "A >= B")
less_or_equal = _compare("LessOrEqual", 12, np.less_equal, "A <= B")


def _logic(name: str, fn: Callable[..., np.ndarray], formula: str) -> OpDef:
    def reference(A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return fn(A, B)

    reference.__name__ = name.lower() + "_"
    reference.__doc__ = f"C = A {formula} B, elementwise on bool tensors, NumPy broadcasting."
    return op(name, since=7, inputs=("A", "B"), outputs=("C",), infer=_BOOL)(reference)


and_ = _logic("And", np.logical_and, "and")
or_ = _logic("Or", np.logical_or, "or")
xor = _logic("Xor", np.logical_xor, "xor")


# --------------------------------------------------------------------------------------------
# bitwise
# --------------------------------------------------------------------------------------------


@op("BitShift", since=11, inputs=("X", "Y"), outputs=("Z",), infer=broadcast(),
    attrs=(Attr("direction", "string", doc='"LEFT" or "RIGHT"'),))
def bit_shift(X: np.ndarray, Y: np.ndarray, *, direction: str) -> np.ndarray:
    """Z = X << Y or X >> Y, elementwise with NumPy broadcasting; X, Y: the same integer type.

    Right shifts of signed types are arithmetic (sign-extending). Left shifts discard the bits
    shifted out, the sign bit included (the shift is done on the unsigned bit pattern). A shift
    amount that is negative or >= the bit width gives what the fill alone produces: -1 for a
    right shift of a negative X, else 0. (Signed types from opset 28; unsigned from 11.)
    """
    bits = X.dtype.itemsize * 8
    valid = (Y >= 0) & (Y < bits)
    amount = np.where(valid, Y, 0).astype(X.dtype)
    if direction == "LEFT":
        unsigned = np.dtype(f"u{X.dtype.itemsize}")
        shifted = np.left_shift(X.view(unsigned), amount.view(unsigned)).view(X.dtype)
        return np.where(valid, shifted, X.dtype.type(0))
    if direction != "RIGHT":
        raise ValueError(f"BitShift direction must be LEFT or RIGHT, got {direction!r}")
    shifted = np.right_shift(X, amount)
    fill = np.where(X < 0, X.dtype.type(-1) if X.dtype.kind == "i" else 0, 0).astype(X.dtype)
    return np.where(valid, shifted, fill)


def _bitwise(name: str, fn: Callable[..., np.ndarray], formula: str) -> OpDef:
    def reference(A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return fn(A, B)

    reference.__name__ = "bitwise_" + name.lower()[7:]
    reference.__doc__ = f"C = A {formula} B, bitwise on integers of one type, NumPy broadcasting."
    return op(name, since=18, inputs=("A", "B"), outputs=("C",), infer=broadcast())(reference)


bitwise_and = _bitwise("BitwiseAnd", np.bitwise_and, "&")
bitwise_or = _bitwise("BitwiseOr", np.bitwise_or, "|")
bitwise_xor = _bitwise("BitwiseXor", np.bitwise_xor, "^")


@op("BitwiseNot", since=18, inputs=("X",), outputs=("Y",), infer=same_as(0))
def bitwise_not(X: np.ndarray) -> np.ndarray:
    """Y = ~X, bitwise complement of an integer tensor."""
    return np.invert(X)


_SUB_BYTE_BITS = {DType.int4: 4, DType.uint4: 4, DType.float4e2m1: 4, DType.int2: 2,
                  DType.uint2: 2}


def _bits_of(X: np.ndarray) -> tuple[np.ndarray, int]:
    """(bit pattern as an unsigned integer array, bit width) of any non-string tensor."""
    kind = DType.from_numpy(X.dtype)
    if kind in _SUB_BYTE_BITS:
        width = _SUB_BYTE_BITS[kind]
        if kind == DType.float4e2m1:
            return X.view(np.uint8) & np.uint8((1 << width) - 1), width
        return X.astype(np.int8).view(np.uint8) & np.uint8((1 << width) - 1), width
    if X.dtype == np.bool_:
        return X.view(np.uint8), 8
    return X.view(np.dtype(f"<u{X.dtype.itemsize}")), X.dtype.itemsize * 8


@op("BitCast", since=26, inputs=("input",), outputs=("output",),
    infer=lambda ctx, t, *, to: TensorType(DType.from_onnx(to), shape_of(t)),
    attrs=(Attr("to", "int", doc="target DataType code; same bit width as the input"),))
def bit_cast(input: np.ndarray, *, to: int) -> np.ndarray:
    """output = input's bit pattern reinterpreted as type ``to`` (little endian); same shape.

    The widths must be equal (bool is 8 bits; int4/uint4/float4e2m1 are 4, int2/uint2 2).
    Strings are not allowed. Reinterpreting to bool gives the byte (a non-0/1 pattern is
    kept as true).
    """
    target = DType.from_onnx(to)
    bits, width = _bits_of(np.asarray(input, order="C"))
    if target in _SUB_BYTE_BITS:
        if _SUB_BYTE_BITS[target] != width:
            raise ValueError(f"BitCast: {input.dtype} has {width} bits, {target.name} has "
                             f"{_SUB_BYTE_BITS[target]}")
        patterns = np.arange(1 << width, dtype=np.uint8)
        if target in (DType.int4, DType.int2):
            signed = patterns.astype(np.int16)
            patterns = np.where(signed >= 1 << (width - 1), signed - (1 << width), signed)
            table = patterns.astype(target.numpy)
        elif target == DType.float4e2m1:
            table = patterns.view(target.numpy)
        else:
            table = patterns.astype(target.numpy)
        return table[bits]
    if target == DType.string or target.numpy.itemsize * 8 != width:
        raise ValueError(f"BitCast: cannot reinterpret {input.dtype} ({width} bits) as "
                         f"{target.name}")
    if target == DType.bool:
        return bits.view(np.uint8) != 0
    return bits.view(target.numpy.newbyteorder("<")).astype(target.numpy, copy=False)


# --------------------------------------------------------------------------------------------
# selection and clipping
# --------------------------------------------------------------------------------------------


@op("Where", since=9, inputs=("condition", "X", "Y"), outputs=("output",),
    infer=lambda ctx, c, x, y: TensorType(
        dtype_of(x) or dtype_of(y), broadcast_dims(ctx, shape_of(c), shape_of(x), shape_of(y))))
def where(condition: np.ndarray, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """output = X where condition else Y, NumPy broadcasting of all three. X, Y: one type (any,
    strings included)."""
    return np.where(condition, X, Y)


def _clip(X: np.ndarray, lo: Any, hi: Any, out: np.ndarray | None = None) -> np.ndarray:
    """min(max(X, lo), hi): when lo > hi every element becomes hi. NaN in X stays NaN. The
    result goes into ``out`` when it is an array of X's shape and dtype."""
    if lo is None and hi is None:
        return X.copy()
    if is_narrow(X.dtype):
        return _clip(X.astype(np.float32), lo, hi).astype(X.dtype)
    # np.clip is min(max(X, lo), hi) in one pass, NaN-propagating, and gives hi where lo > hi.
    # The bounds go in as 0-d arrays of X's dtype: NumPy scalars take a path ~10x slower.
    lo, hi = (None if b is None else np.asarray(b, dtype=X.dtype) for b in (lo, hi))
    target = into(out, X.shape, X.dtype) if X.ndim else None
    return np.asarray(np.clip(X, lo, hi, out=target))  # asarray: a 0-d X gives a scalar


def _attr_bound(value: float | None, dtype: np.dtype) -> Any:
    """A Clip-1/6 float attribute as a bound of X's dtype (one beyond the dtype's range becomes
    an infinity, which clips nothing); None when it is absent."""
    return None if value is None else _scalar(value, dtype)


def clip_limits(dtype: Any) -> tuple[float, float] | None:
    """The bounds Clip-11+ uses for an absent min and max: numeric_limits::lowest() and max()
    of a float type (so +-inf clip to the largest finite values); None for an integer type,
    whose limits clip nothing."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iub":
        return None
    info = ml_dtypes.finfo(dtype)
    return float(info.min), float(info.max)


@op("Clip", since=11, inputs=("input", "min?", "max?"), outputs=("output",), infer=same_as(0),
    in_place=(0,))
def clip(input: np.ndarray, min: np.ndarray | None = None,
         max: np.ndarray | None = None, *, out: np.ndarray | None = None) -> np.ndarray:
    """output = Min(max, Max(input, min)), elementwise; min and max are optional 0-d tensors of
    input's type that "default to numeric_limits::lowest() and numeric_limits::max()": for a
    float type an absent bound is its largest finite value, so +-inf clip to it (float32:
    +-3.4028235e38). When min > max every element becomes max. NaN stays NaN; a NaN bound
    makes every element NaN (Max and Min propagate it). Floats from 11; every integer type
    from 12; bfloat16 from 13."""
    limits = clip_limits(input.dtype) if min is None or max is None else None
    lo = (None if limits is None else _scalar(limits[0], input.dtype)) if min is None else \
        min.reshape(()).astype(input.dtype, copy=False)
    hi = (None if limits is None else _scalar(limits[1], input.dtype)) if max is None else \
        max.reshape(()).astype(input.dtype, copy=False)
    return _clip(input, lo, hi, out)


FLT_MAX = 3.4028234663852886e38  # float32's largest finite value, as Clip-6 writes it


@op("Clip", since=6, inputs=("input",), outputs=("output",), infer=same_as(0),
    attrs=(Attr("max", "float", FLT_MAX, "upper bound"),
           Attr("min", "float", -FLT_MAX, "lower bound")),
    in_place=(0,))
def clip_6(input: np.ndarray, *, max: float, min: float,
           out: np.ndarray | None = None) -> np.ndarray:
    """output = min(max(input, min), max) with float attributes, defaults -+3.4028234663852886e38
    as the spec writes them: float32's +-inf clip to +-3.4028235e38 (as in onnxruntime and
    onnx.reference), float64 values beyond are clipped too, and in float16 the defaults are
    infinite and clip nothing. When min > max every element becomes max. Float types."""
    return _clip(input, _attr_bound(min, input.dtype), _attr_bound(max, input.dtype), out)


@op("Clip", since=1, inputs=("input",), outputs=("output",), infer=same_as(0),
    attrs=(CONSUMED, Attr("max", "float", None, "upper bound (absent: none)"),
           Attr("min", "float", None, "lower bound (absent: none)")))
def clip_1(input: np.ndarray, *, consumed_inputs: Any, max: float | None,
           min: float | None) -> np.ndarray:
    """As Clip-6, but an absent min/max means no bound; ``consumed_inputs`` is ignored."""
    return _clip(input, _attr_bound(min, input.dtype), _attr_bound(max, input.dtype))


# --------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------

_UNARY_LEGACY = (abs_, neg, reciprocal, sqrt, exp, log, ceil, floor, tanh)

OPS = (
    *_UNARY_LEGACY,
    *(with_consumed_inputs(d) for d in _UNARY_LEGACY),
    *_TRIG,
    erf, round_, sign, isnan, isinf, not_,
    add, sub, mul, div,
    *_legacy_binary("Add", add), *_legacy_binary("Sub", sub),
    *_legacy_binary("Mul", mul), *_legacy_binary("Div", div),
    pow_, *_legacy_binary("Pow", pow_, since=(1,)),
    mod,
    max_, min_, sum_, mean,
    *(_same_shape_version(d, 6, False) for d in (max_, min_, sum_, mean)),
    *(_same_shape_version(d, 1, True) for d in (max_, min_, sum_, mean)),
    equal, greater, less, greater_or_equal, less_or_equal,
    *_legacy_binary("Equal", equal, DType.bool, since=(1,)),
    *_legacy_binary("Greater", greater, DType.bool, since=(1,)),
    *_legacy_binary("Less", less, DType.bool, since=(1,)),
    and_, or_, xor,
    *_legacy_binary("And", and_, DType.bool, since=(1,)),
    *_legacy_binary("Or", or_, DType.bool, since=(1,)),
    *_legacy_binary("Xor", xor, DType.bool, since=(1,)),
    bit_shift, bitwise_and, bitwise_or, bitwise_xor, bitwise_not, bit_cast,
    where, clip, clip_6, clip_1,
)

__all__ = ["OPS", "CONSUMED", "with_consumed_inputs"]
