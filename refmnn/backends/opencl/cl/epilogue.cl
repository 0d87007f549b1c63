/* Prepended to every program after common.cl: erf and the activations of the fused ops.
 *
 * erf_fit(x) -- erf of a float (erf_fit_d: the same in double, used by Gelu): the reference's
 * own float32 fit (refmnn/ops/_erf.py, _ERF32_P / _ERF32_Q): erf(x) = x P(x^2) / Q(x^2) with x
 * clipped to [-4, 4] (erf(4) rounds to 1.0f), evaluated in double and rounded once, so it is
 * within 1 ulp of the reference (the coefficients come from the host: see erf_fit_d).
 * Why not the builtin erf()? On PoCL (CPU) it is an out-of-line scalar call (~9 ns per element)
 * and stops the work-item loop from vectorising; two degree-6 polynomials and one divide in
 * double vectorise and run ~4x faster. Devices without cl_khr_fp64 keep the builtin.
 *
 * activate(v, alpha, lo, hi) -- the epilogue activation of refmnn::FusedConv / FusedMatMul /
 * FusedGemm (refmnn/ops/fused.py), chosen at compile time by -DACT=<code> (default 0: none),
 * so a GEMM compiled without an activation carries no dead code. alpha is LeakyRelu's slope,
 * [lo, hi] Clip's bounds (relu6 is Clip(0, 6)); NaN passes through every activation, as in
 * the references. The codes match ACT_CODES in kernels/_common.py. */

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
inline double erf_fit_d(double v) {
    v = v < -4.0 ? -4.0 : (v > 4.0 ? 4.0 : v);          /* NaN compares false: stays NaN */
    double z = v * v;
    /* ERF_P0..ERF_P6, ERF_Q0..ERF_Q5: defined by the host from refmnn/ops/_erf.py (ERF32_P,
     * ERF32_Q; Q is monic), so the reference and this kernel share one set of coefficients */
    double p = ((((((ERF_P6 * z + ERF_P5) * z + ERF_P4) * z + ERF_P3) * z + ERF_P2) * z + ERF_P1) * z
                + ERF_P0);
    double q = ((((((z + ERF_Q5) * z + ERF_Q4) * z + ERF_Q3) * z + ERF_Q2) * z + ERF_Q1) * z
                + ERF_Q0);
    return p / q * v;
}
inline float erf_fit(float x) { return (float)erf_fit_d((double)x); }
#else
inline float erf_fit(float x) { return erf(x); }
#endif

/* tanh_sat(x) -- tanh that reaches +-1: PoCL's tanh stops at 1 - 2^-24 (0.99999994f) for every
 * large |x|, infinity included (the OpenCL spec's edge case is tanh(+-inf) = +-1), so that
 * tanh(-inf) * inf gave -inf where the reference gives NaN. tanh(x) rounds to 1 in float32 from
 * |x| = 13 ln 2 = 9.0109 on (1 - tanh x = 2 / (e^2x + 1) < 2^-25 there). */
inline float tanh_sat(float x) { return fabs(x) > 9.0109134f ? copysign(1.0f, x) : tanh(x); }

#define ACT_NONE 0
#define ACT_RELU 1
#define ACT_LEAKY 2
#define ACT_CLIP 3
#define ACT_SIGMOID 4
#define ACT_TANH 5
#define ACT_GELU 6
#define ACT_GELU_TANH 7

#ifndef ACT
#define ACT ACT_NONE
#endif

/* Clip: max(v, lo), then min(., hi) -- hi everywhere when lo > hi; NaN passes through */
inline float clip_lo_hi(float v, float lo, float hi) {
    float low = v < lo ? lo : v;
    return low > hi ? hi : low;
}

inline float activate(float v, float alpha, float lo, float hi) {
#if ACT == ACT_RELU
    return v < 0.0f ? 0.0f : v;                         /* keeps NaN, as np.maximum(v, 0) */
#elif ACT == ACT_LEAKY
    return v < 0.0f ? alpha * v : v;
#elif ACT == ACT_CLIP
    return clip_lo_hi(v, lo, hi);
#elif ACT == ACT_SIGMOID                                /* the reference's stable form */
    return v >= 0.0f ? 1.0f / (1.0f + exp(-v)) : exp(v) / (1.0f + exp(v));
#elif ACT == ACT_TANH
    return tanh_sat(v);
#elif ACT == ACT_GELU                                   /* 0.5 v (1 + erf(v / sqrt 2)) */
#ifdef cl_khr_fp64
    /* double, one rounding. 1 + e cancels as v falls (relative error 3e-7 at v = -3, 1.4e-5 at
     * -4, 1.4e-3 at -5, 3 % at -5.6; absolute below 2e-9), and erf_fit_d stops at erf(-4) =
     * -1 + 1.5e-8: below v = -4 sqrt 2, Gelu is 0 * v, -0 (its true value is above -4.4e-8) and
     * NaN at -inf, as the reference's (the clipped fit gave -v * 7.7e-9 there, -2.3e30 at
     * v = -3e38, and -inf); a float select, since a double one cost ~10 % of a fused GEMM. */
    double d = (double)v;
    float g = (float)(0.5 * d * (1.0 + erf_fit_d(d * 0.70710678118654752)));
    return v < -5.656854f ? 0.0f * v : g;
#else
    return 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));
#endif
#elif ACT == ACT_GELU_TANH
#ifdef cl_khr_fp64                                      /* as the reference: double, one rounding */
    double d = (double)v;                               /* (float: 1 + tanh cancelled from -3 on) */
    double u = tanh(0.79788456080286536 * (d + 0.044715 * d * d * d));
    return (float)(0.5 * d * (1.0 + u));
#else
    return 0.5f * v * (1.0f + tanh_sat(0.79788456080286536f * (v + 0.044715f * v * v * v)));
#endif
#else
    return v;
#endif
}
