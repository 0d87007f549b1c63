"""MaxPool, AveragePool, LpPool, MaxUnpool, the global pools and MaxRoiPool: 1-D to 3-D windows
x strides x dilations x asymmetric pads x every auto_pad x ceil_mode, each attribute drawn only
at the opsets that have it; MaxPool's Indices in both storage orders."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import ANY, SMALL_INT, Sample, SampleContext, Sweep

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _ints(values: np.ndarray | list[int]) -> list[int]:
    return [int(v) for v in values]


def _rank(rng: np.random.Generator) -> int:
    return int(rng.choice([1, 2, 3], p=[0.3, 0.5, 0.2]))


def _windows_read_input(size: int, k: int, s: int, d: int, begin: int, end: int,
                        auto_pad: str, ceil_mode: int) -> bool:
    """Whether every window of one axis holds at least one input element (the spec leaves a
    window of padding alone undefined: onnxruntime gives the lowest finite value and a
    negative index, onnx.reference NaN, refmnn -inf)."""
    extent = (k - 1) * d + 1
    if auto_pad.startswith("SAME"):
        out = -(-size // s)
        total = max(0, (out - 1) * s + extent - size)
        begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
    elif auto_pad == "VALID":
        out, begin = (size - extent) // s + 1, 0
    else:
        span = size + begin + end - extent
        out = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (out - 1) * s >= size + begin:
            out -= 1
    return all(any(0 <= o * s - begin + t * d < size for t in range(k)) for o in range(out))


def _pool_window(rng: np.random.Generator, rank: int, ceil: bool, dilated: bool
                 ) -> tuple[list[int], dict[str, object]]:
    """(input spatial sizes, attributes) of a windowed pool: kernels 1..4 (3-D: 1..3), strides
    1..3, dilations 1..3 where ``dilated``, pads below the kernel (the bound onnxruntime
    keeps) or an auto_pad, ceil_mode where ``ceil``; every window reads an input element."""
    kernel = _ints(rng.integers(1, (3 if rank == 3 else 4) + 1, rank))
    strides = _ints(rng.integers(1, 4, rank)) if rng.random() < 0.7 else [1] * rank
    dilations = _ints(rng.integers(1, 4, rank)) if dilated and rng.random() < 0.4 else [1] * rank
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    auto_pad = str(rng.choice(AUTO_PADS, p=[0.55, 0.15, 0.15, 0.15]))
    pads: list[int] | None = None
    if auto_pad == "NOTSET" and rng.random() < 0.75:
        pads = [int(rng.integers(0, k)) for k in kernel * 2]
    begin, end = (pads[:rank], pads[rank:]) if pads else ([0] * rank, [0] * rank)
    ceil_mode = int(ceil and rng.random() < 0.4)
    sizes = []
    for k, s, d, b, a in zip(kernel, strides, dilations, begin, end, strict=True):
        size = max(int(rng.integers(1, (k - 1) * d + 7)), (k - 1) * d + 1 - b - a)
        while not _windows_read_input(size, k, s, d, b, a, auto_pad, ceil_mode):
            size += 1
        sizes.append(size)
    attrs: dict[str, object] = {"kernel_shape": kernel}
    if strides != [1] * rank or rng.random() < 0.3:
        attrs["strides"] = strides
    if dilated and (dilations != [1] * rank or rng.random() < 0.3):
        attrs["dilations"] = dilations
    if pads is not None:
        attrs["pads"] = pads
    if auto_pad != "NOTSET" or rng.random() < 0.2:
        attrs["auto_pad"] = auto_pad
    if ceil_mode or ceil and rng.random() < 0.2:
        attrs["ceil_mode"] = ceil_mode
    return sizes, attrs


def _batch(rng: np.random.Generator) -> tuple[int, int]:
    return int(rng.integers(1, 3)), int(rng.integers(1, 4))


def draw_max_pool(ctx: SampleContext, opset: int) -> Sample:
    """A random MaxPool, 1-D to 3-D: the window draws (dilations and ceil_mode from opset 10),
    data with ties half the time (small integers); from opset 8 the Indices output (in either
    storage_order) half the time."""
    rng = ctx.rng
    rank = _rank(rng)
    sizes, attrs = _pool_window(rng, rank, opset >= 10, opset >= 10)
    outputs = 1
    if rng.random() < 0.5:
        outputs = 2
        if rng.random() < 0.7:
            attrs["storage_order"] = int(rng.integers(0, 2))
    x = ctx.make((*_batch(rng), *sizes), SMALL_INT if rng.random() < 0.5 else ANY)
    return Sample((x,), attrs, outputs=outputs)


def draw_average_pool(ctx: SampleContext, opset: int) -> Sample:
    """A random AveragePool, 1-D to 3-D: the window draws (ceil_mode from opset 10, dilations
    from 19) and count_include_pad 0 or 1, written out or left to its default."""
    rng = ctx.rng
    rank = _rank(rng)
    sizes, attrs = _pool_window(rng, rank, opset >= 10, opset >= 19)
    if rng.random() < 0.7:
        attrs["count_include_pad"] = int(rng.integers(0, 2))
    return Sample((ctx.make((*_batch(rng), *sizes)),), attrs)


def draw_lp_pool(ctx: SampleContext, opset: int) -> Sample:
    """A random LpPool, 1-D to 3-D: the window draws (ceil_mode and dilations from opset 18)
    and p 1..4 or left to its default 2."""
    rng = ctx.rng
    rank = _rank(rng)
    sizes, attrs = _pool_window(rng, rank, opset >= 18, opset >= 18)
    if rng.random() < 0.8:
        attrs["p"] = int(rng.integers(1, 5))
    return Sample((ctx.make((*_batch(rng), *sizes)),), attrs)


def _same_totals(sample: Sample) -> list[int]:
    """Per axis, the SAME padding before any clamp: (ceil(in / s) - 1) * s + extent - in."""
    x, attrs = sample.inputs[0], sample.attrs
    rank = x.ndim - 2
    strides = attrs.get("strides", [1] * rank)
    dilations = attrs.get("dilations", [1] * rank)
    return [(-(-n // s) - 1) * s + (k - 1) * d + 1 - n for n, s, k, d in
            zip(x.shape[2:], strides, attrs["kernel_shape"], dilations, strict=True)]


def _onnx_reference_pool(sample: Sample) -> str | None:
    """What onnx.reference 1.23.2's MaxPool, AveragePool and LpPool read otherwise."""
    attrs = sample.attrs
    auto_pad = attrs.get("auto_pad", "NOTSET")
    unit_steps = max(attrs.get("strides", [1])) == 1 and max(attrs.get("dilations", [1])) == 1
    if auto_pad == "SAME_LOWER":
        return ("onnx.reference 1.23.2 sizes SAME_LOWER as floor(input / stride) (op_max_pool.py"
                ", op_pool_common.py) and splits its padding otherwise; the spec: 'SAME_UPPER or "
                "SAME_LOWER: output_spatial_shape[i] = ceil(input_spatial_shape[i] / "
                "strides_spatial_shape[i])' (onnxruntime agrees with refmnn)")
    if auto_pad == "NOTSET" and unit_steps and any(attrs.get("pads", [0])):
        return ("onnx.reference 1.23.2's common pool path (strides and dilations 1) reads 2-D "
                "pads as [top, bottom, left, right] and other ranks' pads as a pad_shape "
                "without padding; the spec's order is [x1_begin, x2_begin, ..., x1_end, "
                "x2_end, ...] (onnxruntime agrees with refmnn)")
    return None


