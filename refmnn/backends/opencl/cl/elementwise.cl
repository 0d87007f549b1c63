/* Elementwise kernels: binary with broadcasting, unary (with up to two float parameters),
 * Where, Cast. Broadcasting is resolved on the host: the output shape and each operand's
 * strides (0 on broadcast axes) are collapsed to 4 axes (sizes n0..n3). CONTIGUOUS is defined
 * when every operand is read at the output's own flat index (no index arithmetic). */

#define OP_ADD 0
#define OP_SUB 1
#define OP_MUL 2
#define OP_DIV 3
#define OP_POW 4
#define OP_MAX 5
#define OP_MIN 6

#if defined(OPCODE)
#if OPCODE == OP_ADD
#define BINARY(a, b) ((a) + (b))
#elif OPCODE == OP_SUB
#define BINARY(a, b) ((a) - (b))
#elif OPCODE == OP_MUL
#define BINARY(a, b) ((a) * (b))
#elif OPCODE == OP_DIV
#define BINARY(a, b) ((a) / (b))
#elif OPCODE == OP_POW
#define BINARY(a, b) pow((a), (b))
#elif OPCODE == OP_MAX /* NaN propagates, as in the reference (np.maximum) */
#define BINARY(a, b) ((isnan(a) || isnan(b)) ? NAN : fmax((a), (b)))
#elif OPCODE == OP_MIN
#define BINARY(a, b) ((isnan(a) || isnan(b)) ? NAN : fmin((a), (b)))
#endif
#endif

/* binary: y = a OP b. CONTIGUOUS: a 1-D launch, every operand read at the output's index.
 * Otherwise a 3-D NDRange (n3, n2, n0 * n1) over the collapsed broadcast: get_global_id gives
 * the coordinates (no offset4() divisions per element; the one left, i01 / n1, is the same
 * for a whole row), and the innermost strides are compile-time constants when they are 0 or 1
 * (-DA3=0/1, -DB3=0/1: a broadcast scalar or a contiguous row), so PoCL's work-item loop over
 * a row vectorises like the contiguous kernel. */
#ifndef A3
#define A3 a3
#endif
#ifndef B3
#define B3 b3
#endif
#ifdef OPCODE
__kernel void binary(__global const store_t *a, int a_off, __global const store_t *b, int b_off,
                     __global store_t *y, int y_off, int n, int n1, int n2, int n3,
                     int a0, int a1, int a2, int a3, int b0, int b1, int b2, int b3) {
#ifdef CONTIGUOUS
    int i = get_global_id(0);
    if (i >= n) return;
    int ia = i, ib = i;
#else
    const int i3 = get_global_id(0), i2 = get_global_id(1), i01 = get_global_id(2);
    const int i0 = i01 / n1, i1 = i01 - i0 * n1;
    const int i = (i01 * n2 + i2) * n3 + i3;
    const int ia = i0 * a0 + i1 * a1 + i2 * a2 + i3 * A3;
    const int ib = i0 * b0 + i1 * b1 + i2 * b2 + i3 * B3;
#endif
    float va = LOAD(a, a_off + ia), vb = LOAD(b, b_off + ib);
    STORE(y, y_off + i, BINARY(va, vb));
}
#endif

#define U_RELU 0
#define U_SIGMOID 1
#define U_TANH 2
#define U_ERF 3
#define U_EXP 4
#define U_LOG 5
#define U_SQRT 6
#define U_NEG 7
#define U_ABS 8
#define U_CLIP 9
#define U_LEAKY 10
#define U_RECIPROCAL 11
#define U_ELU 12

#if defined(UCODE)
#if UCODE == U_RELU
#define UNARY(x) ((x) < 0.0f ? 0.0f : (x))  /* keeps NaN, as np.maximum(x, 0) */
#elif UCODE == U_SIGMOID   /* the reference's stable form: 1/(1+e^-x) or e^x/(1+e^x) */
#define UNARY(x) ((x) >= 0.0f ? 1.0f / (1.0f + exp(-(x))) : exp(x) / (1.0f + exp(x)))
#elif UCODE == U_TANH
#define UNARY(x) tanh_sat(x)   /* epilogue.cl: reaches +-1 (PoCL's tanh stops short) */
#elif UCODE == U_ERF
#define UNARY(x) erf_fit(x)   /* epilogue.cl: the reference's fit in double (builtin erf without fp64) */
#elif UCODE == U_EXP
#define UNARY(x) exp(x)
#elif UCODE == U_LOG
#define UNARY(x) log(x)
#elif UCODE == U_SQRT
#define UNARY(x) sqrt(x)
#elif UCODE == U_NEG
#define UNARY(x) (-(x))
#elif UCODE == U_ABS
#define UNARY(x) fabs(x)
#elif UCODE == U_CLIP      /* alpha = min, beta = max (epilogue.cl) */
#define UNARY(x) clip_lo_hi(x, alpha, beta)
#elif UCODE == U_LEAKY
#define UNARY(x) ((x) < 0.0f ? alpha * (x) : (x))
#elif UCODE == U_RECIPROCAL
#define UNARY(x) (1.0f / (x))
#elif UCODE == U_ELU
#define UNARY(x) ((x) < 0.0f ? alpha * expm1(x) : (x))  /* expm1: exp(x) - 1 cancels near 0 */
#endif
#endif

#ifdef UCODE
__kernel void unary(__global const store_t *x, int x_off, __global store_t *y, int y_off, int n,
                    float alpha, float beta) {
    int i = get_global_id(0);
    if (i >= n) return;
    float v = LOAD(x, x_off + i);
    STORE(y, y_off + i, UNARY(v));
}
#endif

