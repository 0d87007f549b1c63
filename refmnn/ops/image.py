"""Image ops: GridSample, AffineGrid and ImageDecoder.

GridSample describes each spatial axis by interpolation taps and weights, as Resize does
(refmnn.ops.resize), but its sampling coordinates vary per output element, so it gathers the
taps of all axes jointly. AffineGrid builds the sampling grids GridSample reads.
"""

from __future__ import annotations

import io
import itertools
from typing import Any

import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import TensorType
from refmnn.ops._image_util import cast_back, float_compute_dtype, keys_cubic
from refmnn.ops._infer import dtype_of, shape_of
from refmnn.ops._schema import Attr, InferContext, flag, op

# ---------------------------------------------------------------------------------------------
# GridSample / AffineGrid
# ---------------------------------------------------------------------------------------------


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Reflect coordinates off the borders lo and hi (repeatedly) until they lie in [lo, hi]."""
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    dist = np.where(below, lo - x, x - hi)
    flips = np.floor(dist / span)
    rest = dist - flips * span
    even = flips % 2 == 0
    from_below = np.where(even, lo + rest, hi - rest)
    from_above = np.where(even, hi - rest, lo + rest)
    return np.where(below, from_below, np.where(above, from_above, x))


def _grid_axis_taps(coord: np.ndarray, length: int, *, mode: str, padding_mode: str,
                    align_corners: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Taps of one spatial axis of GridSample: (indices, weights, inside), each (..., taps).

    coord: normalised positions in [-1, 1] (any shape). ``inside`` is False where a tap lies
    outside the input and padding_mode is zeros (its value counts as 0).
    """
    one = coord.dtype.type(1)
    x = (coord + one) / 2 * (length - 1) if align_corners else ((coord + one) * length - one) / 2
    lo, hi = (0.0, length - 1.0) if align_corners else (-0.5, length - 0.5)
    if mode == "nearest":
        x = np.rint(x)
    if mode != "cubic":  # cubic pads each tap, never the coordinate (torch, onnxruntime)
        outside = (x < lo) | (x > hi)
        if padding_mode == "border":
            x = np.where(outside, np.clip(x, 0, length - 1), x)
        elif padding_mode == "reflection":
            x = np.where(outside, _reflect(x, lo, hi), x)
    if mode == "nearest":
        taps = x[..., None]
        weights = np.ones_like(taps)
    else:
        floor = np.floor(x)
        t = (x - floor)[..., None]
        offsets = np.arange(2) if mode == "linear" else np.arange(-1, 3)
        taps = floor[..., None] + offsets
        weights = (np.concatenate([1 - t, t], axis=-1) if mode == "linear"
                   else keys_cubic(t - offsets, -0.75).astype(t.dtype))
    if padding_mode == "zeros":
        inside = (taps >= 0) & (taps <= length - 1)
    else:
        inside = np.ones(taps.shape, dtype=bool)
        if padding_mode == "reflection":
            taps = np.trunc(_reflect(taps, lo, hi))
    return np.clip(taps, 0, length - 1).astype(np.intp), weights, inside


def _grid_sample(X: np.ndarray, grid: np.ndarray, *, mode: str, padding_mode: str,
                 align_corners: int) -> np.ndarray:
    """The GridSample computation shared by all versions (modes: nearest, linear, cubic)."""
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"unknown padding_mode {padding_mode!r}")
    rank = X.ndim - 2
    if grid.ndim != rank + 2 or grid.shape[-1] != rank or grid.shape[0] != X.shape[0]:
        raise ValueError(f"grid shape {grid.shape} does not fit X shape {X.shape}")
    coords = grid.astype(float_compute_dtype(grid.dtype))
    axes = [_grid_axis_taps(coords[..., rank - 1 - i], X.shape[2 + i], mode=mode,
                            padding_mode=padding_mode, align_corners=align_corners)
            for i in range(rank)]  # grid's last dim lists the innermost axis first
    values = np.moveaxis(X, 1, -1)  # (N, D1..Dr, C)
    batch = np.arange(X.shape[0]).reshape((-1,) + (1,) * rank)
    if mode == "nearest":
        picked = values[(batch, *(taps[..., 0] for taps, _, _ in axes))]  # (N, O1..Or, C)
        inside = np.logical_and.reduce([ins[..., 0] for _, _, ins in axes])[..., None]
        out = np.where(inside, picked, np.zeros((), X.dtype))
        return np.moveaxis(out, -1, 1)
    values = values.astype(float_compute_dtype(X.dtype))
    out = np.zeros(grid.shape[:-1] + (X.shape[1],), dtype=np.result_type(values, coords))
    for combo in itertools.product(range(axes[0][0].shape[-1]), repeat=rank):
        weight = np.ones((), coords.dtype)
        for (_, w, ins), k in zip(axes, combo, strict=True):
            weight = weight * np.where(ins[..., k], w[..., k], 0)
        picked = values[(batch, *(taps[..., k] for (taps, _, _), k in zip(axes, combo,
                                                                           strict=True)))]
        out += weight[..., None] * picked
    return cast_back(np.moveaxis(out, -1, 1), X.dtype, rounding="trunc")


