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
    int cg = C / group, g = m / (M / group);
    float acc = has_bias ? LOAD(bias, b_off + m) : 0.0f;
    for (int c = 0; c < cg; c++) {
        __global const store_t *xc = x + x_off + ((long)n * C + g * cg + c) * H * W;
        __global const store_t *wc = w + w_off + ((long)m * cg + c) * KH * KW;
        for (int kh = 0; kh < KH; kh++) {
            int ih = oh * SH - PH + kh * DH;
            if (ih < 0 || ih >= H) continue;
            for (int kw = 0; kw < KW; kw++) {
                int iw = ow * SW - PW + kw * DW;
                if (iw < 0 || iw >= W) continue;
                acc += LOAD(xc, ih * W + iw) * LOAD(wc, kh * KW + kw);
            }
        }
    }
    CONV_STORE(y, y_off + i, i, acc);
}

/* Depthwise: group == C, M = C * multiplier; output channel m reads input channel m / mult. */
__kernel void conv_depthwise(__global const store_t *x, int x_off, __global const store_t *w, int w_off,
                             __global const store_t *bias, int b_off, __global store_t *y, int y_off,
                             int total, int C, int H, int W, int M, int OH, int OW, int KH, int KW,
                             int SH, int SW, int PH, int PW, int DH, int DW, int group, int has_bias,
                             EPILOGUE_ARGS) {
    int i = get_global_id(0);
    if (i >= total) return;
    int ow = i % OW, t = i / OW;
    int oh = t % OH; t /= OH;
    int m = t % M, n = t / M;
    int c = m / (M / C);
    __global const store_t *xc = x + x_off + ((long)n * C + c) * H * W;
    __global const store_t *wm = w + w_off + (long)m * KH * KW;
    float acc = has_bias ? LOAD(bias, b_off + m) : 0.0f;
    int ih0 = oh * SH - PH, iw0 = ow * SW - PW;
    for (int kh = 0; kh < KH; kh++) {
        int ih = ih0 + kh * DH;
        if (ih < 0 || ih >= H) continue;
        for (int kw = 0; kw < KW; kw++) {
            int iw = iw0 + kw * DW;
            if (iw >= 0 && iw < W) acc += LOAD(xc, ih * W + iw) * LOAD(wm, kh * KW + kw);
        }
    }
    CONV_STORE(y, y_off + i, i, acc);
}

/* im2col: col[n, c, kh, kw, oh * OW + ow] = X[n, c, oh*SH - PH + kh*DH, ow*SW - PW + kw*DW]
 * (zero outside). Seen as (n, group, C/group * KH * KW, OH * OW): one GEMM operand per
 * (image, group). */
__kernel void im2col(__global const store_t *x, int x_off, __global store_t *col, int col_off,
                     int total, int C, int H, int W, int OH, int OW, int KH, int KW,
                     int SH, int SW, int PH, int PW, int DH, int DW) {
    int i = get_global_id(0);
    if (i >= total) return;
    int p = i % (OH * OW), t = i / (OH * OW);
    int kw = t % KW; t /= KW;
    int kh = t % KH; t /= KH;          /* t = n * C + c */
    int oh = p / OW, ow = p % OW;
    int ih = oh * SH - PH + kh * DH, iw = ow * SW - PW + kw * DW;
    float v = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? LOAD(x, x_off + ((long)t * H + ih) * W + iw) : 0.0f;
    STORE(col, col_off + i, v);
}

/* Winograd F(2x2, 3x3), stride 1, dilation 1, group 1. Weights are transformed once at prepare
 * on the host (U = G g G^T, stored (16, M, C) in a STATIC buffer); at run:
 *   winograd_input: V[16, C, tiles] = B^T d B of every 4x4 input tile (tiles of 2x2 outputs),
 *   16 GEMMs (batched, matmul.cl): Mt[16, M, tiles] = U[16] (M x C) @ V[16] (C x tiles),
 *   winograd_output: Y = A^T Mt A + bias for each tile. */
__kernel void winograd_input(__global const store_t *x, int x_off, __global store_t *v, int v_off,
                             int total, int C, int H, int W, int TH, int TW, int PH, int PW) {
    int i = get_global_id(0);           /* over (n, c, tile) */
    if (i >= total) return;
    int tiles = TH * TW;
    int tile = i % tiles, nc = i / tiles;
    int c = nc % C, n = nc / C;
    int th = tile / TW, tw = tile % TW;
    __global const store_t *xc = x + x_off + (long)nc * H * W;
    float d[4][4];
    for (int r = 0; r < 4; r++) {
        int ih = th * 2 - PH + r;
        for (int s = 0; s < 4; s++) {
            int iw = tw * 2 - PW + s;
            d[r][s] = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? LOAD(xc, ih * W + iw) : 0.0f;
        }
    }
    float t[4][4];                      /* t = B^T d, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] */
    for (int s = 0; s < 4; s++) {
        t[0][s] = d[0][s] - d[2][s];
        t[1][s] = d[1][s] + d[2][s];
        t[2][s] = d[2][s] - d[1][s];
        t[3][s] = d[1][s] - d[3][s];
    }
    long stride = (long)C * tiles;      /* V per image: 16 planes of (C, tiles) */
    long at = v_off + (long)n * 16 * stride + (long)c * tiles + tile;
    for (int r = 0; r < 4; r++) {       /* (t B)[r] */
        float e0 = t[r][0] - t[r][2], e1 = t[r][1] + t[r][2];
        float e2 = t[r][2] - t[r][1], e3 = t[r][1] - t[r][3];
        STORE(v, at + (r * 4 + 0) * stride, e0);
        STORE(v, at + (r * 4 + 1) * stride, e1);
        STORE(v, at + (r * 4 + 2) * stride, e2);
        STORE(v, at + (r * 4 + 3) * stride, e3);
    }
}

__kernel void winograd_output(__global const store_t *mt, int m_off, __global const store_t *bias, int b_off,
                              __global store_t *y, int y_off, int total, int M, int OH, int OW,
                              int TH, int TW, int has_bias, EPILOGUE_ARGS) {
    int i = get_global_id(0);           /* over (n, m, tile) */
    if (i >= total) return;
    int tiles = TH * TW;
    int tile = i % tiles, nm = i / tiles;
    int m = nm % M, n = nm / M;
    long stride = (long)M * tiles;
    long at = m_off + (long)n * 16 * stride + (long)m * tiles + tile;
    float q[4][4];
    for (int k = 0; k < 16; k++) q[k / 4][k % 4] = LOAD(mt, at + k * stride);
    float t[2][4];                      /* A^T = [1 1 1 0; 0 1 -1 -1] */
    for (int s = 0; s < 4; s++) {
        t[0][s] = q[0][s] + q[1][s] + q[2][s];
        t[1][s] = q[1][s] - q[2][s] - q[3][s];
    }
    float b = has_bias ? LOAD(bias, b_off + m) : 0.0f;
    int th = tile / TW, tw = tile % TW;
    for (int r = 0; r < 2; r++) {
        float o0 = t[r][0] + t[r][1] + t[r][2] + b;
        float o1 = t[r][1] - t[r][2] - t[r][3] + b;
        int oh = th * 2 + r, ow = tw * 2;
        long row = ((long)nm * OH + oh) * OW;          /* Y's (and Z's) index of (n, m, oh, 0) */
        if (oh < OH) {
            CONV_STORE(y, y_off + row + ow, row + ow, o0);
            if (ow + 1 < OW) CONV_STORE(y, y_off + row + ow + 1, row + ow + 1, o1);
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