/* Where(cond, x, y): payload moved as ELEM_SIZE-byte words, so any dtype works. */
__kernel void where_select(__global const uchar *c, int c_off, __global const elem_t *x, int x_off,
                           __global const elem_t *y, int y_off, __global elem_t *out, int o_off,
                           int n, int n1, int n2, int n3, int c0, int c1, int c2, int c3,
                           int x0, int x1, int x2, int x3, int y0, int y1, int y2, int y3) {
    int i = get_global_id(0);
    if (i >= n) return;
    int ic = offset4(i, n1, n2, n3, c0, c1, c2, c3);
    int ix = offset4(i, n1, n2, n3, x0, x1, x2, x3);
    int iy = offset4(i, n1, n2, n3, y0, y1, y2, y3);
    out[o_off + i] = c[c_off + ic] ? x[x_off + ix] : y[y_off + iy];
}

/* Cast: SRC_KIND / DST_KIND 0 float, 1 half, 2 int, 3 long, 4 bool (uchar), 5 uchar, 6 char. */
#if defined(SRC_KIND)
#if SRC_KIND == 1
#define SRC_T half
#define READ(p, i) vload_half((i), (p))
#else
#if SRC_KIND == 0
#define SRC_T float
#elif SRC_KIND == 2
#define SRC_T int
#elif SRC_KIND == 3
#define SRC_T long
#elif SRC_KIND == 6
#define SRC_T char
#else
#define SRC_T uchar
#endif
#define READ(p, i) ((p)[i])
#endif
#if DST_KIND == 1
#define DST_T half
#define WRITE(p, i, v) vstore_half_rte((float)(v), (i), (p))
#elif DST_KIND == 4
#define DST_T uchar
#define WRITE(p, i, v) ((p)[i] = (uchar)((v) != 0))
#else
#if DST_KIND == 0
#define DST_T float
#elif DST_KIND == 2
#define DST_T int
#elif DST_KIND == 3
#define DST_T long
#elif DST_KIND == 6
#define DST_T char
#else
#define DST_T uchar
#endif
#define WRITE(p, i, v) ((p)[i] = (DST_T)(v))
#endif

__kernel void cast(__global const SRC_T *x, int x_off, __global DST_T *y, int y_off, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    WRITE(y, y_off + i, READ(x, x_off + i));
}
#endif

/* epilogue: y = act((y + p) + q) in place -- a fused node's bias p and residual q (HAS_P,
 * HAS_Q) and activation (-DACT, epilogue.cl) when the producer cannot apply them in its own
 * store (an operand broadcast in a way the GEMM's (m, n) strides cannot express). A 3-D NDRange
 * (n3, n2, n0 * n1) over the collapsed output: get_global_id gives the coordinates, so the only
 * integer division (i01 / n1) is the same for a whole row and the row loop vectorises. */
__kernel void epilogue(__global store_t *y, int y_off, __global const store_t *p, int p_off,
                       __global const store_t *q, int q_off, int n1,
                       int p0, int p1, int p2, int p3, int q0, int q1, int q2, int q3,
                       float act_alpha, float act_lo, float act_hi) {
    const int i3 = get_global_id(0), i2 = get_global_id(1), i01 = get_global_id(2);
    const int n3 = get_global_size(0), n2 = get_global_size(1);
    const int i0 = i01 / n1, i1 = i01 % n1;
    const long at = y_off + ((long)i01 * n2 + i2) * n3 + i3;
    float v = LOAD(y, at);
#ifdef HAS_P
    v += LOAD(p, p_off + i0 * p0 + i1 * p1 + i2 * p2 + i3 * p3);
#endif
#ifdef HAS_Q
    v += LOAD(q, q_off + i0 * q0 + i1 * q1 + i2 * q2 + i3 * q3);
#endif
    STORE(y, at, activate(v, act_alpha, act_lo, act_hi));
}

/* QuantizeLinear / DequantizeLinear per tensor, float32 <-> CODE_T (char or uchar), the scale
 * and zero point as arguments (refmnn/ops/quant.py; bit for bit the reference):
 *   quantize:   y = clip(rint(x / scale, NaN as 0) + zero, CODE_MIN, CODE_MAX)
 *   dequantize: y = (x - zero) * scale     (x - zero exact in float, the product rounded once)
 * The quotient is the float division correctly rounded: in double and rounded to float, which
 * gives the same (double rounding is innocuous for a quotient of floats: 53 >= 2 * 24 + 2),
 * where OpenCL C lets a float division be off by 2.5 ulp (on a device without double, it
 * is that division). rint rounds half to even. */
#ifdef CODE_T
__kernel void quantize(__global const float *x, int x_off, __global CODE_T *y, int y_off, int n,
                       float scale, float zero) {
    int i = get_global_id(0);
    if (i >= n) return;
#ifdef cl_khr_fp64
    float q = (float)((double)x[x_off + i] / (double)scale);
#else
    float q = x[x_off + i] / scale;
#endif
    float v = rint(isnan(q) ? 0.0f : q) + zero;
    v = v < CODE_MIN ? CODE_MIN : (v > CODE_MAX ? CODE_MAX : v);
    y[y_off + i] = (CODE_T)(int)v;
}

__kernel void dequantize(__global const CODE_T *x, int x_off, __global float *y, int y_off, int n,
                         float scale, float zero) {
    int i = get_global_id(0);
    if (i >= n) return;
    y[y_off + i] = ((float)x[x_off + i] - zero) * scale;
}
#endif
