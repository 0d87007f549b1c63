/* 2-D convolution (cross-correlation) with groups, strides, dilations, pads and a fused bias.
 * X (N, C, H, W), weights (M, C/group, KH, KW), Y (N, M, OH, OW).
 * Schemes: conv_direct (one work-item per output, any geometry), conv_depthwise (group == C,
 * one input channel per output), im2col (+ the batched GEMM of matmul.cl), Winograd F(2,3).
 *
 * refmnn::FusedConv's epilogue, Y = act(conv + bias + Z), is applied where each kernel stores
 * an output element (CONV_STORE): Z (HAS_Z, the residual, of Y's own shape so it is read at
 * the output's index) and the activation (-DACT, epilogue.cl), so a ResNet block's
 * Conv -> Add -> Relu writes Y once instead of reading and writing it three times. */

#ifdef HAS_Z
#define ADD_Z(v, i) ((v) + LOAD(z, z_off + (i)))
#else
#define ADD_Z(v, i) (v)
#endif
#define CONV_STORE(y, at, i, v) STORE(y, at, activate(ADD_Z(v, i), act_alpha, act_lo, act_hi))
#define EPILOGUE_ARGS __global const store_t *z, int z_off, float act_alpha, float act_lo, float act_hi

/* Output (n, m, oh, ow) of a convolution summed the direct way: the bias (when has_bias), then
 * every tap of the window, a tap in the padding as the weight times a zero (0, or NaN for an
 * infinite or NaN weight, as in the reference, which pads and then multiplies). */
inline float conv_direct_sum(__global const store_t *x, int x_off, __global const store_t *w,
                             int w_off, __global const store_t *bias, int b_off, int has_bias,
                             int n, int m, int oh, int ow, int C, int H, int W, int M, int KH,
                             int KW, int SH, int SW, int PH, int PW, int DH, int DW, int group) {
    int cg = C / group, g = m / (M / group);
    float acc = has_bias ? LOAD(bias, b_off + m) : 0.0f;
    for (int c = 0; c < cg; c++) {
        __global const store_t *xc = x + x_off + ((long)n * C + g * cg + c) * H * W;
        __global const store_t *wc = w + w_off + ((long)m * cg + c) * KH * KW;
        for (int kh = 0; kh < KH; kh++) {
            int ih = oh * SH - PH + kh * DH;
            int row_in = ih >= 0 && ih < H;
            for (int kw = 0; kw < KW; kw++) {
                int iw = ow * SW - PW + kw * DW;
                float v = row_in && iw >= 0 && iw < W ? LOAD(xc, ih * W + iw) : 0.0f;
                acc += v * LOAD(wc, kh * KW + kw);
            }
        }
    }
    return acc;
}

__kernel void conv_direct(__global const store_t *x, int x_off, __global const store_t *w, int w_off,
                          __global const store_t *bias, int b_off, __global store_t *y, int y_off,
                          int total, int C, int H, int W, int M, int OH, int OW, int KH, int KW,
                          int SH, int SW, int PH, int PW, int DH, int DW, int group, int has_bias,
                          EPILOGUE_ARGS) {
    int i = get_global_id(0);
    if (i >= total) return;
    int ow = i % OW, t = i / OW;
    int oh = t % OH; t /= OH;
    int m = t % M, n = t / M;
    float acc = conv_direct_sum(x, x_off, w, w_off, bias, b_off, has_bias, n, m, oh, ow, C, H, W, M,
                                KH, KW, SH, SW, PH, PW, DH, DW, group);
    CONV_STORE(y, y_off + i, i, acc);
}

/* Depthwise: group == C, M = C * mult; output channel m reads input channel m / mult.
 * Grid (ceil(OW / DW_VW), OH, N * M): a work-item computes a strip of DW_VW = 8 neighbouring
 * outputs of one row. Why: the old one-work-item-per-output 1-D form spent most of its time in
 * i % OW, / OH, % M, and PoCL's loop vectoriser gives up on the clipped taps (masked loads), so
 * the SIMD is explicit here: at stride 1 (2) each tap is one 8-wide load (two with .even) of the
 * input row times a broadcast weight. The (image, channel) plane and the row are uniform per
 * work-item, so no work-item divides; KH, KW, SH, SW, DH, DW are compile-time (-D), so the taps
 * unroll (MobileNet's 3x3: nine vector multiply-adds). A strip that touches the left/right
 * padding or the row end first gathers its row window into registers (zeros outside); a row
 * outside the input adds its weights times zero (DW_PAD_ROW: 0, or NaN for an infinite or NaN
 * weight, as the reference's padded product). The store applies bias, residual and activation
 * (CONV_STORE). */
