"""Conv, ConvTranspose, DeformConv, Col2Im, ConvInteger and QLinearConv: 1-D to 3-D windows x
groups (depthwise too) x strides x dilations x asymmetric pads x every auto_pad, with and
without kernel_shape and bias; ConvTranspose adds output_padding and output_shape."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import UNIT, Sample, SampleContext, Sweep

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _ints(values: np.ndarray | list[int]) -> list[int]:
    return [int(v) for v in values]


def _steps(rng: np.random.Generator, rank: int, high: int, chance: float) -> list[int]:
    """Strides or dilations: all 1 unless a draw of probability ``chance`` picks 1..high."""
    return _ints(rng.integers(1, high + 1, rank)) if rng.random() < chance else [1] * rank


def _window_attrs(rng: np.random.Generator, kernel: list[int], strides: list[int],
                  dilations: list[int], pads: list[int] | None, auto_pad: str,
                  with_kernel_shape: bool) -> dict[str, object]:
    """The attributes of a window, each default left out at random (or written out)."""
    attrs: dict[str, object] = {}
    rank = len(kernel)
    if strides != [1] * rank or rng.random() < 0.3:
        attrs["strides"] = strides
    if dilations != [1] * rank or rng.random() < 0.3:
        attrs["dilations"] = dilations
    if pads is not None:
        attrs["pads"] = pads
    if auto_pad != "NOTSET" or rng.random() < 0.2:
        attrs["auto_pad"] = auto_pad
    if with_kernel_shape:
        attrs["kernel_shape"] = kernel
    return attrs


def _conv_window(rng: np.random.Generator, rank: int, max_kernel: int
                 ) -> tuple[list[int], dict[str, object], list[int], list[int]]:
    """(input spatial sizes, window attributes, kernel, output spatial sizes) of a Conv-like
    op: every output axis at least 1 long; explicit pads may exceed the kernel."""
    kernel = _ints(rng.integers(1, max_kernel + 1, rank))
    strides, dilations = _steps(rng, rank, 3, 0.6), _steps(rng, rank, 3, 0.4)
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    auto_pad = str(rng.choice(AUTO_PADS, p=[0.55, 0.15, 0.15, 0.15]))
    pads: list[int] | None = None
    if auto_pad == "NOTSET" and rng.random() < 0.75:
        pads = [int(rng.integers(0, e + 1)) for e in extent * 2]
    begin, end = (pads[:rank], pads[rank:]) if pads else ([0] * rank, [0] * rank)
    sizes, out = [], []
    for i in range(rank):
        size = int(rng.integers(1, extent[i] + 5))
        if auto_pad in ("NOTSET", "VALID"):
            size = max(size, extent[i] - begin[i] - end[i])
            out.append((size + begin[i] + end[i] - extent[i]) // strides[i] + 1)
        else:
            out.append(-(-size // strides[i]))
        sizes.append(size)
    attrs = _window_attrs(rng, kernel, strides, dilations, pads, auto_pad, rng.random() < 0.3)
    return sizes, attrs, kernel, out


def _channels(rng: np.random.Generator) -> tuple[int, int, int]:
    """(C, M, group): plain, grouped, or depthwise (C/group == 1, maybe with a multiplier)."""
    kind = rng.random()
    if kind < 0.4:
        return int(rng.integers(1, 4)), int(rng.integers(1, 4)), 1
    group = int(rng.integers(2, 4))
    per_group = 1 if kind < 0.7 else int(rng.integers(1, 3))
    return group * per_group, group * int(rng.integers(1, 3)), group


def _rank(rng: np.random.Generator) -> int:
    return int(rng.choice([1, 2, 3], p=[0.3, 0.5, 0.2]))


def draw_conv(ctx: SampleContext, opset: int) -> Sample:
    """A random Conv, 1-D to 3-D: plain, grouped or depthwise channels, kernels 1..4 (3-D:
    1..3), strides and dilations 1..3, explicit asymmetric pads up to the dilated kernel, or
    an auto_pad; kernel_shape written out or not; bias or not; batch 0..2."""
    rng = ctx.rng
    rank = _rank(rng)
    sizes, attrs, kernel, _ = _conv_window(rng, rank, 3 if rank == 3 else 4)
    c, m, group = _channels(rng)
    if group > 1 or rng.random() < 0.2:
        attrs["group"] = group
    batch = int(rng.choice([0, 1, 2], p=[0.05, 0.6, 0.35]))
    inputs = [ctx.make((batch, c, *sizes), UNIT), ctx.make((m, c // group, *kernel), UNIT)]
    if rng.random() < 0.6:
        inputs.append(ctx.make((m,), UNIT))
    return Sample(tuple(inputs), attrs)


# -- ConvTranspose -----------------------------------------------------------------------------

def draw_conv_transpose(ctx: SampleContext, opset: int) -> Sample:
    """A random ConvTranspose, 1-D to 3-D: groups (depthwise too), kernels 1..4, strides 1..3,
    dilations 1..2, output_padding below max(stride, dilation), and the output size from
    explicit pads (at most the full size less one), auto_pad SAME_UPPER/SAME_LOWER/VALID, or
    an output_shape from 1 to the full size (with or without a SAME auto_pad)."""
    rng = ctx.rng
    rank = _rank(rng)
    kernel = _ints(rng.integers(1, (3 if rank == 3 else 4) + 1, rank))
    strides, dilations = _steps(rng, rank, 3, 0.6), _steps(rng, rank, 2, 0.4)
    sizes = _ints(rng.integers(1, 5 if rank == 3 else 6, rank))
    adjust = [int(rng.integers(0, max(s, d))) if rng.random() < 0.4 else 0
              for s, d in zip(strides, dilations, strict=True)]
    full = [s * (n - 1) + a + (k - 1) * d + 1
            for s, n, a, k, d in zip(strides, sizes, adjust, kernel, dilations, strict=True)]
    mode = str(rng.choice(["pads", "SAME_UPPER", "SAME_LOWER", "VALID", "output_shape"],
                          p=[0.4, 0.15, 0.15, 0.1, 0.2]))
    pads: list[int] | None = None
    if mode == "pads" and rng.random() < 0.8:
        begin = [int(rng.integers(0, f)) for f in full]
        pads = begin + [int(rng.integers(0, f - b)) for f, b in zip(full, begin, strict=True)]
    auto_pad = mode if mode in AUTO_PADS else "NOTSET"
    if mode == "output_shape" and rng.random() < 0.3:
        auto_pad = str(rng.choice(["SAME_UPPER", "SAME_LOWER"]))
    attrs = _window_attrs(rng, kernel, strides, dilations, pads, auto_pad, rng.random() < 0.3)
    if mode == "output_shape":
        attrs["output_shape"] = [int(rng.integers(max(1, f - 4), f + 1)) for f in full]
    if any(adjust) or rng.random() < 0.1:
        attrs["output_padding"] = adjust
    c, m, group = _channels(rng)
    c, m = m, c  # X has the C channels, W is (C, M / group, *kernel)
    if group > 1 or rng.random() < 0.2:
        attrs["group"] = group
    batch = int(rng.choice([0, 1, 2], p=[0.05, 0.6, 0.35]))
    inputs = [ctx.make((batch, c, *sizes), UNIT), ctx.make((c, m // group, *kernel), UNIT)]
    if rng.random() < 0.6:
        inputs.append(ctx.make((m,), UNIT))
    return Sample(tuple(inputs), attrs)


def _transpose_total(sample: Sample) -> list[int]:
    """Per axis, the full size less the output size a SAME auto_pad asks for (in * stride)."""
    x, w = sample.inputs[0], sample.inputs[1]
    rank = x.ndim - 2
    strides = sample.attrs.get("strides", [1] * rank)
    dilations = sample.attrs.get("dilations", [1] * rank)
    adjust = sample.attrs.get("output_padding", [0] * rank)
    return [s * (n - 1) + a + (k - 1) * d + 1 - n * s for s, n, a, k, d in
            zip(strides, x.shape[2:], adjust, w.shape[2:], dilations, strict=True)]


def known_conv_transpose(sample: Sample, opset: int, peer: str) -> str | None:
    """The SAME output beyond the full result, onnx.reference's output_shape and groups."""
    auto_pad = sample.attrs.get("auto_pad", "NOTSET")
    if "output_shape" not in sample.attrs and auto_pad.startswith("SAME") and \
            min(_transpose_total(sample)) < 0:
        return (f"{peer} makes auto_pad SAME shorter than 'output_shape[i] = input_shape[i] * "
                "strides[i]' when the full result is shorter than that (onnxruntime clamps the "
                "padding at 0, onnx.reference shifts by a negative pad); settled by "
                "test_conv_transpose_same_is_input_times_stride_when_the_kernel_is_shorter")
    if peer == "onnx.reference" and "output_shape" in sample.attrs and auto_pad == "NOTSET":
        return ("onnx.reference 1.23.2 ignores output_shape without auto_pad (the spec: "
                "'output_shape can also be explicitly specified in which case pads values are "
                "auto generated'); settled by test_conv_transpose_splits_a_derived_padding_the_"
                "same_at_every_opset")
    if peer == "onnx.reference" and sample.attrs.get("group", 1) > 1:
        return ("onnx.reference 1.23.2 runs a grouped ConvTranspose wrong: it slices W's first "
                "axis (the C input channels) by M/group, adds all of B in every group and "
                "writes each group into one output channel (final[:, g:g + 1]); the spec: W is "
                "(C x M/group x k...), group divides the input and output channels")
    return None


