"""Indexing ops: the gathers and scatters (negative indices, every axis, batch_dims, each
reduction of its opset), OneHot (axis, depth and index dtypes, out-of-range indices), TopK
(largest, sorted, K, ties), Unique (axis, sorted, 1-4 outputs), Compress, NonZero and
TensorScatter over ranks 1-4 with odd and empty sizes."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import ANY, EXTREMAL, SMALL_INT, Sample, SampleContext, Sweep


def _shape(rng: np.random.Generator, rank: int, high: int = 5, empty: float = 0.0
           ) -> tuple[int, ...]:
    """A shape of ``rank`` dims in [1, high], each 0 with probability ``empty``."""
    return tuple(0 if rng.random() < empty else int(rng.integers(1, high + 1))
                 for _ in range(rank))


def _signed(rng: np.random.Generator, index: np.ndarray, size: int) -> np.ndarray:
    """``index`` (in [0, size)) with about a third of its entries written as i - size."""
    return np.where(rng.random(index.shape) < 0.35, index - size, index)


def _index_dtype(rng: np.random.Generator) -> type:
    return np.int64 if rng.random() < 0.7 else np.int32


def _axis(rng: np.random.Generator, rank: int) -> tuple[int, int]:
    """(axis in [0, rank), the same or its negative spelling)."""
    axis = int(rng.integers(0, rank))
    return axis, axis - rank if rng.random() < 0.5 else axis


# =============================================================================== gathers


def draw_gather(ctx: SampleContext, opset: int) -> Sample:
    """Gather: data of rank 1-4 (off-axis dims may be 0), int32/int64 indices of rank 0-3
    (possibly empty) in [-s, s-1] on any axis, the axis spelled negative half the time."""
    rng = ctx.rng
    rank = int(rng.integers(1, 5))
    axis, spelled = _axis(rng, rank)
    shape = list(_shape(rng, rank, empty=0.08))
    shape[axis] = max(shape[axis], 1)
    ind_shape = _shape(rng, int(rng.integers(0, 4)), 3, empty=0.08)
    idx = _signed(rng, rng.integers(0, shape[axis], ind_shape), shape[axis])
    return Sample((ctx.make(shape), idx.astype(_index_dtype(rng))), {"axis": spelled})


def draw_gather_elements(ctx: SampleContext, opset: int) -> Sample:
    """GatherElements: data of rank 1-4; indices of its rank, no larger off the axis (smaller
    half the time), any length on it, entries in [-s, s-1]."""
    rng = ctx.rng
    rank = int(rng.integers(1, 5))
    axis, spelled = _axis(rng, rank)
    shape = _shape(rng, rank)
    ind_shape = [int(rng.integers(0, 5)) if i == axis else
                 (d if rng.random() < 0.5 else int(rng.integers(1, d + 1)))
                 for i, d in enumerate(shape)]
    idx = _signed(rng, rng.integers(0, shape[axis], ind_shape), shape[axis])
    return Sample((ctx.make(shape), idx.astype(_index_dtype(rng))), {"axis": spelled})


def draw_gather_nd(ctx: SampleContext, opset: int) -> Sample:
    """GatherND: data of rank 1-4, batch_dims b (opset 12+) below min(q, r), index tuples of
    length 1..r-b (a slice when shorter), 0-2 index dims between, negative coordinates."""
    rng = ctx.rng
    rank = int(rng.integers(1, 5))
    shape = _shape(rng, rank)
    batch = int(rng.integers(0, rank)) if opset >= 12 and rng.random() < 0.6 else 0
    k = int(rng.integers(1, rank - batch + 1))
    middle = _shape(rng, int(rng.integers(0, 3)), 3, empty=0.05)
    ind_shape = shape[:batch] + middle + (k,)
    columns = [_signed(rng, rng.integers(0, shape[batch + j], ind_shape[:-1]), shape[batch + j])
               for j in range(k)]
    idx = np.stack(columns, axis=-1).astype(np.int64).reshape(ind_shape)
    attrs = {"batch_dims": batch} if opset >= 12 and (batch or rng.random() < 0.5) else {}
    return Sample((ctx.make(shape), idx), attrs)


# =============================================================================== scatters


def _reductions(opset: int) -> list[str]:
    return (["none"] + (["add", "mul"] if opset >= 16 else [])
            + (["max", "min"] if opset >= 18 else []))


def _scatter_elements(ctx: SampleContext, opset: int, reductions: list[str]) -> Sample:
    rng = ctx.rng
    rank = int(rng.integers(1, 5))
    axis, spelled = _axis(rng, rank)
    shape = _shape(rng, rank)
    reduction = str(rng.choice(reductions))
    ind_shape = [d if rng.random() < 0.5 else int(rng.integers(1, d + 1)) for d in shape]
    if reduction == "none":  # distinct targets along the axis: the first n of a permutation
        ind_shape[axis] = int(rng.integers(0, shape[axis] + 1))
        keys_shape = list(ind_shape)
        keys_shape[axis] = shape[axis]
        order = np.argsort(rng.random(keys_shape), axis=axis)
        idx = np.take(order, np.arange(ind_shape[axis]), axis=axis)
    else:  # duplicates allowed, and more updates than the axis holds
        ind_shape[axis] = int(rng.integers(0, 2 * shape[axis] + 2))
        idx = rng.integers(0, shape[axis], ind_shape)
    idx = _signed(rng, idx, shape[axis]).astype(_index_dtype(rng))
    updates = ctx.make(ind_shape, SMALL_INT if reduction == "mul" else ANY)
    attrs: dict[str, object] = {"axis": spelled}
    if reduction != "none" or (opset >= 16 and rng.random() < 0.3):
        attrs["reduction"] = reduction
    return Sample((ctx.make(shape), idx, updates), attrs)


def draw_scatter_elements(ctx: SampleContext, opset: int) -> Sample:
    """ScatterElements: data of rank 1-4, indices/updates of its rank no larger off the axis;
    'none' writes each target once (a partial permutation along the axis), the reductions
    of the opset (add/mul from 16, max/min from 18) get duplicates and more updates than
    slots; a third of the indices negative."""
    return _scatter_elements(ctx, opset, _reductions(opset))


def draw_scatter(ctx: SampleContext, opset: int) -> Sample:
    """Scatter-9/11 (deprecated): ScatterElements without reduction, distinct targets."""
    return _scatter_elements(ctx, opset, ["none"])


def draw_scatter_nd(ctx: SampleContext, opset: int) -> Sample:
    """ScatterND: data of rank 1-4, index tuples of length k in 1..r (whole slices when
    shorter) under 0-2 index dims; 'none' writes distinct tuples, the reductions of the opset
    repeat some; a third of the coordinates negative."""
    rng = ctx.rng
    rank = int(rng.integers(1, 5))
    shape = _shape(rng, rank)
    k = int(rng.integers(1, rank + 1))
    reduction = str(rng.choice(_reductions(opset)))
    slots = int(np.prod(shape[:k]))
    middle = list(_shape(rng, int(rng.integers(0, 3)), 3))
    count = int(np.prod(middle))
    if reduction == "none" and count > slots:
        middle, count = [slots], slots
    flat = (rng.choice(slots, count, replace=False) if reduction == "none"
            else rng.integers(0, slots, count))
    coords = np.stack(np.unravel_index(flat, shape[:k]), axis=-1).reshape(middle + [k])
    idx = np.stack([_signed(rng, coords[..., j], shape[j]) for j in range(k)], axis=-1)
    updates_shape = tuple(middle) + shape[k:]
    updates = ctx.make(updates_shape, SMALL_INT if reduction == "mul" else ANY)
    attrs = {"reduction": reduction} if reduction != "none" or (
        opset >= 16 and rng.random() < 0.3) else {}
    return Sample((ctx.make(shape), idx.astype(np.int64), updates), attrs)


def draw_tensor_scatter(ctx: SampleContext, opset: int) -> Sample:
    """TensorScatter: a cache of rank 2-4 with a sequence axis other than the batch (negative
    half the time, default -2 sometimes), an update of 0..max_seq steps; linear write
    indices leave room for the update, circular ones are any start in [0, 2 * max_seq)."""
    rng = ctx.rng
    rank = int(rng.integers(2, 5))
    axis = int(rng.integers(1, rank))
    shape = list(_shape(rng, rank, 4))
    shape[axis] = int(rng.integers(1, 7))
    length = shape[axis]
    steps = int(rng.integers(0, length + 1))
    mode = str(rng.choice(["linear", "circular"]))
    update_shape = list(shape)
    update_shape[axis] = steps
    high = length - steps + 1 if mode == "linear" else 2 * length
    write = rng.integers(0, high, shape[0]).astype(np.int64)
    attrs: dict[str, object] = {}
    if axis != rank - 2 or rng.random() < 0.5:
        attrs["axis"] = axis - rank if rng.random() < 0.5 else axis
    if mode == "circular" or rng.random() < 0.3:
        attrs["mode"] = mode
    inputs: tuple[np.ndarray, ...] = (ctx.make(shape), ctx.make(update_shape))
    if mode == "circular" or rng.random() < 0.7:
        inputs += (write,)
    return Sample(inputs, attrs)


# =============================================================================== OneHot


def draw_one_hot(ctx: SampleContext, opset: int) -> Sample:
    """OneHot: indices of rank 1-3 (int64, int32 or float32, whole or not) in [-depth-2,
    depth+1], so some negative and some off the table; depth a scalar or one-element tensor
    of int64, int32 or float32 (a fraction half the float time, truncated); values [off, on]
    of the sweep dtype; the new axis anywhere in [-r-1, r], or the default -1."""
    rng = ctx.rng
    rank = int(rng.integers(1, 4))  # onnx's OneHot schema refuses a scalar
    depth = int(rng.integers(1, 7))
    ind_shape = _shape(rng, rank, 4, empty=0.05)
    idx = rng.integers(-depth - 2, depth + 2, ind_shape)
    # int64 indices and depth more often: onnxruntime has kernels for a few combinations
    idx = idx.astype(rng.choice([np.int64, np.int32, np.float32], p=[0.5, 0.25, 0.25]))
    if idx.dtype == np.float32 and rng.random() < 0.5:  # fractions: cast to int64 truncates
        idx = idx + rng.choice([-0.75, -0.25, 0.25, 0.75], idx.shape).astype(np.float32)
    depth_type = rng.choice([np.int64, np.int32, np.float32], p=[0.5, 0.25, 0.25])
    depth_value = depth + (0.6 if depth_type == np.float32 and rng.random() < 0.5 else 0)
    depth_array = np.array(depth_value if rng.random() < 0.5 else [depth_value], depth_type)
    values = ctx.array([int(rng.integers(-3, 3)), int(rng.integers(3, 9))])
    attrs = {}
    if rng.random() < 0.7:
        attrs["axis"] = int(rng.integers(-rank - 1, rank + 1))
    return Sample((idx, depth_array, values), attrs)


def known_one_hot(sample: Sample, opset: int, peer: str) -> str | None:
    """OneHot-9 with an index in [-depth, -1] (after the cast to int64): the peers wrap it
    (opset 11's rule); onnx.reference with a fractional depth or index: it does not cast."""
    idx, depth_value = sample.inputs[0], float(np.asarray(sample.inputs[1]).reshape(-1)[0])
    fractional = idx.dtype.kind == "f" and (idx != np.trunc(idx)).any()
    if peer == "onnx.reference" and (depth_value != int(depth_value) or fractional):
        return ("onnx.reference makes np.arange(depth) classes (ceil(depth) for a fraction) and "
                "compares float indices with them as they are; OneHot says 'In case depth/"
                "indices is of non-integer type, it will be casted to int64 before use' (a "
                "truncation, as onnxruntime does)")
    wrapped = idx.astype(np.int64)
    depth = int(depth_value)
    if opset < 11 and ((wrapped < 0) & (wrapped >= -depth)).any():
        return (f"{peer} wraps negative indices at OneHot-9; OneHot-9 says 'values outside the "
                "range [0, depth) will result in one-hot representation with all off_value "
                "values' (test_onehot_negative_indices_are_off_at_opset_9_and_wrap_from_11)")
    return None


# =============================================================================== selections


def draw_non_zero(ctx: SampleContext, opset: int) -> Sample:
    """NonZero: X of rank 1-4 (some dims 0), a scalar one time in ten, about half zeros;
    floats now and then with -0.0, NaN, infinities and subnormals."""
    rng = ctx.rng
    rank = 0 if rng.random() < 0.1 else int(rng.integers(1, 5))
    shape = _shape(rng, rank, 4, empty=0.08)
    x = ctx.make(shape, EXTREMAL if ctx.is_float and rng.random() < 0.3 else SMALL_INT)
    if x.dtype != np.bool_:
        x = np.where(rng.random(shape) < 0.3, x.dtype.type(0), x)
    return Sample((x,))


def known_non_zero(sample: Sample, opset: int, peer: str) -> str | None:
    """NonZero of a scalar: onnxruntime answers NumPy's (1, N)."""
    if peer == "onnxruntime" and sample.inputs[0].ndim == 0:
        return ("onnxruntime 1.32 gives a scalar's indices shape (1, N); NonZero says 'for "
                "scalar input, NonZero produces output shape (0, N) instead of (1, N), which "
                "is different from Numpy's behavior'")
    return None


def draw_compress(ctx: SampleContext, opset: int) -> Sample:
    """Compress: data of rank 1-4, a bool condition as long as the axis (or the flattened
    input, axis absent) or shorter, now and then one longer with False beyond; the axis
    negative half the time."""
    rng = ctx.rng
    rank = int(rng.integers(1, 5))
    shape = _shape(rng, rank, 4, empty=0.05)
    attrs = {}
    if rng.random() < 0.75:
        axis, attrs["axis"] = _axis(rng, rank)
        size = shape[axis]
    else:
        size = int(np.prod(shape))
    length = int(rng.integers(0, size + 1))
    cond = rng.random(length) < 0.5
    if rng.random() < 0.15:
        cond = np.concatenate([rng.random(size) < 0.5, np.zeros(int(rng.integers(1, 3)), bool)])
    return Sample((ctx.make(shape), cond), attrs)


def draw_unique(ctx: SampleContext, opset: int) -> Sample:
    """Unique: X of rank 1-3 from few values (so slices repeat), flattened or along an axis
    (negative half the time), sorted or in order of first occurrence, 1-4 outputs.  Along an
    axis only that axis may be empty: empty slices crash onnxruntime 1.32 (std::terminate)."""
    rng = ctx.rng
    rank = int(rng.integers(1, 4))
    shape = list(_shape(rng, rank, 5, empty=0.04))
    attrs = {}
    axis = None
    if rng.random() < 0.6:
        axis, attrs["axis"] = _axis(rng, rank)
        shape = [d if d or i == axis else 1 for i, d in enumerate(shape)]
    x = ctx.make(shape, SMALL_INT)
    if x.dtype != np.bool_ and rng.random() < 0.5:
        x = (x % 3).astype(x.dtype)
    if axis is not None and rank > 1 and shape[axis] and rng.random() < 0.5:
        x = np.take(x, rng.integers(0, shape[axis], shape[axis]), axis=axis)  # repeat slices
    if rng.random() < 0.7:
        attrs["sorted"] = int(rng.integers(0, 2))
    return Sample((x,), attrs, outputs=int(rng.integers(1, 5)))


def known_unique(sample: Sample, opset: int, peer: str) -> str | None:
    """onnx.reference's Unique with sorted=0: wrong unless X is cut along axis 0 (or is 1-D
    and flattened) and more than Y is asked for."""
    x, axis = sample.inputs[0], sample.attrs.get("axis")
    whole_rows = (x.ndim == 1 if axis is None else axis % x.ndim == 0)
    if peer == "onnx.reference" and sample.attrs.get("sorted", 1) == 0 and (
            sample.outputs == 1 or not whole_rows):
        return ("onnx.reference ignores sorted=0 when only Y is asked for, and otherwise "
                "rebuilds Y with np.take(x, indices, axis=0) whatever the axis (and unflattened); "
                "Unique says Y holds the unique values 'in the order of the first occurrence'")
    return None


def draw_top_k(ctx: SampleContext, opset: int) -> Sample:
    """TopK: X of rank 1-4 along any axis (negative half the time), K in [0, axis size]
    (an attribute at opset 1, where K >= 1, a one-element int64 input after), largest and
    sorted from 11 (sorted=0 only for K <= 1, where the order is still defined); distinct
    values three times in four (ties otherwise, which the lower index breaks)."""
    rng = ctx.rng
    rank = int(rng.integers(1, 5))
    axis, spelled = _axis(rng, rank)
    shape = _shape(rng, rank, 6)
    if rng.random() < 0.75:
        x = rng.permutation(int(np.prod(shape))).reshape(shape) - int(np.prod(shape)) // 2
        x = ctx.array(x * (0.25 if ctx.is_float else 1))
    else:
        x = ctx.make(shape, SMALL_INT)
    k = int(rng.integers(0 if opset >= 10 else 1, shape[axis] + 1))  # TopK-1: k > 0
    attrs: dict[str, object] = {}
    if spelled != rank - 1 or rng.random() < 0.5:
        attrs["axis"] = spelled
    if opset < 10:
        return Sample((x,), {**attrs, "k": k}, outputs=2)
    if opset >= 11:
        if rng.random() < 0.6:
            attrs["largest"] = int(rng.integers(0, 2))
        if rng.random() < 0.3:  # unsorted output has no defined order unless K <= 1
            attrs["sorted"] = int(k > 1 or rng.random() < 0.5)
    return Sample((x, np.array([k], np.int64)), attrs, outputs=2)


_SCATTER_TYPES = (DType.float32, DType.float16, DType.int64, DType.int32, DType.uint8)

SWEEPS = (
    Sweep("Gather", (1, 11, 13), draw_gather, dtypes=(DType.float32, DType.int64, DType.bool)),
    Sweep("GatherElements", (11, 13), draw_gather_elements,
          dtypes=(DType.float32, DType.int64)),
    Sweep("GatherND", (11, 12, 13), draw_gather_nd, dtypes=(DType.float32, DType.int64)),
    Sweep("Scatter", (9, 11), draw_scatter, dtypes=(DType.float32,)),
    Sweep("ScatterElements", (11, 13, 16, 18), draw_scatter_elements, dtypes=_SCATTER_TYPES),
    Sweep("ScatterND", (11, 13, 16, 18), draw_scatter_nd, dtypes=_SCATTER_TYPES),
    Sweep("TensorScatter", (24,), draw_tensor_scatter, dtypes=(DType.float32, DType.int64)),
    Sweep("OneHot", (9, 11), draw_one_hot, dtypes=(DType.float32, DType.int64),
          known=known_one_hot),
    Sweep("NonZero", (9, 13), draw_non_zero, dtypes=(DType.float32, DType.int64, DType.bool),
          known=known_non_zero),
    Sweep("Compress", (9, 11), draw_compress, dtypes=(DType.float32, DType.int64)),
    Sweep("Unique", (11,), draw_unique, dtypes=(DType.float32, DType.int64), known=known_unique),
    Sweep("TopK", (1, 10, 11, 24), draw_top_k, dtypes=(DType.float32, DType.int64)),
)
