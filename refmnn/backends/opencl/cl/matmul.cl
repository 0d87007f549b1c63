/* Batched GEMM, two kernels with the same arguments: for every batch b,
 *     C[b] (M x N) = act((alpha * A[b] (M x K) @ B[b] (K x N) + beta * bias) + Z)
 * all row-major with leading dimensions K, N, N. A batch's A, B, bias and Z element offsets come
 * from the table `offsets` (4 ints per batch, so broadcast batch dims and grouped convolutions
 * cost nothing); C's batch stride is c_stride. Any M, N, K >= 1.
 *
 * The epilogue (when HAS_BIAS / HAS_Z / ACT are defined) runs in the store, while the result
 * is still in registers: this is how refmnn::FusedMatMul, FusedGemm and the GEMM schemes of
 * FusedConv avoid a second pass over C. bias and Z are read at
 *     bias[offsets[4b + 2] + m * bias_sm + n * bias_sn],  Z[offsets[4b + 3] + m * z_sm + n * z_sn]
 * so one kernel serves a conv bias (per row: sm 1, sn 0), a MatMul bias (per column: 0, 1),
 * Gemm's C broadcast any way, and a residual of C's own shape (N, 1). Each step is rounded to
 * float as in the unfused graph; the activation is epilogue.cl's activate() (-DACT).
 *
 * gemm      -- tiles through local memory (the GPU textbook kernel).
 * gemm_reg  -- register blocking, no local memory (fast on CPU devices such as PoCL).
 * The host tunes which one, and its block sizes, per shape and device (kernels/matmul.py).
 *
 * Why two? A GEMM does 2 M N K flops on M K + K N + M N numbers: every number is reused
 * N, M or K times, and a fast kernel serves those reuses from the fastest memory it has.
 * - On a GPU that is local memory: a work-group stages a TS x TS tile of A and of B once and
 *   all its work-items read them TS times (`gemm`).
 * - On a CPU the "work-items" of a work-group are iterations of a loop on one core, local
 *   memory is ordinary cached memory and a barrier splits that loop in two. Staging copies
 *   buy nothing; what matters is keeping a block of C in the vector registers so that each
 *   number loaded from A or B (from L1/L2 cache) feeds several fused multiply-adds
 *   (`gemm_reg`). */

/* The arguments both kernels share, and the epilogue of one output value v at (b, m, n). */
#define GEMM_ARGS                                                                            \
    __global const store_t *A, int a_off, __global const store_t *B, int b_off,             \
    __global store_t *C, int c_off, __global const store_t *bias, int bias_off,             \
    __global const store_t *Z, int z_off, __global const int *offsets,                      \
    int M, int N, int K, int c_stride, int bias_sm, int bias_sn, int z_sm, int z_sn,        \
    float alpha, float beta, float act_alpha, float act_lo, float act_hi

inline float gemm_epilogue(float v, int b, int m, int n, __global const int *offsets,
                           __global const store_t *bias, int bias_off, int bias_sm, int bias_sn,
                           __global const store_t *Z, int z_off, int z_sm, int z_sn,
                           float alpha, float beta, float act_alpha, float act_lo, float act_hi) {
    v = alpha * v;                                      /* exact when alpha = 1 (MatMul, Conv) */
#ifdef HAS_BIAS
    v += beta * LOAD(bias, bias_off + offsets[4 * b + 2] + m * bias_sm + n * bias_sn);
#endif
#ifdef HAS_Z
    v += LOAD(Z, z_off + offsets[4 * b + 3] + m * z_sm + n * z_sn);
#endif
    return activate(v, act_alpha, act_lo, act_hi);
}
#define EPILOGUE(v, b, m, n)                                                                 \
    gemm_epilogue(v, b, m, n, offsets, bias, bias_off, bias_sm, bias_sn, Z, z_off, z_sm, z_sn, \
                  alpha, beta, act_alpha, act_lo, act_hi)

/* ---------------------------------------------------------------------------------------
 * gemm: local-memory tiles.
 * A work-group of (TS, TS / WPT) work-items computes a TS x TS tile of C: each work-item
 * WPT outputs of one column, rows lid1, lid1 + TS/WPT, ... The K loop stages TS x TS tiles of
 * A and B through local memory; out-of-range elements load as zero (any M, N, K). */
