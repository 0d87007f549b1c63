"""GridSample (16, 20, 22): modes x padding modes x align_corners over 1-3 spatial axes, grid
points random or on a quarter-pixel lattice (ties, borders, far outside); AffineGrid (20): 2-D
and 3-D, align_corners, axes of length 1. (ImageDecoder: onnxruntime 1.32 has no kernel.)"""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import UNIT, Sample, SampleContext, Sweep, Tol


_MODES_16 = ("bilinear", "nearest", "bicubic")
_MODES_20 = ("linear", "nearest", "cubic")


def _grid_coordinate(rng: np.random.Generator, length: int, align: int,
                     shape: tuple[int, ...]) -> np.ndarray:
    """Normalised coordinates for an axis of ``length`` pixels: half uniform in [-1.3, 1.3],
    half at pixel positions on a quarter-pixel lattice from 2.5 pixels before the first to 2.5
    after the last (halfway points, pixel centres, borders and beyond), normalised back."""
    uniform = rng.uniform(-1.3, 1.3, shape)
    pixel = rng.integers(-10, 4 * length + 10, shape) / 4 - 0.5  # in [-3, length + 2)
    if align:
        lattice = pixel * 2 / (length - 1) - 1 if length > 1 else pixel / 2
    else:
        lattice = (2 * pixel + 1) / length - 1
    return np.where(rng.random(shape) < 0.5, uniform, lattice)


def draw_grid_sample(ctx: SampleContext, opset: int) -> Sample:
    """A random GridSample: N 1-2, C 1-3, 2 spatial axes (from 20 also 1 or 3) of length 1-5,
    an output lattice of 1-4 per axis, every mode of the opset, padding_mode and
    align_corners; the grid mixes uniform points and quarter-pixel lattice points."""
    rng = ctx.rng
    rank = 2 if opset < 20 else int(rng.choice([1, 2, 2, 2, 3]))
    spatial = [int(d) for d in rng.integers(1, 6, rank)]
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    out = [int(d) for d in rng.integers(1, 5, rank)]
    align = int(rng.integers(0, 2))
    coords = [_grid_coordinate(rng, spatial[rank - 1 - i], align, (n, *out))
              for i in range(rank)]  # the innermost axis first
    grid = ctx.array(np.stack(coords, axis=-1))
    attrs = {"mode": str(rng.choice(_MODES_16 if opset < 20 else _MODES_20)),
             "padding_mode": str(rng.choice(["zeros", "border", "reflection"])),
             "align_corners": align}
    return Sample((ctx.make((n, c, *spatial)), grid), attrs)


def known_grid_sample(sample: Sample, opset: int, peer: str) -> str | None:
    """The GridSample differences read as the peers'."""
    mode, padding = sample.attrs["mode"], sample.attrs["padding_mode"]
    if peer == "onnx.reference" and mode in ("cubic", "bicubic") and padding != "zeros":
        return ("cubic with border/reflection padding: onnx.reference pads the sampling "
                "coordinate before taking the 4 taps; torch.nn.functional.grid_sample (which "
                "the spec points to) and onnxruntime pad each tap, as the reference does")
    if peer == "onnx.reference" and sample.inputs[1].dtype == np.float64:
        return ("float64 grid: onnx.reference stores the unnormalised coordinates in a float32 "
                "array whatever the grid's type (_gs_denormalize_coordinates), so its samples "
                "are off by float32 roundings (and a nearest tie may flip)")
    return None


def known_affine_grid(sample: Sample, opset: int, peer: str) -> str | None:
    """The AffineGrid differences read as the peers'."""
    if peer == "onnx.reference" and sample.inputs[0].dtype == np.float64:
        return ("float64 theta: onnx.reference returns a float32 grid; the spec types grid as "
                "T1, theta's type")
    if sample.attrs["align_corners"] and 1 in sample.inputs[1].tolist()[2:]:
        return ("align_corners=1 and a spatial axis of length 1: the peer places its one "
                "position at -1 (onnx.reference divides 2 by length - 1 = 0 and starts at -1); "
                "the reference places it at 0, as torch.nn.functional.affine_grid (which the "
                "spec points to) does; the spec's '-1 and 1 refer to the centres of the "
                "corner pixels' names both ends for a single pixel")
    return None


def draw_affine_grid(ctx: SampleContext, opset: int) -> Sample:
    """A random AffineGrid: 2-D (size [N, C, H, W]) or 3-D (size [N, C, D, H, W]) with N 1-2
    and spatial lengths 1-5, theta from UNIT scaled by 1.5, align_corners 0 or 1."""
    rng = ctx.rng
    rank = int(rng.choice([2, 3]))
    n = int(rng.integers(1, 3))
    size = [n, int(rng.integers(1, 4))] + [int(d) for d in rng.integers(1, 6, rank)]
    theta = ctx.make((n, rank, rank + 1), UNIT) * ctx.scalar(1.5)
    return Sample((theta, np.array(size, np.int64)), {"align_corners": int(rng.integers(0, 2))})


_TOL = {DType.float32: Tol(1e-5, 1e-5, "unnormalising the grid loses a few ulp before "
                                       "weighting; up to 64 cubic taps (3-D)")}

SWEEPS = (
    Sweep("GridSample", (16, 20, 22), draw_grid_sample, dtypes=(DType.float32, DType.float64),
          known=known_grid_sample, tolerance=_TOL),
    Sweep("AffineGrid", (20,), draw_affine_grid, dtypes=(DType.float32, DType.float64),
          known=known_affine_grid, tolerance=_TOL),
)
