/* Prepended to every program after common.cl: erf and the activations of the fused ops.
 *
 * erf_fit(x) -- erf of a float (erf_fit_d: the same in double, used by Gelu): the reference's
 * own float32 fit (refmnn/ops/_erf.py, _ERF32_P / _ERF32_Q): erf(x) = x P(x^2) / Q(x^2) with x
 * clipped to [-4, 4] (erf(4) rounds to 1.0f), evaluated in double and rounded once, so it is within 1 ulp of the reference.
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
    double p = ((((((0.07231236090662692 * z + 0.46550463181774127) * z - 493.09344082862833) * z
                 - 4767.103874630562) * z - 82147.59809869605) * z - 269161.8112137465) * z
                - 1819717.3933324947);
    double q = ((((((z - 66.12038813958696) * z - 1676.9707913573423) * z - 21757.33139263358) * z
                 - 170232.5154816521) * z - 776099.3567067042) * z - 1612682.549185351);
    return p / q * v;
}
inline float erf_fit(float x) { return (float)erf_fit_d((double)x); }
#else
inline float erf_fit(float x) { return erf(x); }
#endif

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

inline float activate(float v, float alpha, float lo, float hi) {
#if ACT == ACT_RELU
    return v < 0.0f ? 0.0f : v;                         /* keeps NaN, as np.maximum(v, 0) */
#elif ACT == ACT_LEAKY
    return v < 0.0f ? alpha * v : v;
#elif ACT == ACT_CLIP
    return v < lo ? lo : (v > hi ? hi : v);
#elif ACT == ACT_SIGMOID                                /* the reference's stable form */
    return v >= 0.0f ? 1.0f / (1.0f + exp(-v)) : exp(v) / (1.0f + exp(v));
#elif ACT == ACT_TANH
    return tanh(v);
#elif ACT == ACT_GELU                                   /* 0.5 v (1 + erf(v / sqrt 2)) */
#ifdef cl_khr_fp64
    double d = (double)v;                               /* as Gelu's reference: double, one rounding */
    double e = erf_fit_d(d * 0.70710678118654752);     /* the fit, unrounded */
    return (float)(0.5 * d * (1.0 + e));
#else
    return 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));
#endif
#elif ACT == ACT_GELU_TANH
    return 0.5f * v * (1.0f + tanh(0.79788456080286536f * (v + 0.044715f * v * v * v)));
#else
    return v;
#endif
}