#ifndef TS
#define TS 16
#endif
#ifndef WPT
#define WPT 4
#endif
#define RTS (TS / WPT)

__kernel void gemm(GEMM_ARGS) {
    const int col = get_local_id(0), row = get_local_id(1);
    const int n = get_group_id(0) * TS + col;
    const int m0 = get_group_id(1) * TS + row;
    const int b = get_global_id(2);
    __global const store_t *a = A + a_off + offsets[4 * b];
    __global const store_t *bm = B + b_off + offsets[4 * b + 1];
    __local float tileA[TS][TS + 1];
    __local float tileB[TS][TS + 1];
    float acc[WPT];
    for (int w = 0; w < WPT; w++) acc[w] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        for (int w = 0; w < WPT; w++) {
            int r = row + w * RTS;                     /* tile row loaded by this work-item */
            int am = get_group_id(1) * TS + r, ak = k0 + col;
            tileA[r][col] = (am < M && ak < K) ? LOAD(a, (long)am * K + ak) : 0.0f;
            int bk = k0 + r;
            tileB[r][col] = (bk < K && n < N) ? LOAD(bm, (long)bk * N + n) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; k++) {
            float bv = tileB[k][col];
            for (int w = 0; w < WPT; w++) acc[w] += tileA[row + w * RTS][k] * bv;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int w = 0; w < WPT; w++) {
        int m = m0 + w * RTS;
        if (m < M && n < N) STORE(C, c_off + (long)b * c_stride + (long)m * N + n, EPILOGUE(acc[w], b, m, n));
    }
}

/* ---------------------------------------------------------------------------------------
 * gemm_reg: register blocking, A and B read straight from global memory.
 *
 * Compile-time block: VW (vector width: 4, 8 or 16 floats), NV (vectors per row), WM (rows).
 * Work-item (x, y, b) owns the WM x WN block of C[b] (WN = NV * VW) at
 *     rows    m0 = y * WM .. m0 + WM - 1
 *     columns n0 = x * WN .. n0 + WN - 1
 * and keeps it in WM * NV vector accumulators (registers). For each k it loads NV vectors
 * of B's row k (contiguous) and WM scalars of A's column k, and does WM * NV vector
 * multiply-adds:
 *
 *            B row k:   [ b0 .. b(VW-1) | ... ]        NV vectors
 *     A[m0+0][k] * ---> acc[0][0]        acc[0][NV-1]
 *     A[m0+1][k] * ---> acc[1][0]   ...
 *        ...
 *     A[m0+WM-1][k] *-> acc[WM-1][0]     acc[WM-1][NV-1]
 *
 * so each B number is used WM times and each A number WN times from a register. PoCL here
 * (LLVM 14) compiles for AVX2: 16 registers of 8 floats. VW = 8, NV = 2, WM = 6 makes 12
 * accumulators, 2 B vectors and 1 broadcast of A: 12 FMAs per 2 vector loads and 6 broadcasts
 * (the classic 6 x 16 CPU micro-kernel). Neighbouring work-items along x share A's rows and
 * along y B's columns, which stay in cache while a work-group runs (a CPU device runs one
 * work-group on one core, work-item after work-item).
 *
 * Edges. Rows past M are clamped to row M - 1 (their loads are in range, their results are
 * dropped), so the inner loop has no row tests. A block that sticks out past N (only the last
 * block of a row) takes a second copy of the loop whose B loads fill a vector element by
 * element, with zeros past N; full blocks never test columns.
 * --------------------------------------------------------------------------------------- */
#ifndef VW
#define VW 8
#endif
#ifndef NV
#define NV 1
#endif
#ifndef WM
#define WM 4
#endif
#define WN (NV * VW)

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
typedef CAT(float, VW) floatv;          /* float4 / float8 / float16 */
typedef union { floatv v; float s[VW]; } floatv_u;   /* a vector and its elements */

/* Vector load of VW consecutive elements at p + i, any alignment. With float storage it is
 * written element by element: PoCL (3.0 here) calls vloadn / min / fma out of line, while
 * LLVM merges these consecutive loads into one unaligned vector load. */