#ifdef DW_KH
#define DW_VW 8
/* the inputs one strip reads from one input row, and lane k's input for tap offset o */
#define DW_WLEN ((DW_VW - 1) * DW_SW + (DW_KW - 1) * DW_DW + 1)
/* row kh of the window in the padding: the sum of its weights times zero, to every lane */
#define DW_PAD_ROW(kh) { float zero_products = 0.0f; \
    for (int kw = 0; kw < DW_KW; kw++) zero_products += 0.0f * LOAD(wm, (kh) * DW_KW + kw); \
    acc += zero_products; }
#define DW_WIN8(o) ((float8)(win[(o)], win[(o) + DW_SW], win[(o) + 2 * DW_SW], win[(o) + 3 * DW_SW], \
                             win[(o) + 4 * DW_SW], win[(o) + 5 * DW_SW], win[(o) + 6 * DW_SW], \
                             win[(o) + 7 * DW_SW]))
/* Stride 2: two 8-wide loads, not one 16-wide: PoCL 14 on AVX2 returns wrong lanes for
 * float16-vector loads (512-bit ABI). */
#if DW_SW == 1
#define DW_STRIP(p) LOAD_F8(p)
#elif DW_SW == 2
#define DW_STRIP(p) ((float8)(LOAD_F8(p).even, LOAD_F8((p) + 8).even))
#endif

__kernel void conv_depthwise(__global const store_t *x, int x_off, __global const store_t *w, int w_off,
                             __global const store_t *bias, int b_off, __global store_t *y, int y_off,
                             int C, int H, int W, int M, int OH, int OW, int PH, int PW, int mult,
                             int has_bias, EPILOGUE_ARGS) {
    int ow0 = get_global_id(0) * DW_VW, oh = get_global_id(1), nm = get_global_id(2);
    if (ow0 >= OW || oh >= OH) return;
    int m = nm % M;
    /* input plane (n, m / mult): n * C + m / mult = (nm - m) / mult + m / mult */
    long plane = mult == 1 ? (long)nm : (long)((nm - m) / mult + m / mult);
    __global const store_t *xc = x + x_off + plane * H * W;
    __global const store_t *wm = w + w_off + (long)m * (DW_KH * DW_KW);
    float b = has_bias ? LOAD(bias, b_off + m) : 0.0f;
    int ih0 = oh * DW_SH - PH, iw0 = ow0 * DW_SW - PW;
    long row = ((long)nm * OH + oh) * OW;             /* Y's (and Z's) index of (n, m, oh, 0) */
#ifdef DW_STRIP
    if (iw0 >= 0 && ow0 + DW_VW <= OW && iw0 + (DW_KW - 1) * DW_DW + DW_SW * DW_VW - 1 < W) {
        float8 acc = (float8)(b);
#pragma unroll
        for (int kh = 0; kh < DW_KH; kh++) {
            int ih = ih0 + kh * DW_DH;
            if (ih < 0 || ih >= H) {
                DW_PAD_ROW(kh);
                continue;
            }
            __global const store_t *xr = xc + ih * W + iw0;
#pragma unroll
            for (int kw = 0; kw < DW_KW; kw++)
                acc += DW_STRIP(xr + kw * DW_DW) * LOAD(wm, kh * DW_KW + kw);
        }
        long i = row + ow0;
        CONV_STORE(y, y_off + i, i, acc.s0);
        CONV_STORE(y, y_off + i + 1, i + 1, acc.s1);
        CONV_STORE(y, y_off + i + 2, i + 2, acc.s2);
        CONV_STORE(y, y_off + i + 3, i + 3, acc.s3);
        CONV_STORE(y, y_off + i + 4, i + 4, acc.s4);
        CONV_STORE(y, y_off + i + 5, i + 5, acc.s5);
        CONV_STORE(y, y_off + i + 6, i + 6, acc.s6);
        CONV_STORE(y, y_off + i + 7, i + 7, acc.s7);
        return;
    }
#endif
    /* A border strip (and every strip at a stride other than 1 and 2): the DW_WLEN inputs of
     * the row window it reads are gathered once into registers, zero outside the row (the zero
     * padding), and the taps are the same vector multiply-adds as above, in the same order.
     * (The former scalar loop clipped each of the 8 * KW taps: every strip of a 14x14 or 7x7
     * plane is a border strip, and MobileNetV2's 14x14 depthwise layers ran at a third of the
     * 56x56 ones' speed.) Lanes past the row end are computed and not stored. */
    float8 acc = (float8)(b);
#pragma unroll
    for (int kh = 0; kh < DW_KH; kh++) {
        int ih = ih0 + kh * DW_DH;
        if (ih < 0 || ih >= H) {
            DW_PAD_ROW(kh);
            continue;
        }
        __global const store_t *xr = xc + ih * W;
        float win[DW_WLEN];
#pragma unroll
        for (int t = 0; t < DW_WLEN; t++)
            win[t] = (iw0 + t >= 0 && iw0 + t < W) ? LOAD(xr, iw0 + t) : 0.0f;
#pragma unroll
        for (int kw = 0; kw < DW_KW; kw++)
            acc += DW_WIN8(kw * DW_DW) * LOAD(wm, kh * DW_KW + kw);
    }
    float8_u lanes;
    lanes.v = acc;
    for (int j = 0; j < DW_VW && ow0 + j < OW; j++) {
        long i = row + ow0 + j;
        CONV_STORE(y, y_off + i, i, lanes.s[j]);
    }
}
#endif

