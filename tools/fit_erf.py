"""Fit the rational approximations behind refmnn's float32 Erf and Gelu (NumPy only; offline).

    .venv/bin/python tools/fit_erf.py          # ~20 s; prints the constants and their error

``refmnn.ops._erf._erf_float32`` evaluates erf of float32 inputs in float64 arithmetic as

    erf(x) = x * P(x^2) / Q(x^2),   x clipped to [-4, 4],   P and Q of degree 6 (Q monic).

g(z) = erf(sqrt(z)) / sqrt(z) is smooth (entire) on z = x^2 in [0, 16]; P/Q is fitted to it for
minimum maximum *relative* error (~9e-10). An approximation error e (relative, float64) leaves
the float32 result within 0.5 + e / 2^-24 ulp of erf: e ~ 9e-10 gives at most 0.52 ulp, and
correct rounding except where erf lies within e (relative) of a rounding midpoint. erf(4) =
1 - 1.5e-8 rounds to exactly 1 in float32 (so does erf of every float32 above 3.9192), so the
clipping is exact for float32. A single formula for every element keeps the evaluation free of
index lists and data-independent in cost (a split at |x| = 2 with lower degrees measured no
faster on normal data and slower on wide data).

Method: minimise max |P / (g Q) - 1| on 3000 Chebyshev nodes by (1) Loeb's iteration -- the
linearised weighted least-squares problem min || (P - g Q) w || with w = 1 / (g Q_previous),
solved in the Chebyshev basis on [0, 16] for conditioning -- then (2) Lawson's iteration, which
reweights the nodes by the current error until the error curve equioscillates (near-minimax).
Reference values come from ``math.erf``. The result is converted to monomial coefficients (low
order first), scaled so Q is monic (the numba and OpenCL kernels' Horner steps save a
multiply), checked for poles (Q keeps one sign) and checked again by float64 Horner evaluation
on 200,000 points. The printed tuples are pasted verbatim into ``refmnn/ops/_erf.py``
(_ERF32_P, _ERF32_Q).

Gelu (``_gelu_float32``) needs 1 - Phi(|x|) = erfc(t) / 2, t = |x| / sqrt(2), to a small
*relative* error, which 1 - erf cannot give (it cancels): erfc(t) = exp(-t^2) erfcx(t) with
the scaled complementary error function erfcx(t) = exp(t^2) erfc(t), smooth and slowly varying
(1 at 0, ~1 / (t sqrt(pi)) far out), fitted the same way as P(t) / Q(t) of degrees 5 / 6 on
t in [0, 11] (past t = 11, |x| > 15.5, Gelu's float32 result is x or 0 whatever erfcx is)
against ``math.erfc(t) * math.exp(t * t)``: _ERFCX_P, _ERFCX_Q.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.polynomial import Chebyshev, Polynomial
from numpy.polynomial.polynomial import polyval

CLIP = 4.0  # erf of float32 |x| >= 3.9192 rounds to 1
DEGREES = (6, 6)
ERFCX_CLIP = 11.0
ERFCX_DEGREES = (5, 6)


def g(z: np.ndarray) -> np.ndarray:
    """erf(sqrt(z)) / sqrt(z), with its limit 2/sqrt(pi) at z = 0."""
    return np.array([math.erf(math.sqrt(v)) / math.sqrt(v) if v > 0 else 2 / math.sqrt(math.pi)
                     for v in z])


def erfcx(t: np.ndarray) -> np.ndarray:
    """exp(t^2) erfc(t), the scaled complementary error function."""
    return np.array([math.erfc(v) * math.exp(v * v) for v in t])


def fit(f: Callable[[np.ndarray], np.ndarray], m: int, n: int, lo: float, hi: float,
        nodes: int = 3000, loeb: int = 60, lawson: int = 600
        ) -> tuple[np.ndarray, np.ndarray, float]:
    """Near-minimax relative-error rational P_m / Q_n for f on [lo, hi].

    Returns monomial coefficients (P, Q), low order first, Q monic, and the max relative error
    on the nodes."""
    t = np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)[::-1]  # Chebyshev nodes in (-1, 1)
    u = lo + (t + 1) * ((hi - lo) / 2)
    fu = f(u)
    basis = np.polynomial.chebyshev.chebvander(t, max(m, n))
    q_prev = np.ones(nodes)
    lawson_weights = np.full(nodes, 1.0 / nodes)
    for step in range(loeb + lawson):
        w = np.sqrt(lawson_weights) / np.abs(fu * q_prev)
        # unknowns: p_0..p_m, q_1..q_n (Chebyshev coefficients, q_0 = 1); residual P - f Q = 0
        a = np.hstack([basis[:, :m + 1], -fu[:, None] * basis[:, 1:n + 1]])
        c = np.linalg.lstsq(a * w[:, None], fu * basis[:, 0] * w, rcond=None)[0]
        p, q = c[:m + 1], np.r_[1.0, c[m + 1:]]
        q_prev = basis[:, :n + 1] @ q
        err = (basis[:, :m + 1] @ p) / q_prev / fu - 1
        if step >= loeb:  # Lawson: weight the nodes by the error, renormalised
            lawson_weights = lawson_weights * np.abs(err)
            lawson_weights /= lawson_weights.sum()
    p = Chebyshev(p, domain=[lo, hi]).convert(kind=Polynomial).coef
    q = Chebyshev(q, domain=[lo, hi]).convert(kind=Polynomial).coef
    return p / q[-1], q / q[-1], float(np.abs(err).max())


def check(name: str, p: np.ndarray, q: np.ndarray, u: np.ndarray, approx: np.ndarray,
          exact: np.ndarray) -> None:
    q_values = polyval(u, q)
    assert np.all(q_values < 0) or np.all(q_values > 0), f"{name}: Q has a pole"
    rel = float(np.abs(approx / exact - 1).max())
    print(f"# {name}: max relative error {rel:.2g} on {u.size} points (float64 Horner); "
          f"Q keeps one sign (no pole)")


def main() -> None:
    p, q, node_err = fit(g, *DEGREES, 0.0, CLIP**2)
    x = np.linspace(0.0, CLIP, 200_001)[1:]
    z = x * x
    check(f"erf(x) = x P(x^2)/Q(x^2), |x| <= {CLIP}, degrees {DEGREES} (nodes: {node_err:.2g})",
          p, q, z, x * polyval(z, p) / polyval(z, q), np.array([math.erf(v) for v in x]))
    for name, c in (("_ERF32_P", p), ("_ERF32_Q", q)):
        print(f"{name} = (" + ", ".join(repr(float(v)) for v in c) + ")")
    p, q, node_err = fit(erfcx, *ERFCX_DEGREES, 0.0, ERFCX_CLIP)
    t = np.linspace(0.0, ERFCX_CLIP, 200_001)
    check(f"erfcx(t) = P(t)/Q(t), 0 <= t <= {ERFCX_CLIP}, degrees {ERFCX_DEGREES} "
          f"(nodes: {node_err:.2g})", p, q, t, polyval(t, p) / polyval(t, q), erfcx(t))
    for name, c in (("_ERFCX_P", p), ("_ERFCX_Q", q)):
        print(f"{name} = (" + ", ".join(repr(float(v)) for v in c) + ")")


if __name__ == "__main__":
    main()