#ifdef HALF_STORAGE
#define LOADV(p, i) CAT(vload_half, VW)(0, (p) + (i))
#else
#define LOAD4_(p, i) (float4)((p)[i], (p)[(i) + 1], (p)[(i) + 2], (p)[(i) + 3])
#define LOAD8_(p, i) (float8)(LOAD4_(p, i), LOAD4_(p, (i) + 4))
#define LOAD16_(p, i) (float16)(LOAD8_(p, i), LOAD8_(p, (i) + 8))
#define LOADV(p, i) CAT(CAT(LOAD, VW), _)(p, i)
#endif

/* VW elements of B from column n on, zero past column N (the right edge of C). */
inline floatv load_edge(__global const store_t *p, int n, int N) {
    floatv_u t;
#pragma unroll
    for (int l = 0; l < VW; l++) t.s[l] = n + l < N ? LOAD(p, n + l) : 0.0f;
    return t.v;
}
/* VW elements to p (LLVM merges the float element stores, as LOADV's loads) */
inline void store_v(__global store_t *p, floatv v) {
    floatv_u t;
    t.v = v;
#pragma unroll
    for (int l = 0; l < VW; l++) STORE(p, l, t.s[l]);   /* float16: vstore_half, lane by lane */
}

/* activate() on VW lanes: relu, leaky relu and clip as vector ?: (selects; NaN passes through as
 * in the scalar form), the others lane by lane. */
inline floatv activate_v(floatv v, float alpha, float lo, float hi) {
#if ACT == ACT_NONE
    return v;
#elif ACT == ACT_RELU
    return v < (floatv)(0.0f) ? (floatv)(0.0f) : v;
#elif ACT == ACT_LEAKY
    return v < (floatv)(0.0f) ? (floatv)(alpha) * v : v;
#elif ACT == ACT_CLIP
    v = v < (floatv)(lo) ? (floatv)(lo) : v;
    return v > (floatv)(hi) ? (floatv)(hi) : v;
#else
    floatv_u t;
    t.v = v;
#pragma unroll
    for (int l = 0; l < VW; l++) t.s[l] = activate(t.s[l], alpha, lo, hi);
    return t.v;
#endif
}
/* gemm_epilogue on VW lanes of one row, for bias / Z per row or contiguous along it (the caller
 * checks): the same steps in the same order. */
inline floatv gemm_epilogue_v(floatv v, int b, int m, int n, __global const int *offsets,
                              __global const store_t *bias, int bias_off, int bias_sm, int bias_sn,
                              __global const store_t *Z, int z_off, int z_sm, int z_sn,
                              float alpha, float beta, float act_alpha, float act_lo, float act_hi) {
    v = alpha * v;
#ifdef HAS_BIAS
    const long bias_at = bias_off + offsets[4 * b + 2] + (long)m * bias_sm;
    v += beta * (bias_sn == 0 ? (floatv)(LOAD(bias, bias_at)) : LOADV(bias, bias_at + n));
#endif
#ifdef HAS_Z
    v += LOADV(Z, z_off + offsets[4 * b + 3] + (long)m * z_sm + n);
#endif
    return activate_v(v, act_alpha, act_lo, act_hi);
}
#define EPILOGUE_V(v, b, m, n)                                                               \
    gemm_epilogue_v(v, b, m, n, offsets, bias, bias_off, bias_sm, bias_sn, Z, z_off, z_sm, z_sn, \
                    alpha, beta, act_alpha, act_lo, act_hi)

/* BODY for each (row i, vector j) of the work-item's block whose row lies inside C, with m, n
 * and at = m * N + n set; rows and vectors unrolled. */
#define FOR_EACH_VECTOR(BODY)                                                  \
    _Pragma("unroll")                                                          \
    for (int i = 0; i < WM; i++) {                                             \
        const int m = m0 + i;                                                  \
        if (m >= M) break;                                                     \
        _Pragma("unroll")                                                      \
        for (int j = 0; j < NV; j++) {                                         \
            const int n = n0 + j * VW;                                         \
            const long at = (long)m * N + n;                                   \
            BODY                                                               \
        }                                                                      \
    }