def known_pool(sample: Sample, opset: int, peer: str) -> str | None:
    """The SAME and VALID details onnxruntime and onnx.reference read otherwise."""
    attrs = sample.attrs
    auto_pad = attrs.get("auto_pad", "NOTSET")
    dilated = max(attrs.get("dilations", [1])) > 1
    if auto_pad.startswith("SAME") and min(_same_totals(sample)) < 0:
        return (f"{peer} pads SAME by a negative amount (cropping: windows start past the "
                "first element) where the window and stride cover more than the input: "
                "'pad_shape[i] = (output_spatial_shape[i] - 1) * strides_spatial_shape[i] + "
                "((kernel_spatial_shape[i] - 1) * dilations[i] + 1) - input_spatial_shape[i]' "
                "is < 0; refmnn clamps it at 0 as TensorFlow's SAME (which the spec cites) does "
                "and as both peers' Conv do (refmnn/ops/_window.py documents it; the spec's "
                "'pad the input' does not say what a negative pad means)")
    if peer == "onnx.reference" and sample.outputs == 2:
        return ("onnx.reference 1.23.2's MaxPool Indices leave out the (n * C + c) * "
                "prod(spatial) offset and ignore storage_order (a [1, 2, 2, 3] input, kernel 1, "
                "storage_order 1: 0..5 twice, not [0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11] as "
                "onnxruntime and refmnn give); the spec: 'The indices are computed as flatten "
                "1-D tensor'; Y itself is judged on the samples without Indices")
    if peer == "onnx.reference" and _onnx_reference_pool(sample):
        return _onnx_reference_pool(sample)
    if peer == "onnxruntime" and auto_pad.startswith("SAME") and dilated:
        return ("onnxruntime 1.32 pools SAME with a dilation > 1 to a wrong size: input 6, "
                "kernel 3, dilation 2, SAME_UPPER gives 4 outputs, not 'ceil(input_spatial_"
                "shape[i] / strides_spatial_shape[i])' = 6 (onnx.reference agrees with refmnn)")
    if peer == "onnxruntime" and auto_pad == "VALID" and attrs.get("ceil_mode", 0):
        return ("onnxruntime 1.32 rounds VALID up with ceil_mode (input 7, kernel 3, stride 3: "
                "3 outputs); the spec's VALID with ceil_mode is 'ceil((input_spatial_shape[i] "
                "- ((kernel_spatial_shape[i] - 1) * dilations[i] + 1) + 1) / "
                "strides_spatial_shape[i])' = 2")
    return None


