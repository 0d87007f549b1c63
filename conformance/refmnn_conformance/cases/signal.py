"""Signal processing (refmnn/ops/signal.py): DFT (forward/inverse, one-sided, axis, dft_length),
the Hann/Hamming/Blackman windows, STFT and MelWeightMatrix."""

from __future__ import annotations

import numpy as np
import onnx

from refmnn.dtypes import DType

from refmnn_conformance.case import OpCase, Sample, SampleContext, Tol


def _i64(value) -> np.ndarray:
    return np.array(value, dtype=np.int64)


def dft_samples(ctx: SampleContext):
    real = ctx.make((2, 8, 1))
    cplx = ctx.make((2, 8, 2))
    yield Sample((real,), name="real_forward")
    yield Sample((cplx,), name="complex_forward")
    yield Sample((cplx,), {"inverse": 1}, name="inverse")
    yield Sample((real,), {"onesided": 1}, name="onesided")
    yield Sample((real, _i64(12)), name="zero_padded_length")
    yield Sample((cplx, _i64(5)), name="truncated_length")
    yield Sample((ctx.make((3, 4, 6, 2)), None, _i64(2)), name="axis2")
    yield Sample((ctx.make((3, 7, 1)), None, _i64(-2)), name="odd_length_negative_axis")
    yield Sample((ctx.make((2, 5, 2)),), {"inverse": 1, "onesided": 1}, name="inverse_onesided")
    yield Sample((ctx.make((1, 512, 1)),), name="larger")


def window_samples(ctx: SampleContext):
    code = int(onnx.helper.np_dtype_to_tensor_dtype(ctx.dtype))
    for size in (1, 2, 7, 16):
        yield Sample((_i64(size),), {"output_datatype": code}, name=f"periodic{size}")
        yield Sample((_i64(size),), {"output_datatype": code, "periodic": 0}, name=f"symmetric{size}")
    yield Sample((np.array(10, dtype=np.int32),), name="int32_size_default_dtype")


def stft_samples(ctx: SampleContext):
    signal = ctx.make((2, 64, 1))
    yield Sample((signal, _i64(8), None, _i64(16)), outputs=1, name="no_window")
    yield Sample((signal, _i64(16), ctx.make((16,)) ** 2), name="window_onesided")
    yield Sample((ctx.make((1, 40, 2)), _i64(10), ctx.make((12,)), _i64(12)), {"onesided": 0},
                 name="complex_two_sided")


def mel_samples(ctx: SampleContext):
    code = int(onnx.helper.np_dtype_to_tensor_dtype(ctx.dtype))
    yield Sample((_i64(8), _i64(32), _i64(16000), ctx.scalar(0), ctx.scalar(8000)),
                 {"output_datatype": code}, name="basic")
    yield Sample((_i64(4), _i64(16), _i64(8000), ctx.scalar(100), ctx.scalar(3000)),
                 {"output_datatype": code}, name="band")


_TYPES = (DType.float32, DType.float16, DType.float64)
_DFT_TOL = {DType.float16: Tol(5e-3, 5e-3, "an n-term complex sum in float32; values near zero "
                                           "need an absolute floor"),
            DType.float32: Tol(1e-5, 1e-5, "FFT and direct sums round differently; values near "
                                           "zero need an absolute floor")}
CASES = (
    OpCase("DFT", dtypes=_TYPES, samples=dft_samples, tolerance=_DFT_TOL,
           accumulates=lambda s: 16, tags=("signal",)),
    *(OpCase(op, dtypes=_TYPES + (DType.bfloat16,), samples=window_samples, tags=("signal",))
      for op in ("HannWindow", "HammingWindow", "BlackmanWindow")),
    OpCase("STFT", dtypes=(DType.float32, DType.float64), samples=stft_samples,
           tolerance=_DFT_TOL, accumulates=lambda s: 16, tags=("signal",)),
    OpCase("MelWeightMatrix", dtypes=(DType.float32, DType.float64), samples=mel_samples,
           tags=("signal",)),
)
