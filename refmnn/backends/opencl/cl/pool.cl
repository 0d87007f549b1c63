/* 2-D MaxPool / AveragePool. The output shape (and so ceil_mode) is decided on the host;
 * windows are clipped to the input. AveragePool divides by the taps inside the input
 * (count_include_pad = 0) or inside the padded input [-PH, H + PE) (count_include_pad = 1; a
 * ceil_mode overhang beyond the end pad never counts). MaxPool: NaN propagates; a window
 * entirely in the padding gives -inf (as the reference).
 *
 * Grid (ceil(OW / P_VW), OH, N * C): a work-item computes a strip of P_VW = 8 neighbouring
 * outputs of one row. Why: the old one-work-item-per-output 1-D form spent most of its time in
 * i % OW, / OH (integer division per work-item) and its clipped tap loops did not vectorise.
 * The window geometry and the mode are compile-time (-D P_KH ... P_MAX, P_INCL), so the taps
 * unroll; the row clipping is decided once per window row, and a strip whose columns are all
 * inside the input reads each tap as one 8-wide load (stride 1) or two with .even (stride 2). Strips
 * at the left/right border take the scalar path with per-tap clipping. */
#define P_VW 8
/* Stride 2: two 8-wide loads, not one 16-wide: PoCL 14 on AVX2 returns wrong lanes for
 * float16-vector loads (512-bit ABI). */
#if P_SW == 1 && P_DW == 1
#define P_STRIP(p) LOAD_F8(p)
#elif P_SW == 2 && P_DW == 1
#define P_STRIP(p) ((float8)(LOAD_F8(p).even, LOAD_F8((p) + 8).even))
#endif

#if P_MAX   /* NaN propagates: a NaN tap replaces acc, a NaN acc stays */
#define P_INIT (-INFINITY)
#define P_COMBINE(acc, v) ((acc) = (((v) > (acc)) | ((as_int(v) & 0x7fffffff) > 0x7f800000)) ? (v) : (acc))
/* Both forms test NaN on the bits, combine the tests with | (no short circuit) and choose with
 * the ?: operator: PoCL's select() and isnan() are calls (common.cl), and a data-dependent
 * branch (|| short-circuits) mispredicts on real activations. MaxPool 3x3/2 on 64 x 111 x 111
 * with ReLU-like data: 588 us of device time before, 153 us so (the same kernel on zeros, which
 * predict perfectly, took 280 us before). */
inline float8 p_max_nan8(float8 acc, float8 v) { return ((v > acc) | ISNAN8(v)) ? v : acc; }
#define P_COMBINE_V(acc, v) ((acc) = p_max_nan8((acc), (v)))
#else
#define P_INIT 0.0f
#define P_COMBINE(acc, v) ((acc) += (v))
#define P_COMBINE_V(acc, v) ((acc) += (v))
#endif

__kernel void pool2d(__global const store_t *x, int x_off, __global store_t *y, int y_off,
                     int H, int W, int OH, int OW, int PH, int PW, int PHE, int PWE) {
    int ow0 = get_global_id(0) * P_VW, oh = get_global_id(1), nc = get_global_id(2);
    if (ow0 >= OW || oh >= OH) return;
    __global const store_t *xc = x + x_off + (long)nc * H * W;
    long row = ((long)nc * OH + oh) * OW;             /* Y's index of (n, c, oh, 0) */
    int ih0 = oh * P_SH - PH, iw0 = ow0 * P_SW - PW;
    int rows = 0;                                     /* window rows that count (AveragePool) */
#pragma unroll
    for (int kh = 0; kh < P_KH; kh++) {
        int ih = ih0 + kh * P_DH;
        rows += P_INCL ? (ih >= -PH && ih < H + PHE) : (ih >= 0 && ih < H);
    }
#if P_MAX && P_SW == 2 && P_DW == 1 && P_KW == 3
    /* MaxPool 3x3, stride 2 (SqueezeNet's, ResNet's stem): the 17 input columns a strip reads
     * are first combined over the window rows (two 8-wide loads and one scalar per row), then each
     * output's three column taps are lanes of that row maximum: 6 vector loads and 3 shuffles
     * per strip instead of 18 loads and 9 shuffles. max is exact in any order, and NaN still
     * propagates, so the result is the per-tap loop's. */
    if (iw0 >= 0 && ow0 + P_VW <= OW && iw0 + 16 < W) {
        float8 lo = (float8)(P_INIT), hi = (float8)(P_INIT);
        float ex = P_INIT;
#pragma unroll
        for (int kh = 0; kh < P_KH; kh++) {
            int ih = ih0 + kh * P_DH;
            if (ih < 0 || ih >= H) continue;
            __global const store_t *xr = xc + ih * W + iw0;
            P_COMBINE_V(lo, LOAD_F8(xr));
            P_COMBINE_V(hi, LOAD_F8(xr + 8));
            float v = LOAD(xr, 16);
            P_COMBINE(ex, v);
        }
        float8 acc = (float8)(lo.s0, lo.s2, lo.s4, lo.s6, hi.s0, hi.s2, hi.s4, hi.s6);
        P_COMBINE_V(acc, ((float8)(lo.s1, lo.s3, lo.s5, lo.s7, hi.s1, hi.s3, hi.s5, hi.s7)));
        P_COMBINE_V(acc, ((float8)(lo.s2, lo.s4, lo.s6, hi.s0, hi.s2, hi.s4, hi.s6, ex)));
        STORE_F8(y + y_off + row + ow0, acc);
        return;
    }
#elif defined(P_STRIP)
    if (iw0 >= 0 && ow0 + P_VW <= OW && iw0 + (P_KW - 1) + P_SW * P_VW - 1 < W) {
        float8 acc = (float8)(P_INIT);
#pragma unroll
        for (int kh = 0; kh < P_KH; kh++) {
            int ih = ih0 + kh * P_DH;
            if (ih < 0 || ih >= H) continue;
            __global const store_t *xr = xc + ih * W + iw0;
#pragma unroll
            for (int kw = 0; kw < P_KW; kw++) P_COMBINE_V(acc, P_STRIP(xr + kw));
        }
#if !P_MAX
        acc /= (float)(rows * P_KW);                  /* every column of the strip is inside */
#endif
        STORE_F8(y + y_off + row + ow0, acc);
        return;
    }
#endif
    for (int j = 0; j < P_VW && ow0 + j < OW; j++) {  /* border strips: clip every tap */
        float acc = P_INIT;
        int iwj = iw0 + j * P_SW, cols = 0;
#pragma unroll
        for (int kw = 0; kw < P_KW; kw++) {
            int iw = iwj + kw * P_DW;
            cols += P_INCL ? (iw >= -PW && iw < W + PWE) : (iw >= 0 && iw < W);
        }
#pragma unroll
        for (int kh = 0; kh < P_KH; kh++) {
            int ih = ih0 + kh * P_DH;
            if (ih < 0 || ih >= H) continue;
            __global const store_t *xr = xc + ih * W;
#pragma unroll
            for (int kw = 0; kw < P_KW; kw++) {
                int iw = iwj + kw * P_DW;
                if (iw >= 0 && iw < W) { float v = LOAD(xr, iw); P_COMBINE(acc, v); }
            }
        }
#if !P_MAX
        acc /= (float)(rows * cols);
#endif
        STORE(y, y_off + row + ow0 + j, acc);
    }
}
