/* Row reductions: the input is seen as (outer, R, inner) and one work-group computes one output
 * (o, k), its work-items striding over r and combining partial results with a tree in local
 * memory (the work-group size is a power of two, chosen by the tuner). */

#define R_SUM 0
#define R_MEAN 1
#define R_MAX 2
#define R_MIN 3

#if defined(RCODE)
#if RCODE == R_SUM || RCODE == R_MEAN
#define INIT 0.0f
#define COMBINE(a, b) ((a) + (b))
#elif RCODE == R_MAX   /* NaN propagates, as np.max */
#define INIT (-INFINITY)
#define COMBINE(a, b) ((isnan(a) || isnan(b)) ? NAN : fmax((a), (b)))
#elif RCODE == R_MIN
#define INIT INFINITY
#define COMBINE(a, b) ((isnan(a) || isnan(b)) ? NAN : fmin((a), (b)))
#endif

/* Tree reduction of scratch[0..L) in place; every work-item gets the result. */
inline float tree(__local float *scratch, float value) {
    int lid = get_local_id(0), size = get_local_size(0);
    scratch[lid] = value;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int half_size = size / 2; half_size > 0; half_size /= 2) {
        if (lid < half_size) scratch[lid] = COMBINE(scratch[lid], scratch[lid + half_size]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float result = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return result;
}

__kernel void reduce_rows(__global const store_t *x, int x_off, __global store_t *y, int y_off,
                          int R, int inner, __local float *scratch) {
    int g = get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
    int o = g / inner, k = g % inner;
    __global const store_t *row = x + x_off + (long)o * R * inner + k;
    float acc = INIT;
    for (int r = lid; r < R; r += size) acc = COMBINE(acc, LOAD(row, (long)r * inner));
    acc = tree(scratch, acc);
#if RCODE == R_MEAN
    acc = acc / (float)R;
#endif
    if (lid == 0) STORE(y, y_off + g, acc);
}
#endif

/* Softmax along the middle axis of (outer, N, inner): max, then sum of exp(x - max), then
 * exp(x - max) / sum, each reduction a tree over the work-group. */
inline float tree_max(__local float *s, float v) {
    int lid = get_local_id(0), size = get_local_size(0);
    s[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = size / 2; h > 0; h /= 2) {
        if (lid < h) s[lid] = fmax(s[lid], s[lid + h]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = s[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

inline float tree_sum(__local float *s, float v) {
    int lid = get_local_id(0), size = get_local_size(0);
    s[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = size / 2; h > 0; h /= 2) {
        if (lid < h) s[lid] += s[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = s[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

__kernel void softmax_rows(__global const store_t *x, int x_off, __global store_t *y, int y_off,
                           int N, int inner, __local float *scratch) {
    int g = get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
    int o = g / inner, k = g % inner;
    long base = (long)o * N * inner + k;
    float peak = -INFINITY;
    for (int r = lid; r < N; r += size) peak = fmax(peak, LOAD(x, x_off + base + (long)r * inner));
    peak = tree_max(scratch, peak);
    float total = 0.0f;
    for (int r = lid; r < N; r += size) total += exp(LOAD(x, x_off + base + (long)r * inner) - peak);
    total = tree_sum(scratch, total);
    for (int r = lid; r < N; r += size) {
        long at = base + (long)r * inner;
        STORE(y, y_off + at, exp(LOAD(x, x_off + at) - peak) / total);
    }
}

/* Softmax along the last, contiguous axis on CPU devices (PoCL): one work-item per row, rows
 * of length N read 8 at a time (vload8 / vload_half8) with the builtin exp on float8. Why: on
 * PoCL a work-group runs as a loop over its work-items and every barrier of softmax_rows' trees
 * splits that loop (for rows of ~200 elements the trees and barriers cost more than the
 * arithmetic), and the scalar exp calls do not vectorise; the vector exp of PoCL's kernel
 * library does. Three passes over the row: max, sum of exp(x - max), exp(x - max) / sum (the
 * exp recomputed rather than stored, so float16 storage keeps the float quotient, as the
 * reference). The tail of a row that is not a multiple of 8 is scalar. */
__kernel void softmax_vec(__global const store_t *x, int x_off, __global store_t *y, int y_off,
                          int N, int rows) {
    int r = get_global_id(0);
    if (r >= rows) return;
    __global const store_t *xr = x + x_off + (long)r * N;
    __global store_t *yr = y + y_off + (long)r * N;
    int n8 = N & ~7;
    float8 m8 = (float8)(-INFINITY);
    for (int j = 0; j < n8; j += 8) {       /* fmax's choice, with ?: (fmax on float8 is a call) */
        float8 v = LOAD_F8(xr + j);
        m8 = v > m8 ? v : m8;
    }
    float4 m4 = fmax(m8.lo, m8.hi);
    float peak = fmax(fmax(m4.x, m4.y), fmax(m4.z, m4.w));
    for (int j = n8; j < N; j++) peak = fmax(peak, LOAD(xr, j));
    float8 s8 = (float8)(0.0f);
    for (int j = 0; j < n8; j += 8) s8 += exp(LOAD_F8(xr + j) - peak);
    float4 s4 = s8.lo + s8.hi;
    float total = (s4.x + s4.y) + (s4.z + s4.w);
    for (int j = n8; j < N; j++) total += exp(LOAD(xr, j) - peak);
    for (int j = 0; j < n8; j += 8) STORE_F8(yr + j, exp(LOAD_F8(xr + j) - peak) / total);
    for (int j = n8; j < N; j++) STORE(yr, j, exp(LOAD(xr, j) - peak) / total);
}

/* LayerNormalization over the last K elements of each row, by the reference's corrected two-pass
 * algorithm: the mean; the mean of the deviations (the float32 mean's rounding error, 0 where it
 * is not finite) taken off them; the mean of their squares; y = d * inv_std * scale + bias. */
__kernel void layernorm_rows(__global const store_t *x, int x_off, __global const store_t *scale, int s_off,
                             __global const store_t *bias, int b_off, __global store_t *y, int y_off,
                             int K, float epsilon, int has_bias, __local float *scratch) {
    int g = get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
    long base = (long)g * K;
    float total = 0.0f;
    for (int j = lid; j < K; j += size) total += LOAD(x, x_off + base + j);
    float mean = tree_sum(scratch, total) / (float)K;
    float deviations = 0.0f;
    for (int j = lid; j < K; j += size) deviations += LOAD(x, x_off + base + j) - mean;
    float shift = tree_sum(scratch, deviations) / (float)K;
    if (!isfinite(shift)) shift = 0.0f;
    float squares = 0.0f;
    for (int j = lid; j < K; j += size) {
        float d = (LOAD(x, x_off + base + j) - mean) - shift;
        squares += d * d;
    }
    float inv_std = 1.0f / sqrt(tree_sum(scratch, squares) / (float)K + epsilon);
    for (int j = lid; j < K; j += size) {
        float v = ((LOAD(x, x_off + base + j) - mean) - shift) * inv_std * LOAD(scale, s_off + j);
        if (has_bias) v += LOAD(bias, b_off + j);
        STORE(y, y_off + base + j, v);
    }
}
