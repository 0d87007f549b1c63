"""DFT (axis attribute at 17, input at 20; onesided, inverse, dft_length), STFT, the
Hann/Hamming/Blackman windows and MelWeightMatrix, on real and complex signals."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import Sample, SampleContext, Sweep, Tol


def _i64(value: int) -> np.ndarray:
    return np.array(value, dtype=np.int64)


def draw_dft(ctx: SampleContext, opset: int) -> Sample:
    """A random DFT: a signal of 1-3 signal dims (1-7 each) plus the real (1) or complex (2)
    last dim; any valid axis, negative now and then (the attribute at 17, an input or the
    default -2 at 20; the default 1 at 17); forward, inverse, RFFT (onesided, real input) or
    IRFFT (onesided inverse, complex input); dft_length left out or 1-9 (padding and
    truncation; for IRFFT the spectrum then has at most n // 2 + 1 bins, so it is read whole)."""
    rng = ctx.rng
    dims = [int(d) for d in rng.integers(1, 8, int(rng.integers(1, 4)))]
    rank = len(dims) + 1
    inverse, onesided = int(rng.integers(0, 2)), int(rng.random() < 0.4)
    last = 1 if onesided and not inverse else 2 if onesided else int(rng.integers(1, 3))
    axis = int(rng.integers(0, rank - 1))
    signed = axis - rank if rng.random() < 0.4 else axis
    length = None if rng.random() < 0.5 else int(rng.integers(1, 10))
    if onesided and inverse:
        if dims[axis] < 2 and length is None:
            dims[axis] = 2
        if length is not None:
            length = max(length, 2 * dims[axis] - 2)
    attrs = {k: v for k, v in (("inverse", inverse), ("onesided", onesided))
             if v or rng.random() < 0.3}
    x = ctx.make((*dims, last))
    inputs: list[np.ndarray | None] = [x, None if length is None else _i64(length)]
    if opset < 20:
        if axis != 1 or rng.random() < 0.5:
            attrs["axis"] = signed
    elif axis != rank - 2 or rng.random() < 0.5:
        inputs.append(_i64(signed))
    while inputs[-1] is None:
        inputs.pop()
    return Sample(tuple(inputs), attrs)


def draw_stft(ctx: SampleContext, opset: int) -> Sample:
    """A random STFT: signal [B, T, 1] or [B, T, 2] (B 1-3, T 1-24); frame_step 1-6; a
    window (of the signal's dtype), a frame_length, both (equal) or neither (T); onesided
    0 or 1 (left at its default 1 now and then) on a real signal, 0 on a complex one."""
    rng = ctx.rng
    batch, length = int(rng.integers(1, 4)), int(rng.integers(1, 25))
    complex_ = rng.random() < 0.4
    frame = int(rng.integers(1, length + 1))
    how = str(rng.choice(["window", "length", "both", "neither"]))
    if how == "neither":
        frame = length
    window = ctx.make((frame,)) if how in ("window", "both") else None
    frame_length = _i64(frame) if how in ("length", "both") else None
    attrs = {}
    if complex_:
        attrs["onesided"] = 0
    elif rng.random() < 0.7:
        attrs["onesided"] = int(rng.integers(0, 2))
    signal = ctx.make((batch, length, 2 if complex_ else 1))
    inputs = [signal, _i64(int(rng.integers(1, 7))), window, frame_length]
    while inputs[-1] is None:
        inputs.pop()
    return Sample(tuple(inputs), attrs)


def draw_window(ctx: SampleContext, opset: int) -> Sample:
    """A random window: size 0-40 (int64 or int32), periodic 0 / 1 / default, output_datatype
    float32, float64 or float16 (or the default)."""
    rng = ctx.rng
    size = int(rng.integers(0, 41)) if rng.random() < 0.9 else int(rng.integers(0, 3))
    attrs = {}
    if rng.random() < 0.7:
        attrs["periodic"] = int(rng.integers(0, 2))
    if rng.random() < 0.7:
        attrs["output_datatype"] = int(rng.choice([1, 11, 10]))
    dtype = np.int64 if rng.random() < 0.7 else np.int32
    return Sample((np.array(size, dtype=dtype),), attrs)


def draw_mel(ctx: SampleContext, opset: int) -> Sample:
    """A random MelWeightMatrix: 1-12 mel bins, dft_length 4-128, sample rate 2000-48000,
    lower edge 0 to a quarter of Nyquist, upper edge above it up to Nyquist, in the
    context's dtype; output float32 or float64 (or the default)."""
    rng = ctx.rng
    rate = int(rng.integers(2000, 48001))
    low = float(rng.uniform(0, rate / 8)) if rng.random() < 0.7 else 0.0
    high = float(rng.uniform(low + 100, rate / 2)) if rng.random() < 0.7 else rate / 2
    attrs = {"output_datatype": int(rng.choice([1, 11]))} if rng.random() < 0.7 else {}
    int_type = np.int64 if rng.random() < 0.7 else np.int32
    return Sample((np.array(int(rng.integers(1, 13)), int_type),
                   np.array(int(rng.integers(4, 129)), int_type),
                   np.array(rate, int_type), ctx.scalar(low), ctx.scalar(high)), attrs)


def known_dft(sample: Sample, opset: int, peer: str) -> str | None:
    """onnxruntime's IRFFT with a dft_length past the spectrum (see the reason)."""
    x = sample.inputs[0]
    length = sample.inputs[1] if len(sample.inputs) > 1 else None
    if peer != "onnxruntime" or length is None or not (sample.attrs.get("inverse") and
                                                       sample.attrs.get("onesided")):
        return None
    axis = int(sample.inputs[2]) if len(sample.inputs) > 2 else sample.attrs.get(
        "axis", 1 if opset < 20 else -2)
    if int(length) != 2 * (x.shape[axis] - 1):
        return ("onnxruntime 1.32's IRFFT (inverse=1, onesided=1) with dft_length n longer than "
                "2 * (bins - 1) does not read the bins it lacks as zero ('If greater than the "
                "axis dimension, the signal will be zero-padded'); refmnn and onnx.reference "
                "give numpy.fft.irfft(X, n)")
    return None


def known_window(sample: Sample, opset: int, peer: str) -> str | None:
    """The one-point symmetric window (refmnn's documented choice); onnx.reference's float16."""
    if peer == "onnx.reference" and sample.attrs.get("output_datatype") == DType.float16.value:
        return ("onnx.reference 1.23.2 evaluates the window in float16 arithmetic (n as a "
                "float16 arange), off by up to 3 ulp; the spec's function body computes in "
                "float32 and casts to output_datatype once, as refmnn does (in float64)")
    if int(sample.inputs[0]) == 1 and sample.attrs.get("periodic", 1) == 0:
        return ("a symmetric window of one point: the spec's function divides 0 by 0 (N = "
                "size - 1 = 0) and the peers give NaN; refmnn documents [1], its limit (as "
                "NumPy, SciPy and PyTorch)")
    return None


_STFT_TOL = {
    DType.float32: Tol(1e-5, 1e-4, "onnxruntime 1.32's float32 STFT errs by up to ~5e-6 of the "
                                   "spectrum's peak (~4e-5 on peaks of 10); refmnn is within 1e-6 "
                                   "of the float64 transform"),
}
_DFT_TOL = {
    DType.float32: Tol(1e-5, 1e-5, "FFT and direct sums of up to 9 terms round differently; "
                                   "values near zero cancel"),
}
_WINDOW_TOL = {
    DType.float32: Tol(1e-6, 1e-6, "a cosine sum rounded to float32 once (refmnn) or "
                                   "evaluated in float32 (the peers)"),
}

SWEEPS = (
    Sweep("DFT", (17, 20), draw_dft, dtypes=(DType.float32, DType.float64), known=known_dft,
          tolerance=_DFT_TOL),
    Sweep("STFT", (17,), draw_stft, dtypes=(DType.float32, DType.float64), tolerance=_STFT_TOL),
    Sweep("HannWindow", (17,), draw_window, known=known_window, tolerance=_WINDOW_TOL),
    Sweep("HammingWindow", (17,), draw_window, known=known_window, tolerance=_WINDOW_TOL),
    Sweep("BlackmanWindow", (17,), draw_window, known=known_window, tolerance=_WINDOW_TOL),
    Sweep("MelWeightMatrix", (17,), draw_mel, dtypes=(DType.float32, DType.float64)),
)
