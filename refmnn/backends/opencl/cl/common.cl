/* Prepended to every program. Storage type of float tensors: float, or half read and written
 * through vload_half / vstore_half_rte (no cl_khr_fp16 needed); arithmetic is always float.
 * Every tensor argument is a (pointer, element offset) pair: refmnn's planner aligns tensors to
 * 64 bytes, which may be finer than CL_DEVICE_MEM_BASE_ADDR_ALIGN, so no sub-buffers. */
#ifdef HALF_STORAGE
typedef half store_t;
#define LOAD(p, i) vload_half((i), (p))
#define STORE(p, i, v) vstore_half_rte((v), (i), (p))
#else
typedef float store_t;
#define LOAD(p, i) ((p)[i])
#define STORE(p, i, v) ((p)[i] = (v))
#endif

/* Element type for kernels that only move bytes (Raster, Gather, Where's payload). */
#if ELEM_SIZE == 1
typedef uchar elem_t;
#elif ELEM_SIZE == 2
typedef ushort elem_t;
#elif ELEM_SIZE == 8
typedef ulong elem_t;
#else
typedef uint elem_t;
#endif

/* Offset of flat index i in a tensor walked with 4-D strides s over sizes (n0, n1, n2, n3). */
inline int offset4(int i, int n1, int n2, int n3, int s0, int s1, int s2, int s3) {
    int i3 = i % n3; i /= n3;
    int i2 = i % n2; i /= n2;
    int i1 = i % n1; i /= n1;
    return i * s0 + i1 * s1 + i2 * s2 + i3 * s3;
}
