"""Private helpers shared by the resize family (refmnn.ops.resize: Resize, Upsample) and the
image and detection families (refmnn.ops.image: GridSample, AffineGrid; refmnn.ops.detection:
RoiAlign): the cubic interpolation kernel, the float dtype interpolation computes in, and the
cast of interpolated values back to the input dtype.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from refmnn.dtypes import compute_dtype


def keys_cubic(d: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel k(d) with coefficient ``a`` (support |d| < 2)."""
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def float_compute_dtype(dtype: np.dtype) -> np.dtype:
    """The float dtype interpolation runs in: float32 for float32 and narrower floats, the
    dtype itself for float64 and complex, float64 for integers and bool."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return dtype
    work = compute_dtype(dtype)
    return work if work.kind == "f" else np.dtype(np.float64)


def cast_back(values: np.ndarray, dtype: np.dtype, *, rounding: str) -> np.ndarray:
    """Cast interpolated values to the input dtype: integers are rounded (``"even"``: half to
    even, ``"trunc"``: toward zero) and saturated; floats are cast directly (NaN/inf kept)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return values != 0
    if dtype.kind in "iu" or compute_dtype(dtype).kind in "iu":
        info = ml_dtypes.iinfo(dtype)
        values = np.rint(values) if rounding == "even" else np.trunc(values)
        return np.clip(values, int(info.min), int(info.max)).astype(dtype)
    return values.astype(dtype)