/* im2col: col[n, c, kh, kw, oh * OW + ow] = X[n, c, oh*SH - PH + kh*DH, ow*SW - PW + kw*DW]
 * (zero outside). Seen as (n, group, C/group * KH * KW, OH * OW): one GEMM operand per
 * (image, group).
 * Grid (OH, rows = N * C * KH * KW): a work-item fills the OW columns of one output row oh of
 * one col row r. The row's (n*C + c, kh, kw) and the input row ih are worked out once; along
 * ow only the column test remains, and a row that falls in the vertical padding is a run of
 * zeros. (The former one-work-item-per-element form spent its time in five integer divisions
 * per element: MobileNetV2's 3 -> 32 stem, 338688 elements, 2266 us of device time.) */
__kernel void im2col(__global const store_t *x, int x_off, __global store_t *col, int col_off,
                     int rows, int C, int H, int W, int OH, int OW, int KH, int KW,
                     int SH, int SW, int PH, int PW, int DH, int DW) {
    const int oh = get_global_id(0), r = get_global_id(1);
    if (oh >= OH || r >= rows) return;
    const int kw = r % KW, kh = (r / KW) % KH, t = r / (KW * KH);   /* t = n * C + c */
    const int ih = oh * SH - PH + kh * DH;
    const long at = col_off + ((long)r * OH + oh) * OW;
    if (ih < 0 || ih >= H) {
        for (int ow = 0; ow < OW; ow++) STORE(col, at + ow, 0.0f);
        return;
    }
    __global const store_t *src = x + x_off + ((long)t * H + ih) * W;
    const int shift = kw * DW - PW;                     /* iw = ow * SW + shift */
    for (int ow = 0; ow < OW; ow++) {
        const int iw = ow * SW + shift;
        STORE(col, at + ow, (iw >= 0 && iw < W) ? LOAD(src, iw) : 0.0f);
    }
}

/* Winograd F(2x2, 3x3), stride 1, dilation 1, group 1. Weights are transformed once at prepare
 * on the host (U = G g G^T, stored (16, M, C) in a STATIC buffer); at run:
 *   winograd_input: V[16, C, tiles] = B^T d B of every 4x4 input tile (tiles of 2x2 outputs),
 *   16 GEMMs (batched, matmul.cl): Mt[16, M, tiles] = U[16] (M x C) @ V[16] (C x tiles),
 *   winograd_output: Y = A^T Mt A + bias for each tile.
 * The transforms run one work-item per strip of 8 neighbouring tiles of one tile row, on
 * float8 lanes (PoCL runs explicit vector code well and vectorises little across work-items):
 * SqueezeNet's 16 -> 64 expand at 55x55 spent 1.2 ms of device time in winograd_output with
 * one work-item per tile, ~0.7 ms walking a tile row with scalar loads, ~0.27 ms by strips. */
/* winograd_input: grid (ceil(TW / 8), TH, N * C), a work-item transforms a strip of 8 tiles of
 * one tile row: the 18 input columns of each of the 4 input rows are gathered once (zeros in
 * the padding), tap column s of tile j is lane j of (win[s], win[s + 2], ..., win[s + 14]),
 * the transform runs on float8 lanes and each of the 16 V planes gets one 8-wide store. */
