"""Signal ops: DFT, STFT, the Hann/Hamming/Blackman windows and MelWeightMatrix.

Complex tensors follow ONNX's convention: a trailing dimension of size 2 holds (real, imag); a
trailing dimension of size 1 marks a real signal. Transforms run NumPy's pocketfft in the
input's precision (complex64 for float32 and narrower floats, complex128 for float64) and cast
back to the input's dtype once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refmnn.dtypes import DType, compute_dtype
from refmnn.graph import TensorType
from refmnn.ops._infer import dtype_of, shape_of
from refmnn.ops._schema import Attr, InferContext, flag, op


def _scalar_int(value: np.ndarray | None, default: int | None = None) -> int | None:
    """A scalar (or one-element) integer tensor as int; None/empty gives ``default``."""
    if value is None or np.asarray(value).size == 0:
        return default
    return int(np.asarray(value).reshape(-1)[0])


def _known_int(ctx: InferContext, index: int) -> int | None:
    """The value of scalar input ``index`` when the shape rule can know it."""
    if index >= len(ctx.node.inputs) or not ctx.node.inputs[index]:
        return None
    return _scalar_int(ctx.value(index))


def _complex_dtype(dtype: np.dtype) -> np.dtype:
    """complex64 for float32 and narrower floats (which compute in float32), else complex128."""
    return np.dtype(np.complex64 if compute_dtype(dtype) == np.float32 else np.complex128)


def _to_complex(x: np.ndarray) -> np.ndarray:
    """(..., 1) real or (..., 2) (real, imag) -> complex (...) in the compute precision."""
    work = _complex_dtype(x.dtype)
    if x.shape[-1] == 1:
        return x[..., 0].astype(work)
    if x.shape[-1] == 2:
        z = np.empty(x.shape[:-1], dtype=work)
        z.real, z.imag = x[..., 0], x[..., 1]
        return z
    raise ValueError(f"the last dimension must be 1 (real) or 2 (complex), got {x.shape[-1]}")


def _from_complex(z: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """complex (...) -> (..., 2) (real, imag) in ``dtype``."""
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


# ---------------------------------------------------------------------------------------------
# DFT
# ---------------------------------------------------------------------------------------------


def _dft_axis(rank: int, axis: int) -> int:
    """Validate a DFT axis against [-rank, -2] U [0, rank - 2] and make it non-negative."""
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        raise ValueError(f"DFT axis {axis} is outside [-{rank}, -2] U [0, {rank - 2}]")
    return axis % rank


def _dft(x: np.ndarray, dft_length: np.ndarray | None, axis: int, inverse: int,
         onesided: int) -> np.ndarray:
    """The DFT shared by DFT-17 and DFT-20; see dft_20 for the meaning."""
    axis = _dft_axis(x.ndim, axis)
    signal = _to_complex(x)
    irfft = bool(inverse and onesided)
    n = _scalar_int(dft_length, 2 * (x.shape[axis] - 1) if irfft else x.shape[axis])
    if n is None or n < 1:
        raise ValueError(f"dft_length must be >= 1, got {n}")
    if irfft:  # one-sided spectrum -> real signal of length n
        return np.fft.irfft(signal, n=n, axis=axis)[..., None].astype(x.dtype)
    if inverse:
        return _from_complex(np.fft.ifft(signal, n=n, axis=axis), x.dtype)
    spectrum = np.fft.fft(signal, n=n, axis=axis)
    if onesided:
        spectrum = np.take(spectrum, np.arange(n // 2 + 1), axis=axis)
    return _from_complex(spectrum, x.dtype)


def _dft_shape(ctx: InferContext, x: TensorType | None, axis: int | None, inverse: int,
               onesided: int, length_at: int) -> TensorType:
    """Output type of a DFT: the axis becomes dft_length (or its one-sided bin count), the
    last dim 2 (complex) or 1 (IRFFT)."""
    shape = shape_of(x)
    if shape is None:
        return TensorType(dtype_of(x), None)
    rank = len(shape)
    irfft = bool(inverse and onesided)
    last = 1 if irfft else 2
    if axis is None:  # axis not known before running
        return TensorType(dtype_of(x), (None,) * (rank - 1) + (last,))
    try:
        axis = _dft_axis(rank, axis)
    except ValueError as exc:
        ctx.fail(str(exc))
    d = shape[axis]
    if length_at < len(ctx.node.inputs) and ctx.node.inputs[length_at]:
        n = _known_int(ctx, length_at)
    elif irfft:
        n = 2 * (d - 1) if isinstance(d, int) else None
    else:
        n = d  # a symbolic length is kept
    if onesided and not inverse:
        n = n // 2 + 1 if isinstance(n, int) else None
    out = list(shape)
    out[axis], out[-1] = n, last
    return TensorType(dtype_of(x), tuple(out))


def _dft_17_infer(ctx: InferContext, x: TensorType | None, *rest: Any, axis: int, inverse: int,
                  onesided: int) -> TensorType:
    return _dft_shape(ctx, x, axis, inverse, onesided, 1)


def _dft_20_infer(ctx: InferContext, x: TensorType | None, *rest: Any, inverse: int,
                  onesided: int) -> TensorType:
    given = len(ctx.node.inputs) > 2 and bool(ctx.node.inputs[2])
    axis = _known_int(ctx, 2) if given else -2
    return _dft_shape(ctx, x, axis, inverse, onesided, 1)


_DFT_ATTRS = (
    flag("inverse", 0, "1: inverse transform (scaled by 1/n)"),
    flag("onesided", 0, "1: forward returns bins 0..n//2 (RFFT); inverse takes them (IRFFT)"),
)


@op("DFT", since=17, inputs=("input", "dft_length?"), outputs=("output",),
    attrs=_DFT_ATTRS + (Attr("axis", "int", 1, "the signal axis (not the last dim)"),),
    infer=_dft_17_infer, value_inputs=(1,))
def dft_17(input: np.ndarray, dft_length: np.ndarray | None = None, *, inverse: int,
           onesided: int, axis: int) -> np.ndarray:
    """DFT-17: DFT-20 with the axis as an attribute (default 1)."""
    return _dft(input, dft_length, axis, inverse, onesided)


@op("DFT", since=20, inputs=("input", "dft_length?", "axis?"), outputs=("output",),
    attrs=_DFT_ATTRS, infer=_dft_20_infer, value_inputs=(1, 2))
def dft_20(input: np.ndarray, dft_length: np.ndarray | None = None,
           axis: np.ndarray | None = None, *, inverse: int, onesided: int) -> np.ndarray:
    """y[k] = sum_n x[n] exp(-2 pi j k n / N) along ``axis``; inverse: x[n] = (1/N) sum_k ...

    input: (..., 1) real or (..., 2) complex (last dim = real, imag); float. axis: int64 scalar
    input (default -2), in [-r, -2] U [0, r-2]. dft_length N: the signal is zero-padded or
    truncated to N along the axis (default: the axis length, or 2 * (len - 1) for IRFFT).
    Output (..., 2) complex with N bins; onesided forward (RFFT): bins 0..N//2 (a complex
    input is transformed in full and cut); onesided inverse (IRFFT): the input holds bins
    0..N//2 of a Hermitian spectrum and the output is the real signal (..., N, ..., 1).
    Computed in complex64 (complex128 for float64), output in the input's dtype.
    """
    return _dft(input, dft_length, _scalar_int(axis, -2), inverse, onesided)


# ---------------------------------------------------------------------------------------------
# STFT
# ---------------------------------------------------------------------------------------------


def _stft_infer(ctx: InferContext, signal: TensorType | None, frame_step: TensorType | None,
                window: TensorType | None = None, frame_length: TensorType | None = None, *,
                onesided: int) -> TensorType:
    shape = shape_of(signal)
    if shape is None:
        return TensorType(dtype_of(signal), (None, None, None, 2))
    given = [i < len(ctx.node.inputs) and bool(ctx.node.inputs[i]) for i in range(4)]
    if given[3]:
        length = _known_int(ctx, 3)
    elif given[2]:
        length = shape_of(window)[0] if shape_of(window) is not None else None
    else:
        length = shape[1]
    length = length if isinstance(length, int) else None
    step = _known_int(ctx, 1)
    frames = None
    if isinstance(length, int) and isinstance(step, int) and isinstance(shape[1], int):
        frames = (shape[1] - length) // step + 1
    bins = None if length is None else (length // 2 + 1 if onesided else length)
    return TensorType(dtype_of(signal), (shape[0], frames, bins, 2))


@op("STFT", since=17, inputs=("signal", "frame_step", "window?", "frame_length?"),
    outputs=("output",), infer=_stft_infer, value_inputs=(1, 3),
    attrs=(flag("onesided", 1, "1: only bins 0..frame_length//2 are returned"),))
def stft(signal: np.ndarray, frame_step: np.ndarray, window: np.ndarray | None = None,
         frame_length: np.ndarray | None = None, *, onesided: int) -> np.ndarray:
    """out[b, f, k] = sum_n window[n] * signal[b, f * frame_step + n] exp(-2 pi j k n / L).

    signal (B, T, 1) real or (B, T, 2) complex; frame_step int scalar; window (L,) optional
    (default all ones); frame_length L optional (default len(window), else T; must equal
    len(window) when both are given). frames = (T - L) // frame_step + 1. Output
    (B, frames, L // 2 + 1 if onesided else L, 2), signal's dtype (complex64 arithmetic,
    complex128 for float64).
    onesided with a complex signal cuts the full spectrum to its first L // 2 + 1 bins.
    """
    step = _scalar_int(frame_step)
    length = _scalar_int(frame_length)
    if length is None:
        length = window.shape[0] if window is not None else signal.shape[1]
    if window is not None and window.shape[0] != length:
        raise ValueError(f"window has {window.shape[0]} values but frame_length is {length}")
    if step is None or step < 1 or length < 1 or length > signal.shape[1]:
        raise ValueError(f"invalid frame_step {step} / frame_length {length} for a signal of "
                         f"length {signal.shape[1]}")
    frames = (signal.shape[1] - length) // step + 1
    starts = np.arange(frames) * step
    framed = _to_complex(signal)[:, starts[:, None] + np.arange(length)]  # (B, frames, L)
    if window is not None:
        framed = framed * window.astype(framed.real.dtype)
    spectrum = np.fft.fft(framed, axis=-1)
    if onesided:
        spectrum = spectrum[..., : length // 2 + 1]
    return _from_complex(spectrum, signal.dtype)


# ---------------------------------------------------------------------------------------------
# Windows
# ---------------------------------------------------------------------------------------------


def _window_infer(ctx: InferContext, size: TensorType | None, *, periodic: int,
                  output_datatype: int) -> TensorType:
    return TensorType(DType.from_onnx(output_datatype), (_known_int(ctx, 0),))


def _cosine_window(size: np.ndarray, periodic: int, output_datatype: int,
                   coefficients: tuple[float, ...]) -> np.ndarray:
    """w[n] = sum_k (-1)^k a_k cos(2 pi k n / N), n in [0, size), N = size if periodic else
    size - 1; computed in float64, cast once. A symmetric window of one point is [1], its
    limit (NumPy's, SciPy's and PyTorch's windows too); the spec's function body divides 0 by
    0 there (angular step 2 pi / 0 times n = 0) and gives NaN, as onnxruntime 1.32 and
    onnx.reference 1.23.2 do."""
    count = _scalar_int(size)
    if count is None or count < 0:
        raise ValueError(f"window size must be a non-negative scalar, got {size}")
    n = np.arange(count, dtype=np.float64)
    period = count if periodic else count - 1
    window = np.zeros(count)
    for k, a in enumerate(coefficients):
        window += (-1) ** k * a * np.cos(2 * np.pi * k * n / max(period, 1))
    if period < 1:
        window = np.ones(count)
    return window.astype(DType.from_onnx(output_datatype).numpy)


_WINDOW_ATTRS = (
    Attr("output_datatype", "int", 1, "ONNX element type of the output (default float)"),
    flag("periodic", 1, "1: periodic window (N = size); 0: symmetric (N = size - 1)"),
)


@op("HannWindow", since=17, inputs=("size",), outputs=("output",), attrs=_WINDOW_ATTRS,
    infer=_window_infer, value_inputs=(0,))
def hann_window(size: np.ndarray, *, output_datatype: int, periodic: int) -> np.ndarray:
    """w[n] = 0.5 - 0.5 cos(2 pi n / N) = sin^2(pi n / N), n in [0, size).

    size: int scalar; N = size (periodic) or size - 1 (symmetric). Output (size,) in
    output_datatype (integers truncate).
    """
    return _cosine_window(size, periodic, output_datatype, (0.5, 0.5))


@op("HammingWindow", since=17, inputs=("size",), outputs=("output",), attrs=_WINDOW_ATTRS,
    infer=_window_infer, value_inputs=(0,))
def hamming_window(size: np.ndarray, *, output_datatype: int, periodic: int) -> np.ndarray:
    """w[n] = 25/46 - 21/46 cos(2 pi n / N), n in [0, size) (the exact Hamming coefficients,
    as onnxruntime and the ONNX reference use; not 0.54 / 0.46).

    size: int scalar; N = size (periodic) or size - 1 (symmetric). Output (size,) in
    output_datatype.
    """
    return _cosine_window(size, periodic, output_datatype, (25 / 46, 21 / 46))


@op("BlackmanWindow", since=17, inputs=("size",), outputs=("output",), attrs=_WINDOW_ATTRS,
    infer=_window_infer, value_inputs=(0,))
def blackman_window(size: np.ndarray, *, output_datatype: int, periodic: int) -> np.ndarray:
    """w[n] = 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N), n in [0, size).

    size: int scalar; N = size (periodic) or size - 1 (symmetric). Output (size,) in
    output_datatype.
    """
    return _cosine_window(size, periodic, output_datatype, (0.42, 0.5, 0.08))


# ---------------------------------------------------------------------------------------------
# MelWeightMatrix
# ---------------------------------------------------------------------------------------------


def _mel_infer(ctx: InferContext, *types: Any, output_datatype: int) -> TensorType:
    bins, length = _known_int(ctx, 0), _known_int(ctx, 1)
    return TensorType(DType.from_onnx(output_datatype),
                      (None if length is None else length // 2 + 1, bins))


@op("MelWeightMatrix", since=17,
    inputs=("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"),
    outputs=("output",), infer=_mel_infer, value_inputs=(0, 1),
    attrs=(Attr("output_datatype", "int", 1, "ONNX element type of the output (default float)"),))
def mel_weight_matrix(num_mel_bins: np.ndarray, dft_length: np.ndarray,
                      sample_rate: np.ndarray, lower_edge_hertz: np.ndarray,
                      upper_edge_hertz: np.ndarray, *, output_datatype: int) -> np.ndarray:
    """Triangular mel filterbank W (dft_length // 2 + 1, num_mel_bins), peaks 1.0.

    mel(f) = 2595 log10(1 + f / 700). num_mel_bins + 2 edges are spaced by
    (mel(upper) - mel(lower)) / (num_mel_bins + 2) from mel(lower), mapped back to Hz and to
    DFT bins b_i = floor((dft_length + 1) * f_i / sample_rate). Filter m rises linearly from
    b_m (0) to b_{m+1} (1) and falls to b_{m+2} (exclusive): W[j, m] = (j - b_m) / (b_{m+1} -
    b_m) on the rise, (b_{m+2} - j) / (b_{m+2} - b_{m+1}) on the fall, 1 at b_{m+1} when the
    rise is empty. This is the quantised-bin construction of onnxruntime and the ONNX
    reference. Computed in float64, cast to output_datatype.
    """
    mels, length = _scalar_int(num_mel_bins), _scalar_int(dft_length)
    rate = float(np.asarray(sample_rate).reshape(-1)[0])
    low, high = (float(np.asarray(v).reshape(-1)[0]) for v in (lower_edge_hertz, upper_edge_hertz))
    low_mel, high_mel = (2595 * np.log10(1 + f / 700) for f in (low, high))
    edges_mel = low_mel + np.arange(mels + 2) * (high_mel - low_mel) / (mels + 2)
    edges_hz = 700 * (10 ** (edges_mel / 2595) - 1)
    edges = np.floor((length + 1) * edges_hz / rate).astype(np.int64)
    left, center, right = edges[:-2], edges[1:-1], edges[2:]  # (mels,) each
    j = np.arange(length // 2 + 1)[:, None]  # spectrogram bins (rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        rise = np.where((j >= left) & (j <= center), (j - left) / (center - left), 0.0)
        fall = np.where((j >= center) & (j < right), (right - j) / (right - center), 0.0)
    weights = np.where((j >= center) & (j < right), fall, rise)
    weights = np.where((left == center) & (j == center), 1.0, weights)
    return np.nan_to_num(weights).astype(DType.from_onnx(output_datatype).numpy)


OPS = (dft_17, dft_20, stft, hann_window, hamming_window, blackman_window, mel_weight_matrix)