def _grid_sample_infer(ctx: InferContext, X: TensorType | None, grid: TensorType | None,
                       **attrs: Any) -> TensorType:
    xs, gs = shape_of(X), shape_of(grid)
    if gs is None and xs is None:
        return TensorType(dtype_of(X), None)
    if gs is None:
        return TensorType(dtype_of(X), (xs[0], xs[1]) + (None,) * (len(xs) - 2))
    n = gs[0] if xs is None or not isinstance(xs[0], int) else xs[0]
    c = None if xs is None else xs[1]
    if xs is not None and len(xs) != len(gs):
        ctx.fail(f"X has rank {len(xs)} but grid has rank {len(gs)}")
    return TensorType(dtype_of(X), (n, c) + tuple(gs[1:-1]))


_GRID_ATTRS = (
    flag("align_corners", 0, "1: -1 and 1 are the centres of the corner pixels"),
    Attr("padding_mode", "string", "zeros", "outside the input: zeros, border or reflection"),
)


@op("GridSample", since=16, inputs=("X", "grid"), outputs=("Y",), infer=_grid_sample_infer,
    attrs=_GRID_ATTRS + (Attr("mode", "string", "bilinear", "bilinear, nearest or bicubic"),))
def grid_sample_16(X: np.ndarray, grid: np.ndarray, *, align_corners: int, padding_mode: str,
                   mode: str) -> np.ndarray:
    """GridSample-16: the 4-D case of GridSample-20, with the modes named bilinear, nearest and
    bicubic. X (N, C, H, W), grid (N, H_out, W_out, 2) -> Y (N, C, H_out, W_out)."""
    names = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}
    if mode not in names:
        raise ValueError(f"GridSample-16 mode must be bilinear, nearest or bicubic, got {mode!r}")
    if X.ndim != 4:
        raise ValueError(f"GridSample-16 takes a 4-D X, got rank {X.ndim}")
    return _grid_sample(X, grid, mode=names[mode], padding_mode=padding_mode,
                        align_corners=align_corners)


@op("GridSample", since=20, inputs=("X", "grid"), outputs=("Y",), infer=_grid_sample_infer,
    attrs=_GRID_ATTRS + (Attr("mode", "string", "linear", "linear, nearest or cubic"),))
def grid_sample_20(X: np.ndarray, grid: np.ndarray, *, align_corners: int, padding_mode: str,
                   mode: str) -> np.ndarray:
    """Y[n, c, o...] = X sampled at grid[n, o..., :] (as torch.nn.functional.grid_sample).

    X (N, C, D1..Dr), grid (N, O1..Or, r) with grid[..., 0] the innermost axis (x, then y, z);
    Y (N, C, O1..Or). Per axis of length L the normalised g maps to the pixel coordinate
    x = (g + 1) / 2 * (L - 1) (align_corners=1) or ((g + 1) * L - 1) / 2 (align_corners=0).
    nearest rounds x half to even; then (nearest, linear) a coordinate outside [lo, hi]
    ([0, L-1], or [-0.5, L-0.5] without align_corners) is clamped to [0, L-1] (border) or
    reflected off lo/hi (reflection). linear: tent weights of floor(x), floor(x)+1; cubic:
    Keys (a = -0.75) weights of floor(x)-1 .. floor(x)+2 at the unpadded coordinate. Taps
    outside the input read 0 (zeros), the clamped pixel (border) or the reflected pixel
    (reflection). This is torch's and onnxruntime's rule; the ONNX Python reference also clamps
    the cubic coordinate under border padding, which differs near the edges. Weights are
    computed in the grid's precision.
    dtype: Y has X's dtype; integer results are computed in float and truncated (saturating).
    """
    if mode not in ("linear", "nearest", "cubic"):
        raise ValueError(f"GridSample mode must be linear, nearest or cubic, got {mode!r}")
    return _grid_sample(X, grid, mode=mode, padding_mode=padding_mode,
                        align_corners=align_corners)


def _linspace_from_neg_one(length: int, align_corners: int) -> np.ndarray:
    """Normalised pixel-centre positions of an axis of ``length`` pixels (torch semantics)."""
    if length <= 1:
        return np.zeros(max(length, 0))
    positions = np.linspace(-1.0, 1.0, length)
    return positions if align_corners else positions * (length - 1) / length