__kernel void winograd_input(__global const store_t *x, int x_off, __global store_t *v, int v_off,
                             int NC, int C, int H, int W, int TH, int TW, int PH, int PW) {
    int tw0 = get_global_id(0) * 8, th = get_global_id(1), nc = get_global_id(2);
    if (tw0 >= TW || th >= TH || nc >= NC) return;
    int c = nc % C, n = nc / C, tiles = TH * TW;
    __global const store_t *xc = x + x_off + (long)nc * H * W;
    int ih0 = th * 2 - PH, iw0 = tw0 * 2 - PW;
    float8 d[4][4];
    for (int r = 0; r < 4; r++) {
        int ih = ih0 + r;
        float win[18];
        for (int t = 0; t < 18; t++) {
            int iw = iw0 + t;
            win[t] = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? LOAD(xc, ih * W + iw) : 0.0f;
        }
        for (int s = 0; s < 4; s++)
            d[r][s] = (float8)(win[s], win[s + 2], win[s + 4], win[s + 6], win[s + 8], win[s + 10],
                               win[s + 12], win[s + 14]);
    }
    float8 t[4][4];                     /* t = B^T d, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] */
    for (int s = 0; s < 4; s++) {
        t[0][s] = d[0][s] - d[2][s];
        t[1][s] = d[1][s] + d[2][s];
        t[2][s] = d[2][s] - d[1][s];
        t[3][s] = d[1][s] - d[3][s];
    }
    long stride = (long)C * tiles;      /* V per image: 16 planes of (C, tiles) */
    long at = v_off + (long)n * 16 * stride + (long)c * tiles + (long)th * TW + tw0;
    int count = min(8, TW - tw0);
    for (int r = 0; r < 4; r++) {       /* (t B)[r] */
        float8 e[4] = {t[r][0] - t[r][2], t[r][1] + t[r][2], t[r][2] - t[r][1], t[r][1] - t[r][3]};
        for (int k = 0; k < 4; k++) {
            long to = at + (r * 4 + k) * stride;
            if (count == 8) {
                STORE_F8(v + to, e[k]);
            } else {
                float8_u lanes;
                lanes.v = e[k];
                for (int j = 0; j < count; j++) STORE(v, to + j, lanes.s[j]);
            }
        }
    }
}

/* winograd_output: grid (ceil(TW / 8), TH, N * M), a work-item transforms a strip of 8 tiles
 * of one tile row: each of the 16 Mt planes is one 8-wide load along the row (a strip at the row
 * end gathers its tiles and pads with zeros), the transform runs on float8 lanes, and the two
 * output rows are stored column by column through the epilogue. (Walking the row one tile at
 * a time with scalar loads cost SqueezeNet's 16 -> 64 expand at 55x55 ~700 us of device time.)
 * A strip whose computed outputs (its tiles' outputs past the border included) are not all
 * finite -- or so large that their sum overflows -- stores its outputs summed the direct way
 * instead. Why: the transforms add and subtract the inputs of a whole tile, so one infinite or
 * NaN input (or weight) turns outputs NaN whose own sums -- the reference's, over their
 * windows -- give a number or an infinity (tools/fuzz_graphs.py --special: 55 outputs of a
 * 12 -> 3 channel 9x15 convolution), and after a Relu or a Clip such an output could even look
 * finite. A non-finite input always leaves a non-finite value among its own tile's computed
 * outputs, so the test sees every such tile; finite inputs pay only the test (SqueezeNet 1.1
 * and ResNet-18, sessions with and without it alternating in one process: within 1 %). */
