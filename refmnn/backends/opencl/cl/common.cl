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

/* Eight floats to and from global memory, element by element. PoCL 3.0 (LLVM 14) calls vloadn,
 * vstoren, select() and isnan() out of line, a function call per use, where LLVM merges these
 * element accesses into one vector load or store and the ?: operator into a blend: a MaxPool
 * 3x3/2 test kernel on 64 x 111 x 111 took 508 us of device time with vload8 and select, 79 us
 * written so (pool.cl's pool2d: 588 -> 153 us with these and its branch-free NaN test).
 * float16 storage keeps vload_half8 / vstore_half8_rte. float8_u names a vector's lanes (no
 * vstore8 into a private array). */
#ifdef HALF_STORAGE
#define LOAD_F8(p) vload_half8(0, (p))
#define STORE_F8(p, v) vstore_half8_rte((v), 0, (p))
#else
#define LOAD_F4(p) ((float4)((p)[0], (p)[1], (p)[2], (p)[3]))
#define LOAD_F8(p) ((float8)(LOAD_F4(p), LOAD_F4((p) + 4)))
#define STORE_F8(p, v) store_f8((p), (v))
inline void store_f8(__global float *p, float8 v) {
    p[0] = v.s0; p[1] = v.s1; p[2] = v.s2; p[3] = v.s3;
    p[4] = v.s4; p[5] = v.s5; p[6] = v.s6; p[7] = v.s7;
}
#endif
typedef union { float8 v; float s[8]; } float8_u;
#define ISNAN8(v) ((as_int8(v) & 0x7fffffff) > 0x7f800000)   /* exponent ones, mantissa not 0 */

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
