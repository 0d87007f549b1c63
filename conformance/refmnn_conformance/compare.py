"""Judging one output against the reference: :func:`assert_conforms`, and ULP distances.

Rules, in order: the shape is exact; the dtype is exact; NaN must appear exactly where the
reference has NaN; infinities are exact (sign included); integers and booleans are exact; every
other float element must satisfy ``|got - want| <= atol + rtol * |want|``. (-0.0 and +0.0 are
equal.) A failure says what is wrong in words a kernel writer can act on: the worst absolute and
relative errors with their index, the first mismatches as got/want pairs, the input specs and
the seed that regenerates them.

ULPs: :func:`ulp_distance` measures a result against a float64 *oracle* (the reference run on
inputs cast to float64) in units in the last place of the output's dtype, so a report can say
"the backend is 3 ulp from exact, the float32 reference 1 ulp".
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from refmnn.dtypes import DType

from refmnn_conformance.case import Tol

MISMATCHES_SHOWN = 5


class ConformanceFailure(AssertionError):
    """A backend's output does not conform to the reference."""


@dataclass(frozen=True, slots=True)
class Stats:
    """How far one output is from the reference (over finite, comparable elements)."""

    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatches: int = 0
    total: int = 0


def _dtype_name(dtype: np.dtype) -> str:
    try:
        return DType.from_numpy(dtype).name
    except KeyError:
        return str(dtype)


def _is_float(dtype: np.dtype) -> bool:
    try:
        return DType.from_numpy(dtype).is_float
    except KeyError:
        return np.dtype(dtype).kind in "fc"


def _as_f64(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind == "c":
        return array.astype(np.complex128)
    return np.asarray(array).astype(np.float64)


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(flat, shape)] if shape else []


def _fmt(value: object) -> str:
    if isinstance(value, float | np.floating):
        return f"{float(value):.9g}"
    return str(value)