def known_average_lp_pool(sample: Sample, opset: int, peer: str) -> str | None:
    """known_pool's, and onnx.reference's AveragePool and LpPool with dilations or ceil_mode."""
    attrs = sample.attrs
    if peer == "onnx.reference" and max(attrs.get("dilations", [1])) > 1:
        return ("onnx.reference 1.23.2's AveragePool and LpPool misplace dilated windows "
                "(LpPool p=1, VALID, kernel 2, dilation 3 on 7 elements gives 6 outputs, not "
                "'floor((7 - 4) / 1) + 1' = 4; AveragePool SAME_UPPER, kernel 2, dilation 2, "
                "stride 3 on [1, 2, 4, 8, 16, 32, 64] gives [2.5, 20, 0], not [2, 10, 32])")
    if peer == "onnx.reference" and attrs.get("ceil_mode", 0):
        return ("onnx.reference 1.23.2's AveragePool and LpPool with ceil_mode average the wrong "
                "taps: [1, 2, 4, 8], kernel 3, stride 3 gives [1.5, 4] (AveragePool) and [3, 12] "
                "(LpPool p=1), not [7/3, 8] and [7, 8]; onnxruntime agrees with refmnn on the "
                "last window, which averages what it covers (spec: 'Sliding windows that would "
                "start in the right padded region are ignored')")
    return known_pool(sample, opset, peer)


# -- MaxUnpool ----------------------------------------------------------------------------------

def draw_max_unpool(ctx: SampleContext, opset: int) -> Sample:
    """A random MaxUnpool, 1-D to 3-D, the inverse of a MaxPool with kernels 1..3, strides 1..3
    and pads below the kernel: I holds, per pooled element, a random position of its window
    inside the unpooled input (flat over N, C and the spatial axes), X the value found there
    in a random source (so repeated positions carry equal values); output_shape, when drawn,
    is the default unpooled shape or one to stride - 1 larger per axis (sizes the pool maps
    to the same X)."""
    rng = ctx.rng
    rank = _rank(rng)
    kernel = _ints(rng.integers(1, 4, rank))
    strides = _ints(rng.integers(1, 4, rank)) if rng.random() < 0.8 else [1] * rank
    pads = [int(rng.integers(0, k)) for k in kernel * 2] if rng.random() < 0.4 else [0] * 2 * rank
    pooled = _ints(rng.integers(1, 4, rank))
    unpooled = [(p - 1) * s - b - a + k for p, s, b, a, k in
                zip(pooled, strides, pads[:rank], pads[rank:], kernel, strict=True)]
    if min(unpooled) < 1:
        pads = [0] * 2 * rank
        unpooled = [(p - 1) * s + k for p, s, k in zip(pooled, strides, kernel, strict=True)]
    n, c = _batch(rng)
    grids = np.meshgrid(*(np.arange(p) for p in pooled), indexing="ij")
    flat = np.zeros((n, c, *pooled), np.int64)
    for axis in range(rank):
        start = grids[axis] * strides[axis] - pads[axis]
        lo, hi = np.maximum(start, 0), np.minimum(start + kernel[axis], unpooled[axis])
        hi = np.maximum(hi, lo + 1)
        at = np.minimum(lo + (rng.random((n, c, *pooled)) * (hi - lo)).astype(np.int64),
                        unpooled[axis] - 1)
        flat = flat * unpooled[axis] + at
    plane = int(np.prod(unpooled))
    flat += np.arange(n * c, dtype=np.int64).reshape(n, c, *[1] * rank) * plane
    source = ctx.make((n * c * plane,))
    attrs: dict[str, object] = {"kernel_shape": kernel}
    if strides != [1] * rank or rng.random() < 0.3:
        attrs["strides"] = strides
    if any(pads) or rng.random() < 0.3:
        attrs["pads"] = pads
    inputs: list[np.ndarray] = [source[flat], flat]
    if rng.random() < 0.5:
        grown = [u + int(rng.integers(0, s)) for u, s in zip(unpooled, strides, strict=True)]
        inputs.append(np.array([n, c, *grown], np.int64))
    return Sample(tuple(inputs), attrs)