def _affine_grid_infer(ctx: InferContext, theta: TensorType | None, size: TensorType | None,
                       **attrs: Any) -> TensorType:
    value = ctx.value(1)
    ts = shape_of(theta)
    if value is not None:
        dims = [int(d) for d in np.asarray(value).reshape(-1)]
        return TensorType(dtype_of(theta), (dims[0], *dims[2:], len(dims) - 2))
    count = None
    if shape_of(size) is not None and isinstance(shape_of(size)[0], int):
        count = shape_of(size)[0]
    elif ts is not None and isinstance(ts[1], int):
        count = ts[1] + 2
    if count is None:
        return TensorType(dtype_of(theta), None)
    n = ts[0] if ts is not None else None
    return TensorType(dtype_of(theta), (n,) + (None,) * (count - 2) + (count - 2,))


@op("AffineGrid", since=20, inputs=("theta", "size"), outputs=("grid",), value_inputs=(1,),
    infer=_affine_grid_infer,
    attrs=(flag("align_corners", 0, "1: -1 and 1 are the centres of the corner pixels"),))
def affine_grid(theta: np.ndarray, size: np.ndarray, *, align_corners: int) -> np.ndarray:
    """grid[n, d.., h, w, :] = theta[n] @ [x_w, y_h, (z_d,) 1] (torch affine_grid).

    theta (N, 2, 3) or (N, 3, 4); size int64 [N, C, H, W] or [N, C, D, H, W]; grid
    (N, H, W, 2) or (N, D, H, W, 3) with the innermost coordinate (x) first. Base positions per
    axis of length L: linspace(-1, 1, L), scaled by (L - 1) / L when align_corners=0; an axis
    of length 1 sits at 0. Computed in float32 (float64 for a float64 theta), cast to theta's
    dtype.
    """
    dims = [int(d) for d in np.asarray(size).reshape(-1)]
    spatial = dims[2:]
    rank = len(spatial)
    if rank not in (2, 3) or theta.shape[1:] != (rank, rank + 1):
        raise ValueError(f"theta shape {theta.shape} does not fit size {dims}")
    axes = [_linspace_from_neg_one(length, align_corners) for length in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # each (D.., H, W)
    base = np.stack([*mesh[::-1], np.ones(spatial)], axis=-1)  # (..., rank + 1): x, y, z, 1
    work = float_compute_dtype(theta.dtype)
    grid = np.einsum("...k,njk->n...j", base.astype(work), theta.astype(work))
    return grid.astype(theta.dtype)


# ---------------------------------------------------------------------------------------------
# ImageDecoder
# ---------------------------------------------------------------------------------------------


def _image_decoder_infer(ctx: InferContext, stream: TensorType | None, *,
                         pixel_format: str) -> TensorType:
    return TensorType(DType.uint8, (None, None, 1 if pixel_format == "Grayscale" else 3))


@op("ImageDecoder", since=20, inputs=("encoded_stream",), outputs=("image",),
    infer=_image_decoder_infer,
    attrs=(Attr("pixel_format", "string", "RGB", "RGB, BGR or Grayscale"),))
def image_decoder(encoded_stream: np.ndarray, *, pixel_format: str) -> np.ndarray:
    """Decode an encoded image (BMP, JPEG, JPEG 2000, TIFF, PNG, WebP, PBM/PGM/PPM/PNM).

    encoded_stream uint8 (bytes,); image uint8 (H, W, 3) for RGB/BGR, (H, W, 1) for Grayscale.
    Decoded with Pillow (imported lazily; JPEG chroma uses libjpeg's fancy upsampling). Any
    colour model is converted (palette, alpha dropped, CMYK...). A stream that cannot be
    decoded gives an empty (0, 0, channels) image, as the spec asks.
    """
    if pixel_format not in ("RGB", "BGR", "Grayscale"):
        raise ValueError(f"pixel_format must be RGB, BGR or Grayscale, got {pixel_format!r}")
    try:
        import PIL.Image
    except ImportError as exc:
        raise ImportError("ImageDecoder needs Pillow: pip install pillow") from exc
    channels = 1 if pixel_format == "Grayscale" else 3
    try:
        with PIL.Image.open(io.BytesIO(np.asarray(encoded_stream, np.uint8).tobytes())) as img:
            pixels = np.asarray(img.convert("L" if channels == 1 else "RGB"), dtype=np.uint8)
    except (OSError, ValueError, SyntaxError, PIL.Image.DecompressionBombError):
        return np.zeros((0, 0, channels), dtype=np.uint8)
    if channels == 1:
        return pixels[:, :, None].copy()
    return np.ascontiguousarray(pixels[:, :, ::-1] if pixel_format == "BGR" else pixels)


OPS = (
    grid_sample_16, grid_sample_20,
    affine_grid,
    image_decoder,
)