def compare(got: np.ndarray, want: np.ndarray, tol: Tol) -> tuple[Stats, list[str]]:
    """Compare without raising: the statistics and a list of problems (empty when it conforms)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return Stats(), [f"shape {list(got.shape)} != reference {list(want.shape)}"]
    if got.dtype != want.dtype:
        return Stats(), [f"dtype {_dtype_name(got.dtype)} != reference {_dtype_name(want.dtype)}"]
    if want.dtype == object:
        bad = [i for i, (g, w) in enumerate(zip(got.reshape(-1), want.reshape(-1))) if g != w]
        problems = [f"{len(bad)} of {want.size} element(s) differ"] if bad else []
        for flat in bad[:MISMATCHES_SHOWN]:
            problems.append(f"  at {_index(flat, want.shape)}: got {got.reshape(-1)[flat]!r}, "
                            f"want {want.reshape(-1)[flat]!r}  NOT OK")
        return Stats(0.0, 0.0, len(bad), want.size), problems
    if want.size == 0:
        return Stats(), []
    exact = not _is_float(want.dtype) or tol.exact
    if not _is_float(want.dtype) and want.dtype.kind != "c":
        if want.dtype.kind == "V":  # int4/uint4/int2/uint2 (ml_dtypes): compare as int16
            ok = got.astype(np.int16) == want.astype(np.int16)
        else:
            ok = got == want
        gf, wf = got.astype(np.float64), want.astype(np.float64)
        diff = np.where(ok, 0.0, np.abs(gf - wf))
        bound = np.zeros(want.shape)
    else:
        gf, wf = _as_f64(got), _as_f64(want)
        with np.errstate(invalid="ignore", over="ignore"):
            gnan, wnan = np.isnan(gf), np.isnan(wf)
            ginf, winf = np.isinf(gf), np.isinf(wf)
            diff = np.abs(gf - wf)
            bound = tol.atol + tol.rtol * np.abs(wf)
            finite = ~(gnan | wnan | ginf | winf)
            ok = np.where(finite, diff <= bound if not exact else gf == wf, False)
            ok |= gnan & wnan
            ok |= ginf & winf & (gf == wf)
            diff = np.where(finite, diff, np.where(ok, 0.0, np.inf))
    ok = np.asarray(ok, dtype=bool)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(np.abs(wf) > 0, diff / np.abs(wf), np.where(diff > 0, np.inf, 0.0))
    comparable = np.isfinite(diff)
    max_abs = float(np.max(diff[comparable])) if comparable.any() else 0.0
    max_rel = float(np.max(rel[comparable & np.isfinite(rel)])) if (comparable & np.isfinite(rel)).any() else 0.0
    bad = np.flatnonzero(~ok.reshape(-1))
    stats = Stats(max_abs, max_rel, int(bad.size), int(want.size))
    if not bad.size:
        return stats, []
    flat_g, flat_w = got.reshape(-1), want.reshape(-1)
    flat_d, flat_b = diff.reshape(-1), np.broadcast_to(bound, want.shape).reshape(-1)
    problems = [f"{bad.size} of {want.size} element(s) mismatch "
                f"(rtol {tol.rtol:g}, atol {tol.atol:g}{'; exact' if exact else ''})"]
    worst_abs = int(np.argmax(np.where(np.isfinite(flat_d), flat_d, -1.0))) if np.isfinite(flat_d).any() else None
    if worst_abs is not None:
        problems.append(f"greatest absolute difference: {max_abs:.6g} at index "
                        f"{_index(worst_abs, want.shape)} (up to {flat_b[worst_abs]:.3g} allowed)")
        flat_r = rel.reshape(-1)
        worst_rel = int(np.argmax(np.where(np.isfinite(flat_r), flat_r, -1.0)))
        problems.append(f"greatest relative difference: {max_rel:.6g} at index "
                        f"{_index(worst_rel, want.shape)} (up to {tol.rtol:.3g} allowed)")
    nonfinite = [i for i in bad if not np.isfinite(flat_d[i])]
    if nonfinite:
        problems.append(f"{len(nonfinite)} mismatch(es) involve NaN or inf (those must match exactly)")
    problems.append("first mismatches (got vs reference):")
    for flat in bad[:MISMATCHES_SHOWN]:
        problems.append(f"  {_index(int(flat), want.shape)}: got {_fmt(flat_g[flat])}, "
                        f"reference {_fmt(flat_w[flat])}  NOT OK")
    good = np.flatnonzero(ok.reshape(-1))[:2]
    for flat in good:
        problems.append(f"  {_index(int(flat), want.shape)}: got {_fmt(flat_g[flat])}, "
                        f"reference {_fmt(flat_w[flat])}  OK")
    return stats, problems


def assert_conforms(got: np.ndarray, want: np.ndarray, tol: Tol, *, what: str = "output",
                    inputs: str = "", seed: int | None = None) -> Stats:
    """Raise :class:`ConformanceFailure` unless ``got`` conforms to ``want`` within ``tol``.

    Args:
        what: names the output in the message (``"Add@14 float32 broadcast, output 0"``).
        inputs: the input specs, for the message.
        seed: the sample context's seed, for the message.
    Returns:
        The error statistics of a conforming output.
    """
    stats, problems = compare(got, want, tol)
    if problems:
        lines = [f"{what} does not conform to the reference:", *problems]
        if inputs:
            lines.append(f"inputs: {inputs}")
        if seed is not None:
            lines.append(f"seed: {seed}")
        lines.append(f"tolerance: rtol {tol.rtol:g}, atol {tol.atol:g} ({tol.why})")
        raise ConformanceFailure("\n".join(lines))
    return stats


def ulp_size(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The spacing of ``dtype`` near each of ``values`` (float64), subnormals included."""
    dtype = np.dtype(dtype)
    info = ml_dtypes.finfo(dtype) if dtype not in (np.dtype(np.float16), np.dtype(np.float32),
                                                   np.dtype(np.float64)) else np.finfo(dtype)
    nmant = int(info.nmant)
    minexp = int(info.minexp)
    mag = np.abs(values.astype(np.float64))
    with np.errstate(divide="ignore"):
        exp = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
    exp = np.maximum(np.where(mag > 0, exp, minexp), minexp)
    return np.ldexp(1.0, (exp - nmant).astype(np.int64))


def ulp_distance(result: np.ndarray, oracle: np.ndarray) -> float | None:
    """The largest distance, in ulps of ``result``'s dtype, from the float64 ``oracle``.

    Elements where either side is NaN or infinite are skipped (those are judged exactly);
    None when the result is not floating point or the shapes differ.
    """
    result = np.asarray(result)
    if not _is_float(result.dtype) or result.shape != np.shape(oracle) or result.size == 0:
        return None
    r, o = result.astype(np.float64), np.asarray(oracle).astype(np.float64)
    finite = np.isfinite(r) & np.isfinite(o)
    if not finite.any():
        return 0.0
    dist = np.abs(r[finite] - o[finite]) / ulp_size(o[finite], result.dtype)
    return float(np.max(dist))