__kernel void winograd_output(__global const store_t *mt, int m_off, __global const store_t *bias, int b_off,
                              __global store_t *y, int y_off, int NM, int M, int OH, int OW,
                              int TH, int TW, int has_bias, __global const store_t *x, int x_off,
                              __global const store_t *w, int w_off, int C, int H, int W, int PH,
                              int PW, EPILOGUE_ARGS) {
    int tw0 = get_global_id(0) * 8, th = get_global_id(1), nm = get_global_id(2);
    if (tw0 >= TW || th >= TH || nm >= NM) return;
    int m = nm % M, n = nm / M, tiles = TH * TW;
    long stride = (long)M * tiles;
    __global const store_t *src = mt + m_off + (long)n * 16 * stride + (long)m * tiles + (long)th * TW + tw0;
    float8 q[16];
    if (tw0 + 8 <= TW) {
        for (int k = 0; k < 16; k++) q[k] = LOAD_F8(src + k * stride);
    } else {
        for (int k = 0; k < 16; k++) {
            float8_u part;
            for (int j = 0; j < 8; j++) part.s[j] = tw0 + j < TW ? LOAD(src, k * stride + j) : 0.0f;
            q[k] = part.v;
        }
    }
    float8 t0[4], t1[4];                /* A^T = [1 1 1 0; 0 1 -1 -1], q[4 a + s] = tile (a, s) */
    for (int s = 0; s < 4; s++) {
        t0[s] = q[s] + q[4 + s] + q[8 + s];
        t1[s] = q[4 + s] - q[8 + s] - q[12 + s];
    }
    /* all of a lane's eight values finite (and their sum not overflowing): sum - sum is 0;
     * otherwise NaN. One test of eight adds instead of sixteen isinf/isnan pairs. */
    float8 sum = ((t0[0] + t0[1]) + (t0[2] + t0[3])) + ((t1[0] + t1[1]) + (t1[2] + t1[3]));
    if (any(isnan(sum - sum))) {        /* the strip's outputs again, summed the direct way */
        for (int r = 0; r < 2 && th * 2 + r < OH; r++) {
            long row = ((long)nm * OH + th * 2 + r) * OW;
            for (int ow = tw0 * 2; ow < min(OW, (tw0 + 8) * 2); ow++) {
                float acc = conv_direct_sum(x, x_off, w, w_off, bias, b_off, has_bias, n, m,
                                            th * 2 + r, ow, C, H, W, M, 3, 3, 1, 1, PH, PW, 1, 1,
                                            1);
                CONV_STORE(y, y_off + row + ow, row + ow, acc);
            }
        }
        return;
    }
    float b = has_bias ? LOAD(bias, b_off + m) : 0.0f;
    for (int r = 0; r < 2; r++) {
        int oh = th * 2 + r;
        if (oh >= OH) break;
        float8 *t = r == 0 ? t0 : t1;
        float8_u even, odd;             /* output columns 2 tw and 2 tw + 1 */
        even.v = t[0] + t[1] + t[2] + b;
        odd.v = t[1] - t[2] - t[3] + b;
        long row = ((long)nm * OH + oh) * OW;          /* Y's (and Z's) index of (n, m, oh, 0) */
        for (int j = 0; j < 8 && tw0 + j < TW; j++) {
            int ow = (tw0 + j) * 2;
            CONV_STORE(y, y_off + row + ow, row + ow, even.s[j]);
            if (ow + 1 < OW) CONV_STORE(y, y_off + row + ow + 1, row + ow + 1, odd.s[j]);
        }
    }
}

/* Winograd weight transform U[k, m, c] = (G g G^T)[k / 4][k % 4] of every 3x3 filter g = W[m, c],
 * G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]. Used only when the weights are not constants
 * (computed by the graph): then it runs on the device every run. Constant weights are
 * transformed once at prepare on the host (kernels/conv.py). */
__kernel void winograd_weights(__global const store_t *w, int w_off, __global store_t *u, int u_off,
                               int total) {
    int i = get_global_id(0);           /* over (m, c) */
    if (i >= total) return;
    float g[3][3];
    for (int k = 0; k < 9; k++) g[k / 3][k % 3] = LOAD(w, w_off + (long)i * 9 + k);
    float t[4][3];                      /* t = G g */
    for (int s = 0; s < 3; s++) {
        t[0][s] = g[0][s];
        t[1][s] = 0.5f * (g[0][s] + g[1][s] + g[2][s]);
        t[2][s] = 0.5f * (g[0][s] - g[1][s] + g[2][s]);
        t[3][s] = g[2][s];
    }
    for (int r = 0; r < 4; r++) {       /* (t G^T)[r] */
        float e0 = t[r][0];
        float e1 = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
        float e2 = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
        float e3 = t[r][2];
        STORE(u, u_off + (long)(r * 4 + 0) * total + i, e0);
        STORE(u, u_off + (long)(r * 4 + 1) * total + i, e1);
        STORE(u, u_off + (long)(r * 4 + 2) * total + i, e2);
        STORE(u, u_off + (long)(r * 4 + 3) * total + i, e3);
    }
}