def known_max_unpool(sample: Sample, opset: int, peer: str) -> str | None:
    """onnxruntime reads I in output_shape's layout."""
    if peer == "onnxruntime" and len(sample.inputs) == 3:
        return ("onnxruntime 1.32 reads I as flat positions in output_shape's layout (PyTorch's "
                "reading); refmnn reads them in the default unpooled layout and places that at "
                "the origin of output_shape, as the ONNX test test_maxunpool_export_with_"
                "output_shape expects (I [5, 7, 13, 15] with output_shape [1, 1, 5, 5] puts X "
                "at (1, 1), (1, 3), (3, 1), (3, 3)); the spec's text does not say which layout")
    return None


# -- global pools and MaxRoiPool -----------------------------------------------------------------

def _global_input(ctx: SampleContext) -> np.ndarray:
    rng = ctx.rng
    rank = int(rng.choice([1, 2, 3], p=[0.3, 0.45, 0.25]))
    return ctx.make((*_batch(rng), *_ints(rng.integers(1, 6 if rank < 3 else 4, rank))))


def draw_global(ctx: SampleContext, opset: int) -> Sample:
    """A random GlobalAveragePool or GlobalMaxPool input, 1-D to 3-D, sizes 1..5."""
    return Sample((_global_input(ctx),))


def draw_global_lp(ctx: SampleContext, opset: int) -> Sample:
    """A random GlobalLpPool input, 1-D to 3-D, with p 1..4 or left to its default 2."""
    x = _global_input(ctx)
    return Sample((x,), {"p": int(ctx.rng.integers(1, 5))} if ctx.rng.random() < 0.8 else {})


def known_global_max_pool(sample: Sample, opset: int, peer: str) -> str | None:
    """onnx.reference's GlobalMaxPool off 2-D."""
    if peer == "onnx.reference" and sample.inputs[0].ndim != 4:
        return ("onnx.reference 1.23.2's GlobalMaxPool reduces axes (ndim - 2, ndim - 1), the "
                "spatial axes of a 4-D input only (1-D: it reduces C and drops an axis); the "
                "spec: 'max pooling across the values in the same channel', Y (N, C, 1, ..., 1)")
    return None


def draw_max_roi_pool(ctx: SampleContext, opset: int) -> Sample:
    """A random MaxRoiPool: X (1..2, 1..3, 2..8, 2..8), 1..4 RoIs whose corners are quarters
    from -1 to the image size + 1 (some reversed, some on rounding ties), spatial_scale 0.5,
    1 or 2 (or left out), pooled_shape 1..3 per axis."""
    rng = ctx.rng
    n, c = _batch(rng)
    h, w = _ints(rng.integers(2, 9, 2))
    scale = float(rng.choice([0.5, 1.0, 2.0])) if rng.random() < 0.7 else None
    reach = 1.0 / (scale or 1.0)
    count = int(rng.integers(1, 5))
    rois = np.zeros((count, 5))
    rois[:, 0] = rng.integers(0, n, count)
    for j, size in ((1, w), (2, h)):
        first = np.round(rng.uniform(-1, size * reach, count) * 4) / 4
        rois[:, j] = first
        rois[:, j + 2] = first + np.round(rng.uniform(-0.5, size * reach, count) * 4) / 4
    attrs: dict[str, object] = {"pooled_shape": _ints(rng.integers(1, 4, 2))}
    if scale is not None:
        attrs["spatial_scale"] = scale
    return Sample((ctx.make((n, c, h, w)), ctx.array(rois)), attrs)


_FLOATS = (DType.float32, DType.float64)
SWEEPS = (
    Sweep("MaxPool", (8, 10, 11, 12, 22), draw_max_pool, dtypes=(*_FLOATS, DType.float16),
          known=known_pool),
    Sweep("MaxPool", (12, 22), draw_max_pool, dtypes=(DType.int8, DType.uint8), known=known_pool),
    Sweep("AveragePool", (7, 10, 11, 19, 22), draw_average_pool, dtypes=_FLOATS,
          known=known_average_lp_pool),
    Sweep("LpPool", (11, 18, 22), draw_lp_pool, dtypes=_FLOATS, known=known_average_lp_pool),
    Sweep("MaxUnpool", (11, 22), draw_max_unpool, dtypes=_FLOATS, known=known_max_unpool),
    Sweep("GlobalAveragePool", (1, 22), draw_global, dtypes=_FLOATS),
    Sweep("GlobalMaxPool", (1, 22), draw_global, dtypes=(*_FLOATS, DType.float16),
          known=known_global_max_pool),
    Sweep("GlobalLpPool", (2, 22), draw_global_lp, dtypes=_FLOATS),
    Sweep("MaxRoiPool", (1, 22), draw_max_roi_pool, dtypes=_FLOATS),
)
