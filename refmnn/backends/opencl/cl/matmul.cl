/* Tiled GEMM with local memory, batched: for every batch b,
 *     C[b] (M x N) = A[b] (M x K) @ B[b] (K x N)  (+ bias[m] per row when HAS_BIAS)
 * all row-major with leading dimensions K, N, N. A batch's A and B element offsets come from
 * the table `offsets` (3 ints per batch: A, B and bias offsets, so broadcast batch dims and
 * grouped convolutions cost nothing); C's batch stride is c_stride.
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

__kernel void gemm(__global const store_t *A, int a_off, __global const store_t *B, int b_off,
                   __global store_t *C, int c_off, __global const store_t *bias, int bias_off,
                   __global const int *offsets, int M, int N, int K, int c_stride) {
    const int col = get_local_id(0), row = get_local_id(1);
    const int n = get_group_id(0) * TS + col;
    const int m0 = get_group_id(1) * TS + row;
    const int b = get_global_id(2);
    __global const store_t *a = A + a_off + offsets[3 * b];
    __global const store_t *bm = B + b_off + offsets[3 * b + 1];
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
        if (m < M && n < N) {
            float v = acc[w];
#ifdef HAS_BIAS
            v += LOAD(bias, bias_off + offsets[3 * b + 2] + m);
#endif
            STORE(C, c_off + (long)b * c_stride + (long)m * N + n, v);
        }
    }
}
