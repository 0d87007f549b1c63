/* Raster: copy one strided region (collapsed to 4 axes on the host) of a source into the
 * output. Positions no region writes are zero-filled by the host (clEnqueueFillBuffer) first,
 * only when the regions do not cover the whole output. Elements are moved as ELEM_SIZE-byte
 * words, so one program serves every dtype of that size.
 *
 * The launch is a 3-D NDRange (n3, n2, n0 * n1) over the region's sizes: get_global_id gives
 * the coordinates, so no work-item divides its flat index by the sizes (four integer divisions
 * per element cost more than the copy itself), and the one division left (i01 / n1) is the
 * same for a whole row. The innermost strides are compile-time constants when they are 1
 * (-DS3=1, -DD3=1: a contiguous row, the common case), so PoCL's work-item loop over a row
 * becomes vector loads and stores; otherwise they are the arguments s3, d3 (a gather). */
#ifndef S3
#define S3 s3
#endif
#ifndef D3
#define D3 d3
#endif
__kernel void raster_region(__global const elem_t *src, int src_off, __global elem_t *dst, int dst_off,
                            int n, int n1, int n2, int n3, int s0, int s1, int s2, int s3,
                            int d0, int d1, int d2, int d3) {
    const int i3 = get_global_id(0), i2 = get_global_id(1), i01 = get_global_id(2);
    const int i0 = i01 / n1, i1 = i01 - i0 * n1;
    dst[dst_off + i0 * d0 + i1 * d1 + i2 * d2 + i3 * D3] = src[src_off + i0 * s0 + i1 * s1 + i2 * s2 + i3 * S3];
}

/* Gather along one axis: data seen as (outer, axis_size, inner), indices flattened (count),
 * out[o, j, k] = data[o, idx[j] (negative wraps), k]. A kernel cannot raise: an index out of
 * [-axis_size, axis_size) writes zero and records this node's check id in the error flag (the
 * first failing check wins); the host raises at the run's one sync (backend.end_run). */
#ifdef INDEX_T
__kernel void gather(__global const elem_t *data, int d_off, __global const INDEX_T *idx, int i_off,
                     __global elem_t *out, int o_off, int n, int count, int inner, int axis_size,
                     __global int *err, int check) {
    int i = get_global_id(0);
    if (i >= n) return;
    int k = i % inner;
    int t = i / inner;
    int j = t % count;
    int o = t / count;
    long at = (long)idx[i_off + j];
    if (at < 0) at += axis_size;
    if (at >= 0 && at < axis_size) {
        out[o_off + i] = data[d_off + ((long)o * axis_size + at) * inner + k];
    } else {
        out[o_off + i] = (elem_t)0;
        atomic_cmpxchg(err, 0, check);
    }
}
#endif
