"""The numerical core of Erf: fdlibm's erf for float64 and a fitted rational for float32.

Kept apart from :mod:`refmnn.ops.elementwise` (where the Erf op and its docstring live) because
the coefficients and the blockwise evaluation are long; :func:`erf64` and :func:`erf_float32`
are the two entry points.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

# Sun fdlibm s_erf.c (1993; "Permission to use, copy, modify, and distribute this software is
# freely granted, provided that this notice is preserved"), the erf of glibc, musl and FreeBSD.
# Coefficients low order first.
_ERX = 8.45062911510467529297e-01  # erf(1) rounded to float32: erf(x) = erx + P/Q near x = 1
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
       1.32494738004321644526e-04, -3.96022827877536812320e-06)
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
       1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
       6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
       6.57024977031928170135e+00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02)
_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
       3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
       -2.24409524465858183362e+01)


# Float32 inputs: erf(x) = x P(x^2) / Q(x^2) for |x| <= 4, a rational fit made by
# tools/fit_erf.py (near-minimax relative error against math.erf, NumPy only; run it to
# reproduce these digits). Low order first, Q monic; max relative error 9.3e-10.
_ERF32_P = (-1819717.3933324947, -269161.8112137465, -82147.59809869605, -4767.103874630562,
            -493.09344082862833, 0.46550463181774127, 0.07231236090662692)
_ERF32_Q = (-1612682.549185351, -776099.3567067042, -170232.5154816521, -21757.33139263358,
            -1676.9707913573423, -66.12038813958696, 1.0)
_ERF32_PQ = np.array([_ERF32_P, _ERF32_Q])  # [2, 7]: P(z), Q(z) = _ERF32_PQ @ [1, z, ..., z^6]

# Gelu of float32 inputs: erfcx(t) = exp(t^2) erfc(t) = P(t) / Q(t) for 0 <= t <= 11, the same
# kind of fit (tools/fit_erf.py; degrees 5 / 6, Q monic, max relative error 1.2e-10).
_ERFCX_P = (54.90245772166506, 79.1366076991832, 55.43557945160549, 22.391786857042106,
            5.192488112169875, 0.5641889977682045)
_ERFCX_Q = (54.902457728011754, 141.08739647292688, 159.7332164756164, 102.84441801895166,
            40.189518779901306, 9.203394547759844, 1.0)
_ERFCX_PQ = np.array([(*_ERFCX_P, 0.0), _ERFCX_Q])  # [2, 7]: P(t), Q(t) = _ERFCX_PQ @ [1, ..., t^6]
_ERFCX_CLIP = 11.0
# P halved (exact: a power of two), so that the ratio is erfcx(t) / 2, the factor Gelu needs.
_HALF_ERFCX_PQ = _ERFCX_PQ * np.array([[0.5], [1.0]])

# Erf works block by block (16384 elements): the float64 rows of one block, 128 KiB each, stay in
# the CPU's L2 cache, which makes each NumPy pass several times cheaper than streaming a
# multi-megabyte tensor through memory; on this shared 2-core machine the L2 capacity a process
# gets varies, and a block much larger falls off a cliff. float64 (fdlibm; four rows live) and,
# before, float32 by Horner's rule: (1, 128, 1536) float32, ms per call, measured twice: on an
# idle machine 8192: 1.0-1.1, 16384: 0.78, 32768: 0.73, 65536: 2.0; under neighbour load 8192:
# 1.20, 12288: 1.06, 16384: 1.01, 20480: 0.98, 32768: 1.76. float32 as a matrix product (ten rows
# live), the whole BERT-6 reference with each block size alternating in one process, 40 runs,
# median ms: 8192: 33.98, 16384: 33.35, 24576: 34.05, 32768: 34.97 (Horner's rule: 34.88); again
# 33.69, 31.66, 32.01, 31.84 (33.75).
_ERF_BLOCK = 16384


def _horner(coefficients: tuple[float, ...], t: np.ndarray) -> np.ndarray:
    """c0 + c1 t + ... + cn t^n by Horner's rule, in place on one new array (a monic
    polynomial, cn = 1, starts with t + c(n-1) and saves a multiply)."""
    if coefficients[-1] == 1.0:
        r = np.add(t, coefficients[-2])
    else:
        r = np.multiply(t, coefficients[-1])
        r += coefficients[-2]
    for c in coefficients[-3::-1]:
        r *= t
        r += c
    return r


def _ratio(pq: np.ndarray, z: np.ndarray, z_k: tuple[np.ndarray, ...],
           p_q: np.ndarray) -> np.ndarray:
    """P(t) / Q(t) for a row of t, into ``p_q[0]`` (returned): ``z`` holds ones in row 0 and t
    in row 1 (``z_k`` its rows, made once); rows 2.. get t's powers, then one matrix product
    evaluates both polynomials, ``[P, Q] = pq @ z``, and one division ends it (see
    :func:`_erf_float32` for why)."""
    for k in range(2, len(z_k)):
        np.multiply(z_k[k - 1], z_k[1], out=z_k[k])
    np.matmul(pq, z, out=p_q)
    return np.divide(p_q[0], p_q[1], out=p_q[0])


def _blockwise(block: Callable[[np.ndarray, np.ndarray], None], x: np.ndarray,
               dtype: Any, out: np.ndarray | None = None) -> np.ndarray:
    """``block(piece, into)`` on consecutive 1-D pieces of ``x`` (see _ERF_BLOCK), each writing
    its piece's results into ``into``, the matching slice of ``out`` when it is given and
    C-contiguous (x's shape and ``dtype``), else of a new array. Overflow/invalid warnings of
    the discarded out-of-range evaluations are silenced."""
    flat = np.asarray(x).reshape(-1)
    result = out if out is not None and out.flags.c_contiguous else np.empty(np.shape(x), dtype)
    target = result.reshape(-1)  # a view (result is C-contiguous)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for start in range(0, flat.size, _ERF_BLOCK):
            block(flat[start:start + _ERF_BLOCK], target[start:start + _ERF_BLOCK])
    return result


def _erf_small64(x: np.ndarray) -> np.ndarray:
    """fdlibm's first piece, erf(x) = x + x P(x^2)/Q(x^2) (for |x| < 0.84375), float64."""
    z = x * x
    out = _horner(_PP, z)
    out /= _horner(_QQ, z)
    out *= x
    out += x
    return out


def _erf_block64(x: np.ndarray, into: np.ndarray) -> None:
    """fdlibm's erf on one 1-D block, float64, into ``into`` (see :func:`_erf`)."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    rest = np.flatnonzero(a >= 0.84375)
    if 2 * rest.size <= x.size:  # mostly small |x|: the first piece on every element, no index
        out = _erf_small64(x)  # list (NaN stays NaN; the rest is overwritten below)
    else:
        out = a.copy()  # NaN stays NaN; every other element is overwritten
        small = np.flatnonzero(a < 0.84375)
        out[small] = _erf_small64(x.take(small))
    if rest.size:
        a = a.take(rest)
        erf_a = np.ones_like(a)  # a >= 6 (and inf): erf = 1
        mid = np.flatnonzero(a < 1.25)
        s = a.take(mid) - 1.0
        erf_a[mid] = _ERX + _horner(_PA, s) / _horner(_QA, s)
        for lo, hi, r, q in ((1.25, 1 / 0.35, _RA, _SA), (1 / 0.35, 6.0, _RB, _SB)):
            index = np.flatnonzero((a >= lo) & (a < hi))
            v = a.take(index)
            s = 1.0 / (v * v)
            erf_a[index] = 1.0 - np.exp(_horner(r, s) / _horner(q, s) - v * v - 0.5625) / v
        out[rest] = np.copysign(erf_a, x.take(rest))
    into[...] = out


def _erf(x: np.ndarray) -> np.ndarray:
    """erf of an array as float64 (NumPy has no erf), vectorised; accurate to 1 ulp.

    fdlibm's piecewise rational approximations (W. J. Cody's scheme), on a = |x|:

    * a < 0.84375:          erf(x) = x + x * P(x^2)/Q(x^2)            (relative accuracy)
    * 0.84375 <= a < 1.25:  erf(a) = erx + P(a - 1)/Q(a - 1)
    * 1.25 <= a < 6:        erf(a) = 1 - exp(-a^2 - 0.5625 + R(1/a^2)/S(1/a^2)) / a, with one
      (R, S) pair on [1.25, 1/0.35) and another on [1/0.35, 6)
    * a >= 6:               erf(a) = 1 (erfc(6) < 2^-55 rounds away); erf(-x) = -erf(x).

    Per block of 16384 elements (cache-sized), each piece on the index list of its elements;
    when most of a block has a < 0.84375, the first piece runs on the whole block instead (no
    index list) and the other pieces overwrite their elements. Measured against ``math.erf``
    on 2.3M points in [-10, 10] plus tiny, subnormal and special values: max error 1 ulp (98%
    exact). erf(+-0) = +-0, erf(+-inf) = +-1, erf(NaN) = NaN.
    """
    return _blockwise(_erf_block64, x, np.float64)


def _erf_float32(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """erf of a float32 array, as float32: float64 arithmetic on a float32-specific fit,

        erf(x) = x P(x^2) / Q(x^2),   x clipped to [-4, 4],   P, Q of degree 6

    (tools/fit_erf.py; near-minimax relative error 9.3e-10). erf of every float32 above
    3.9192 rounds to 1, and erf(4) does too, so the clipping is exact. The approximation error
    is far below half a float32 ulp (>= 3e-8 relative), so the single rounding to float32 gives
    at most 0.52 ulp: measured against ``math.erf`` on 2.2M points in [-5, 5] plus tiny,
    subnormal and special values, max error 0.516 ulp, 99.1% correctly rounded, the rest 1 ulp
    off. One formula for every element, no index lists, cost independent of the data.

    P and Q are evaluated together as one matrix product, the coefficients ``[2, 7]`` times
    the powers ``[1, z, ..., z^6]`` of z = x^2 (five NumPy passes build them past z):
    ``[2, 7] @ [7, n] -> [P(z), Q(z)]``; then one division, one product with x and the store
    (rounded to float32 there, once). That is about ten passes and a GEMM instead of Horner's
    rule's ~28 passes (two per coefficient): 10-20 % faster a call, 3-5 % off BERT-6's and
    ViT-Tiny's reference. Each pass keeps one dtype: x is clipped in float32 (exact, half the
    bytes) and then copied into a float64 row, the product with x stays in float64 and the
    store converts, because a NumPy call that converts as it computes (``np.clip(...,
    dtype=np.float64)``, a float64 product into a float32 ``out``) runs a buffered loop (per
    16384-element block, us, alone: 9.1 -> 8.2 for the clip, 8.3 -> 6.4 for the product and
    store; in BERT-6, means: 16.4 -> 14.6, 12.0 -> 10.5; the whole call 5 % faster; results
    bit-equal on 5M inputs). The row views of a full block are made once per call (with the
    float32 clip: a (1, 128, 1536) call 4-6 % faster, shuffled A/B in one process; bit-equal on
    3M inputs with random bit patterns and special values). The float64 rounding of
    the sums (~1e-15 relative, in BLAS's order, with or without FMA) is far below the fit's
    error, so the accuracy above holds on every machine; the float32 results were bit-equal to
    Horner's rule's on 12M inputs (uniform, near zero, random bit patterns, special values).
    Only an exact value within ~1e-15 of a float32 rounding midpoint (a few in 10^8) could
    round the other way where BLAS sums in another order. The result goes into ``out`` when it
    is a C-contiguous float32 array of x's shape.
    """
    block = min(_ERF_BLOCK, np.size(x))
    powers = np.empty((_ERF32_PQ.shape[1], block))  # rows 1, z, ..., z^6; a column per element
    powers[0] = 1.0
    rows = np.empty((3, block))  # x clipped, then P(z) (later x P / Q) and Q(z)
    clipped = np.empty(block, np.float32)

    def views(n: int) -> tuple[np.ndarray, ...]:
        """The first n columns: x clipped (float32, float64), [P, Q], the powers, each power."""
        z = powers[:, :n]
        return clipped[:n], rows[0, :n], rows[1:, :n], z, tuple(z)

    full = views(block)  # made once: new views on every block cost ~4 % of the call

    def erf_block(piece: np.ndarray, into: np.ndarray) -> None:
        c, v, p_q, z, z_k = full if piece.size == block else views(piece.size)  # last: shorter
        np.clip(piece, -4.0, 4.0, out=c)  # NaN stays NaN; in float32, half the bytes of float64
        v[...] = c  # exact in float64
        np.multiply(v, v, out=z_k[1])  # z = x^2, exact in float64
        p = _ratio(_ERF32_PQ, z, z_k, p_q)
        p *= v
        into[...] = p  # rounded to float32, once

    return _blockwise(erf_block, x, np.float32, out)


def _gelu_float32(x: np.ndarray) -> np.ndarray:
    """Gelu of a float32 array, x Phi(x) with Phi(x) = (1 + erf(x / sqrt(2))) / 2, as float32:
    float64 arithmetic, rounded once.

    1 + erf cancels for negative x (to 1e-16 absolute, not relative), so both sides go through
    the tail 1 - Phi(|x|) = erfc(t) / 2 = exp(-x^2 / 2) erfcx(t) / 2, t = |x| / sqrt(2):

        e = exp(-x^2 / 2) * P(t) / Q(t) / 2,   t clipped to [0, 11],   P / Q ~ erfcx
        Phi = e (x < 0),  1 - e (x >= 0),      Gelu = x * Phi

    (erfcx(t) = exp(t^2) erfc(t); tools/fit_erf.py, relative error 1.2e-10). x^2 is exact in
    float64, so exp's argument is too; e has a relative error ~1.2e-10, and so has Phi on either
    side (1 - e >= 1/2), which leaves the float32 result within 0.502 ulp: correctly rounded
    except within 1e-10 (relative) of a rounding midpoint. Past |x| = 15.5 (t > 11) the
    float32 result is x or +-0 whatever erfcx is. Special values as the formula gives them:
    Gelu(+-0) = +-0, Gelu(inf) = inf, Gelu(-inf) = NaN (-inf * 0), NaN stays NaN. One formula
    for every element, blockwise as :func:`_erf_float32`, its cost independent of the data.

    The side is chosen without a mask: Phi = |s - e| with s = 1 where x >= 0, else 0 (NaN: 0),
    which is 1 - e on the right and exactly e on the left, the same bits as selecting with
    ``putmask`` did (bit-equal on 9M N(0, 1) x {1, 3, 10} inputs, the special values and 2M
    random bit patterns, of which only NaNs' sign bits differ), and the 1/2 is folded into P's
    coefficients (exact). A (1, 128, 1536) tensor of N(0, 1) values, alternating in one
    process: 1.94 -> 1.25 ms (fdlibm's piecewise float64 erf, before this fit: 4.8 ms).
    """
    block = min(_ERF_BLOCK, np.size(x))
    powers = np.empty((_HALF_ERFCX_PQ.shape[1], block))  # rows 1, t, ..., t^6; a column each
    powers[0] = 1.0
    rows = np.empty((4, block))  # x, [P / 2, Q] (then erfcx / 2 and Phi), exp(-x^2 / 2) (then e)
    right = np.empty(block, np.bool_)

    def views(n: int) -> tuple[np.ndarray, ...]:
        """The first n columns: x, [P / 2, Q], the exp row, x >= 0, the powers, each power."""
        z = powers[:, :n]
        return rows[0, :n], rows[1:3, :n], rows[3, :n], right[:n], z, tuple(z)

    full = views(block)

    def gelu_block(piece: np.ndarray, into: np.ndarray) -> None:
        v, p_q, e, nonnegative, z, z_k = full if piece.size == block else views(piece.size)
        v[...] = piece  # exact in float64
        t = z_k[1]
        np.abs(v, out=t)
        t *= np.sqrt(0.5)
        np.clip(t, 0.0, _ERFCX_CLIP, out=t)  # NaN stays NaN
        half_erfcx = _ratio(_HALF_ERFCX_PQ, z, z_k, p_q)
        np.multiply(v, v, out=e)  # x^2, exact
        e *= -0.5
        np.exp(e, out=e)
        e *= half_erfcx  # e = 1 - Phi(|x|)
        phi = p_q[1]
        np.greater_equal(v, 0.0, out=nonnegative)
        phi[...] = nonnegative  # s
        phi -= e
        np.abs(phi, out=phi)  # 1 - e (x >= 0), e (x < 0)
        phi *= v
        into[...] = phi  # rounded to float32, once

    return _blockwise(gelu_block, x, np.float32)


erf64 = _erf
erf_float32 = _erf_float32
gelu_float32 = _gelu_float32
ERF32_P, ERF32_Q = _ERF32_P, _ERF32_Q
"""The float32 fit's coefficients, low order first (Q monic), for kernels that evaluate the same
fit (numba's ``_common.erf32``, OpenCL's ``erf_fit`` in ``cl/epilogue.cl``): one source."""