#define LOAD_FULL(p, n) LOADV(p, n)
#define LOAD_EDGE(p, n) load_edge(p, n, N)

/* The K loop: acc[i][j] += A[m0 + i][k] * B[k][n0 + j VW ..]; LOAD_B(row, column) loads a
 * vector. The i and j loops have compile-time trip counts and are unrolled, so acc lives in
 * registers; `a * b + c` is contracted to a fused multiply-add. */
#define K_LOOP(LOAD_B)                                                         \
    for (int k = 0; k < K; k++) {                                              \
        floatv bv[NV];                                                         \
        _Pragma("unroll")                                                      \
        for (int j = 0; j < NV; j++) bv[j] = LOAD_B(bk, n0 + j * VW);          \
        _Pragma("unroll")                                                      \
        for (int i = 0; i < WM; i++) {                                         \
            const float av = LOAD(arow[i], k);                                 \
            _Pragma("unroll")                                                  \
            for (int j = 0; j < NV; j++) acc[i][j] += av * bv[j];              \
        }                                                                      \
        bk += N;                                                               \
    }

__kernel void gemm_reg(GEMM_ARGS) {
    const int n0 = get_global_id(0) * WN, m0 = get_global_id(1) * WM, b = get_global_id(2);
    if (n0 >= N || m0 >= M) return;    /* the launch is rounded up to whole work-groups */
    __global const store_t *a = A + a_off + offsets[4 * b];
    __global const store_t *bk = B + b_off + offsets[4 * b + 1];   /* row k of B */
    __global const store_t *arow[WM];  /* the block's rows of A, clamped to M - 1 */
#pragma unroll
    for (int i = 0; i < WM; i++) arow[i] = a + (long)(m0 + i < M ? m0 + i : M - 1) * K;

    floatv acc[WM][NV];
#pragma unroll
    for (int i = 0; i < WM; i++)
#pragma unroll
        for (int j = 0; j < NV; j++) acc[i][j] = (floatv)0.0f;

    const bool full = n0 + WN <= N;
    if (full) {
        K_LOOP(LOAD_FULL)
    } else {
        K_LOOP(LOAD_EDGE)
    }

    __global store_t *c = C + c_off + (long)b * c_stride;
    /* The epilogue on whole vectors when the block is full and bias and Z are per row (a conv's
     * bias) or contiguous along the row (a MatMul's bias, a residual of C's shape): the same
     * steps as gemm_epilogue, in the same order, lane by lane. Else element by element. (Per
     * element, the epilogue costs more than the K loop of a small-K GEMM, the expand 1x1
     * convs of MobileNetV2 with K = 16..32.) Every work-item of a launch takes the same way. */
#ifdef HAS_BIAS
    const bool bias_vec = bias_sn == 0 || (bias_sm == 0 && bias_sn == 1);
#else
    const bool bias_vec = true;
#endif
#ifdef HAS_Z
    const bool z_vec = z_sn == 1;
#else
    const bool z_vec = true;
#endif
    if (full && bias_vec && z_vec) {
        FOR_EACH_VECTOR(store_v(c + at, EPILOGUE_V(acc[i][j], b, m, n));)
        return;
    }
    FOR_EACH_VECTOR(
        floatv_u t;
        t.v = acc[i][j];
        const int valid = full ? VW : N - n;             /* columns left in this vector */
        _Pragma("unroll")
        for (int l = 0; l < VW; l++)
            if (l < valid) STORE(c, at + l, EPILOGUE(t.s[l], b, m, n + l));
    )
}

/* ---------------------------------------------------------------------------------------
 * transpose2d: Y (Cols x Rows) = X (Rows x Cols)^T -- Gemm's transA / transB operands when
 * they are not constants (constant ones are transposed once on the host, at prepare). A 2-D
 * NDRange: get_global_id gives the coordinates, no integer division per element. */
__kernel void transpose2d(__global const store_t *x, int x_off, __global store_t *y, int y_off,
                          int Rows, int Cols) {
    const int c = get_global_id(0), r = get_global_id(1);
    if (c >= Cols || r >= Rows) return;
    STORE(y, y_off + (long)c * Rows + r, LOAD(x, x_off + (long)r * Cols + c));
}
