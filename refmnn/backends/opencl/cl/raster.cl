/* Raster: copy one strided region (collapsed to 4 axes on the host) of a source into the
 * output. Positions no region writes are zero-filled by the host (clEnqueueFillBuffer) first,
 * only when the regions do not cover the whole output. Elements are moved as ELEM_SIZE-byte
 * words, so one program serves every dtype of that size. */
__kernel void raster_region(__global const elem_t *src, int src_off, __global elem_t *dst, int dst_off,
                            int n, int n1, int n2, int n3, int s0, int s1, int s2, int s3,
                            int d0, int d1, int d2, int d3) {
    int i = get_global_id(0);
    if (i >= n) return;
    dst[dst_off + offset4(i, n1, n2, n3, d0, d1, d2, d3)] =
        src[src_off + offset4(i, n1, n2, n3, s0, s1, s2, s3)];
}

/* Gather along one axis: data seen as (outer, axis_size, inner), indices flattened (count),
 * out[o, j, k] = data[o, idx[j] (negative wraps), k]. An index out of range writes zero (the
 * reference raises; a kernel cannot). */
#ifdef INDEX_T
__kernel void gather(__global const elem_t *data, int d_off, __global const INDEX_T *idx, int i_off,
                     __global elem_t *out, int o_off, int n, int count, int inner, int axis_size) {
    int i = get_global_id(0);
    if (i >= n) return;
    int k = i % inner;
    int t = i / inner;
    int j = t % count;
    int o = t / count;
    long at = (long)idx[i_off + j];
    if (at < 0) at += axis_size;
    out[o_off + i] = (at >= 0 && at < axis_size)
        ? data[d_off + ((long)o * axis_size + at) * inner + k] : (elem_t)0;
}
#endif
