"""Default tolerances per element type, each with its reason, and how they widen.

The float entries start from PyTorch's ``torch.testing.assert_close`` defaults, which are about
the type's unit roundoff times a small factor (rtol) plus an absolute floor for results near
zero (atol). Integers and booleans are exact: an integer op has one right answer.

A backend is judged at its *effective precision*: ``BackendConfig.precision == "low"`` lets a
backend compute float32 ops in half precision (as MNN's ``Precision_Low`` does), so its float32
results are judged with the float16 tolerances. For ops that accumulate (MatMul, Conv, reductions,
normalizations), the order of a K-term sum is free: the rounding error of a sum grows like
sqrt(K) for random-order summation, so float tolerances are widened by sqrt(K).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

from refmnn.dtypes import FLOAT8, DType

from refmnn_conformance.case import OpCase, Sample, Tol

EXACT_INT = "integers have one right answer: wrap-around, truncation and saturation are specified"

_TABLE: dict[DType, Tol] = {
    DType.float64: Tol(1e-7, 1e-7, "PyTorch's float64 default: ~1e9 ulp of slack is far below any "
                                   "real algorithmic difference, above reassociation noise"),
    DType.float32: Tol(1.3e-6, 1e-5, "PyTorch's float32 default: ~11 ulp (eps 1.19e-7) relative, "
                                     "1e-5 absolute for results that cancel to near zero"),
    DType.float16: Tol(1e-3, 1e-5, "PyTorch's float16 default: ~2 ulp (eps 9.8e-4), computing in "
                                   "float32 and rounding once is allowed to differ by one rounding"),
    DType.bfloat16: Tol(1.6e-2, 1e-5, "PyTorch's bfloat16 default: ~2 ulp (eps 7.8e-3), 8-bit "
                                      "mantissa"),
    DType.bool: Tol(0.0, 0.0, "booleans are exact"),
    DType.string: Tol(0.0, 0.0, "strings are exact"),
}
for _dtype in (DType.int8, DType.int16, DType.int32, DType.int64, DType.uint8, DType.uint16,
               DType.uint32, DType.uint64, DType.int4, DType.uint4, DType.int2, DType.uint2):
    _TABLE[_dtype] = Tol(0.0, 0.0, EXACT_INT)
for _dtype, _bits in ((DType.float8e4m3fn, 3), (DType.float8e4m3fnuz, 3), (DType.float8e5m2, 2),
                      (DType.float8e5m2fnuz, 2), (DType.float4e2m1, 1), (DType.float6e2m3, 3),
                      (DType.float6e3m2, 2), (DType.float8e8m0, 0)):
    _TABLE[_dtype] = Tol(2.0 ** -_bits, 0.0, f"one rounding step of a {_bits}-bit mantissa: a result "
                                             "computed in float32 may round to either neighbour")

DEFAULTS: Mapping[DType, Tol] = MappingProxyType(_TABLE)
"""The default tolerance of every element type (see each entry's ``why``)."""

LOW_PRECISION_AS = {DType.float32: DType.float16}
"""With ``precision == "low"`` a backend's float32 results are judged as float16."""


def effective_dtype(dtype: DType, precision: str = "normal") -> DType:
    """The dtype whose tolerances judge results of ``dtype`` at a backend's precision."""
    if precision == "low":
        return LOW_PRECISION_AS.get(dtype, dtype)
    return dtype


def default_tolerance(dtype: DType, precision: str = "normal") -> Tol:
    """The table's tolerance for ``dtype`` at ``precision``."""
    judged = effective_dtype(dtype, precision)
    tol = DEFAULTS.get(judged)
    if tol is None:
        raise KeyError(f"no default tolerance for {dtype.name}")
    if judged is not dtype:
        return Tol(tol.rtol, tol.atol, f"{tol.why} (precision 'low': {dtype.name} judged as "
                                       f"{judged.name})")
    return tol


def tolerance_for(case: OpCase | None, dtype: DType, sample: Sample | None = None,
                  precision: str = "normal") -> Tol:
    """The tolerance of one output of ``dtype``: the case's override or the default, widened by
    sqrt(K) for a case that accumulates K terms per output element (floats only)."""
    judged = effective_dtype(dtype, precision)
    tol = None
    if case is not None:
        tol = case.tolerance.get(judged) or case.tolerance.get(dtype)
    if tol is None:
        tol = default_tolerance(dtype, precision)
    if case is not None and sample is not None and case.accumulates is not None and \
            (dtype.is_float or dtype in FLOAT8) and not tol.exact:
        k = max(1, int(case.accumulates(sample)))
        tol = tol.widened(math.sqrt(k), f"widened by sqrt(K) = sqrt({k}) for a {k}-term sum")
    return tol