# -- DeformConv and Col2Im -----------------------------------------------------------------------

def draw_deform_conv(ctx: SampleContext, opset: int) -> Sample:
    """A random DeformConv, mostly 2-D (1-D and 3-D sometimes): groups and offset groups that
    divide C, kernels 1..3, strides and dilations 1..2, explicit pads up to the dilated kernel
    (or none); offsets in [-2, 2] (some whole numbers), a mask in [0, 1] or none, bias or
    not."""
    rng = ctx.rng
    rank = int(rng.choice([1, 2, 3], p=[0.15, 0.7, 0.15]))
    kernel = _ints(rng.integers(1, 4, rank))
    strides, dilations = _steps(rng, rank, 2, 0.5), _steps(rng, rank, 2, 0.4)
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    pads = [int(rng.integers(0, e + 1)) for e in extent * 2] if rng.random() < 0.6 else None
    begin, end = (pads[:rank], pads[rank:]) if pads else ([0] * rank, [0] * rank)
    sizes = [max(int(rng.integers(1, 6 if rank < 3 else 4)), e - b - a)
             for e, b, a in zip(extent, begin, end, strict=True)]
    out = [(n + b + a - e) // s + 1
           for n, b, a, e, s in zip(sizes, begin, end, extent, strides, strict=True)]
    group, offset_group = int(rng.choice([1, 1, 2])), int(rng.choice([1, 1, 2]))
    c = int(np.lcm(group, offset_group)) * int(rng.integers(1, 3))
    m = group * int(rng.integers(1, 3))
    attrs = _window_attrs(rng, kernel, strides, dilations, pads, "NOTSET", rng.random() < 0.3)
    attrs.pop("auto_pad", None)  # DeformConv has no auto_pad
    if group > 1 or rng.random() < 0.2:
        attrs["group"] = group
    if offset_group > 1 or rng.random() < 0.2:
        attrs["offset_group"] = offset_group
    batch = int(rng.integers(1, 3))
    k = int(np.prod(kernel))
    offset = ctx.make((batch, offset_group * k * rank, *out), UNIT) * ctx.scalar(2.0)
    if rng.random() < 0.3:
        offset = np.round(offset)
    inputs: list[np.ndarray | None] = [ctx.make((batch, c, *sizes), UNIT),
                                       ctx.make((m, c // group, *kernel), UNIT), offset]
    inputs.append(ctx.make((m,), UNIT) if rng.random() < 0.5 else None)
    if rng.random() < 0.5:
        inputs.append(np.abs(ctx.make((batch, offset_group * k, *out), UNIT)))
    while inputs[-1] is None:
        inputs.pop()
    return Sample(tuple(inputs), attrs)


def known_deform_conv(sample: Sample, opset: int, peer: str) -> str | None:
    """onnx.reference's float32 sampling positions in float64."""
    if peer == "onnx.reference" and sample.inputs[0].dtype == np.float64:
        return ("onnx.reference 1.23.2 samples DeformConv through its GridSample, which "
                "denormalises the grid into a float32 array (op_grid_sample.py), so its "
                "float64 results are off by ~1e-7; float32 samples are judged as usual")
    return None


def draw_col2im(ctx: SampleContext, opset: int) -> Sample:
    """A random Col2Im, mostly 2-D (1-D and 3-D sometimes): blocks 1..3, strides 1..3,
    dilations 1..2 and asymmetric pads up to the dilated block, each attribute left out at
    random; the image at least one block wide (padded); channels 1..3, batch 1..2."""
    rng = ctx.rng
    rank = int(rng.choice([1, 2, 3], p=[0.15, 0.7, 0.15]))
    block = _ints(rng.integers(1, 4, rank))
    strides, dilations = _steps(rng, rank, 3, 0.6), _steps(rng, rank, 2, 0.4)
    extent = [(k - 1) * d + 1 for k, d in zip(block, dilations, strict=True)]
    pads = [int(rng.integers(0, e + 1)) for e in extent * 2] if rng.random() < 0.6 else None
    begin, end = (pads[:rank], pads[rank:]) if pads else ([0] * rank, [0] * rank)
    image = [max(int(rng.integers(1, 8 if rank < 3 else 5)), e - b - a)
             for e, b, a in zip(extent, begin, end, strict=True)]
    count = int(np.prod([(n + b + a - e) // s + 1 for n, b, a, e, s in
                         zip(image, begin, end, extent, strides, strict=True)]))
    attrs: dict[str, object] = {}
    if strides != [1] * rank or rng.random() < 0.3:
        attrs["strides"] = strides
    if dilations != [1] * rank or rng.random() < 0.3:
        attrs["dilations"] = dilations
    if pads is not None:
        attrs["pads"] = pads
    c, batch = int(rng.integers(1, 4)), int(rng.integers(1, 3))
    data = ctx.make((batch, c * int(np.prod(block)), count))
    return Sample((data, np.array(image, np.int64), np.array(block, np.int64)), attrs)


def known_col2im(sample: Sample, opset: int, peer: str) -> str | None:
    """onnxruntime's 1-D and 3-D Col2Im with a dilation."""
    if peer == "onnxruntime" and len(sample.inputs[2]) != 2 and \
            max(sample.attrs.get("dilations", [1])) > 1:
        return ("onnxruntime 1.32's Col2Im off 2-D misplaces taps when a dilation is > 1: "
                "image [1, 2, 3], block [1, 2, 2], dilations [1, 1, 2] and columns 1..4 give "
                "[1, 0, 2, 4, 0, 0], not [1, 0, 2, 3, 0, 4]; image [4], block [2], dilations "
                "[2] and two channels [[1, 2], [3, 4]], [[5, 6], [7, 8]] give channel 1 [7, 8, "
                "0, 0], not [5, 6, 7, 8] (the spec: PyTorch's fold, column (c, t) of block b "
                "at b * stride + t * dilation; onnx.reference agrees with refmnn)")
    return None


# -- ConvInteger and QLinearConv ------------------------------------------------------------------

def known_qlinear_conv(sample: Sample, opset: int, peer: str) -> str | None:
    """onnx.reference's per-channel w_scale off 2-D."""
    if peer == "onnx.reference" and sample.inputs[4].size > 1 and sample.inputs[0].ndim != 4:
        return ("onnx.reference 1.23.2 shapes a per-channel w_scale as np.expand_dims(w_scale, "
                "(0, 2, 3)), 2-D's (1, M, 1, 1), which broadcasts against another axis of a "
                "1-D or 3-D result; the spec: a 1-D w_scale holds one scale per output channel")
    return None


def _quant_conv(ctx: SampleContext) -> tuple[dict[str, object], np.ndarray, np.ndarray, int]:
    """(attributes, x in the context's type, w in uint8 or int8, M) of an integer Conv."""
    rng = ctx.rng
    rank = int(rng.choice([1, 2, 3], p=[0.25, 0.6, 0.15]))
    sizes, attrs, kernel, _ = _conv_window(rng, rank, 3)
    c, m, group = _channels(rng)
    if group > 1 or rng.random() < 0.2:
        attrs["group"] = group
    w_type = np.uint8 if rng.random() < 0.5 else np.int8
    x = ctx.make((int(rng.integers(1, 3)), c, *sizes))
    w = ctx.make((m, c // group, *kernel), dtype=w_type)
    return attrs, x, w, m


def _zero_point(ctx: SampleContext, dtype: np.dtype, m: int | None) -> np.ndarray:
    """A zero point of ``dtype``: a scalar, or one per output channel when ``m`` is given."""
    values = ctx.rng.integers(-3, 4, m if m else ()) + (0 if np.dtype(dtype).kind == "i" else 5)
    return np.asarray(values).astype(dtype)


def draw_conv_integer(ctx: SampleContext, opset: int) -> Sample:
    """A random ConvInteger: the Conv window draws (1-D to 3-D, groups, every auto_pad), x of
    the context's type and w uint8 or int8; no zero points, x's alone, w's alone (a scalar or
    one per output channel), or both."""
    rng = ctx.rng
    attrs, x, w, m = _quant_conv(ctx)
    inputs: list[np.ndarray | None] = [x, w, None, None]
    if rng.random() < 0.6:
        inputs[2] = _zero_point(ctx, x.dtype, None)
    if rng.random() < 0.6:
        inputs[3] = _zero_point(ctx, w.dtype, m if rng.random() < 0.4 else None)
    while inputs[-1] is None:
        inputs.pop()
    return Sample(tuple(inputs), attrs)


def known_conv_integer(sample: Sample, opset: int, peer: str) -> str | None:
    """onnx.reference's per-channel w_zero_point off 2-D."""
    w_zero_point = sample.inputs[3] if len(sample.inputs) > 3 else None
    if peer == "onnx.reference" and w_zero_point is not None and w_zero_point.size > 1 and \
            sample.inputs[0].ndim != 4:
        return ("onnx.reference 1.23.2 shapes a per-channel w_zero_point as np.expand_dims("
                "w_zero_point, (1, 2, 3)), 2-D's (M, 1, 1, 1), which broadcasts against another "
                "axis of a 1-D or 3-D W; the spec: a 1-D w_zero_point holds one zero point per "
                "output channel (M)")
    return None


def draw_qlinear_conv(ctx: SampleContext, opset: int) -> Sample:
    """A random QLinearConv: the Conv window draws, x and y of the context's type and w uint8
    or int8 (zero points of their types), w_scale and w_zero_point a scalar or one per output
    channel, y_scale near the accumulator's scale (few saturated outputs), an int32 bias or
    none."""
    rng = ctx.rng
    attrs, x, w, m = _quant_conv(ctx)
    per_channel = rng.random() < 0.4
    f = np.float32
    x_scale = f(rng.uniform(0.01, 0.1))
    w_scale = np.asarray(rng.uniform(0.01, 0.1, m if per_channel else ()), f)
    taps = w.size // m
    y_scale = f(x_scale * float(np.max(w_scale)) * rng.uniform(1.0, 4.0) * taps)
    inputs: list[np.ndarray | None] = [
        x, np.asarray(x_scale), _zero_point(ctx, x.dtype, None), w, w_scale,
        _zero_point(ctx, w.dtype, m if per_channel else None), np.asarray(y_scale),
        _zero_point(ctx, x.dtype, None)]
    if rng.random() < 0.5:
        inputs.append(rng.integers(-300, 300, m).astype(np.int32))
    return Sample(tuple(inputs), attrs)


_INTS = (DType.uint8, DType.int8)
SWEEPS = (
    Sweep("Conv", (1, 11, 22), draw_conv, dtypes=(DType.float32, DType.float64)),
    Sweep("ConvTranspose", (1, 11, 22), draw_conv_transpose,
          dtypes=(DType.float32, DType.float64), known=known_conv_transpose),
    Sweep("DeformConv", (19, 22), draw_deform_conv, dtypes=(DType.float32, DType.float64),
          known=known_deform_conv),
    Sweep("Col2Im", (18,), draw_col2im, dtypes=(DType.float32, DType.float64),
          known=known_col2im),
    Sweep("ConvInteger", (10,), draw_conv_integer, dtypes=_INTS, known=known_conv_integer),
    Sweep("QLinearConv", (10,), draw_qlinear_conv, dtypes=_INTS, known=known_qlinear_conv),
)
