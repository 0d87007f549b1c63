"""Eight float32 lanes as a Numba value: the register type of the hand-blocked kernels.

Numba compiles array loops through LLVM, whose loop vectoriser handles one innermost loop at a
time: a GEMM-like kernel written with scalar accumulators (a 4 x 24 tile of them, updated once
per step of K) stays scalar (4.5-9 GFLOP/s measured on MobileNet's 1x1 products, two threads),
and one that accumulates in memory (``out[i, j] += w * x[j]``) is bound by loads and stores
(24-34 GFLOP/s), against 53-157 for OpenBLAS's sgemm on the same shapes. What a register-blocked
micro-kernel needs is an explicit vector type, as C code gets from ``immintrin.h``; this module
gives Numba one:

* :data:`f32x8` -- a Numba type whose value is LLVM's ``<8 x float>`` (kept in a register);
* :func:`vload` / :func:`vstore` -- eight consecutive elements of a C-contiguous 1-D float32
  array at an element index (unaligned; no bounds check: the caller keeps ``i + 8 <= size``);
* :func:`vsplat` -- one float32 in all eight lanes; :func:`vbroadcast` -- one element of such
  an array in all eight lanes, read like :func:`vload` (no bounds check, and no wraparound:
  a plain ``w[i]`` with a signed index carries Numba's negative-index fix-up, whose extra
  registers made LLVM spill a 4 x 24 tile's accumulators to the stack in a packed-weights
  product, 1.7-2x slower); :func:`vpair` -- two adjacent elements, each in four lanes (a
  dot product against weights packed four rows at a time); :func:`vlane` -- one lane as a
  float32; :func:`vset` -- a vector with one lane replaced;
* :func:`veven`, :func:`vodd` -- the even or the odd lanes of the sixteen of two vectors (a
  stride-2 load as two unit-stride ones and a de-interleave), each within the 128-bit halves
  (one ``vshufps``), so in the lane order ``0, 1, 4, 5, 2, 3, 6, 7``; :func:`vorder` puts a
  result computed lane-wise from such vectors back in order (one lane-crossing ``vpermpd``
  per result instead of one per de-interleave, as an in-order shuffle would cost: 10% less
  time in ``depthwise3x3_s2_simd``);
* :func:`vtranspose` -- eight vectors as the rows of an 8 x 8 matrix, returned as its eight
  columns (24 shuffles: eight channels' rows of pixels into eight pixels' vectors of channels
  and back, for ``depthwise3x3_c8``); :func:`vtuple` -- the eight vectors as they are, a tuple
  of the same type;
* :func:`vadd`, :func:`vmul`, :func:`vdiv` -- ``a + b``, ``a * b``, ``a / b`` lane-wise;
  :func:`vmax` -- the larger lane-wise, NaN winning (the MaxPool maximum); :func:`vrelu`,
  :func:`vclamp` -- the Relu and Clip activations lane-wise, as the scalar ``fused.activate``
  computes them (NaN passes through);
* :func:`vfma` -- ``a * b + c`` lane-wise, LLVM's ``llvm.fma.v8f32`` (one ``vfmadd231ps`` on
  an AVX2/FMA CPU; two SSE halves, or a libcall, on older ones -- the same results).

Kernels built on it should apply only where :func:`native` says the CPU runs the vectors as
such: elsewhere LLVM splits them into SSE halves or calls ``fmaf`` per lane (correct, slow).

The functions are Numba intrinsics: they exist only inside ``@njit`` code, and kernels that use
them cache to disk like any other (the intrinsics are found again by module and name).
"""

from __future__ import annotations

import functools
from typing import Any

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

LANES = 8
_VECTOR = ir.VectorType(ir.FloatType(), LANES)


@functools.cache
def native() -> bool:
    """True when the host CPU has AVX2 and FMA (as LLVM, which compiles the kernels, sees it):
    eight float32 lanes in one register and a fused multiply-add in one instruction."""
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    return bool(features.get("avx2") and features.get("fma"))


class F32x8(types.Type):
    """The Numba type of eight float32 lanes (LLVM ``<8 x float>``)."""

    def __init__(self) -> None:
        super().__init__(name="f32x8")


f32x8 = F32x8()


@register_model(F32x8)
class _F32x8Model(models.PrimitiveModel):
    def __init__(self, dmm: Any, fe_type: Any) -> None:
        super().__init__(dmm, fe_type, _VECTOR)


def _address(context: Any, builder: Any, array_type: Any, array: Any, index: Any) -> Any:
    """Pointer to ``array.data + index`` as ``<8 x float>*``."""
    data = context.make_array(array_type)(context, builder, array).data
    return builder.bitcast(builder.gep(data, [index]), _VECTOR.as_pointer())


def _splat(builder: Any, value: Any) -> Any:
    """A float32 IR value in all eight lanes (insert into lane 0, shuffle with a zero mask)."""
    lane0 = builder.insert_element(ir.Constant(_VECTOR, ir.Undefined), value,
                                   ir.Constant(ir.IntType(32), 0))
    zeros = ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES)
    return builder.shuffle_vector(lane0, ir.Constant(_VECTOR, ir.Undefined), zeros)


def _check_array(array: Any) -> None:
    if not (isinstance(array, types.Array) and array.dtype == types.float32 and array.ndim == 1
            and array.layout == "C"):
        raise TypeError(f"simd loads and stores take a C-contiguous 1-D float32 array, got {array}")


@intrinsic
def vload(typingctx: Any, array: Any, index: Any) -> Any:
    """``array[index:index + 8]`` as one f32x8 (unaligned load)."""
    _check_array(array)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.load(_address(context, builder, sig.args[0], args[0], args[1]), align=4)

    return f32x8(array, index), codegen


@intrinsic
def vstore(typingctx: Any, array: Any, index: Any, value: Any) -> Any:
    """``array[index:index + 8] = value`` (unaligned store)."""
    _check_array(array)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        builder.store(args[2], _address(context, builder, sig.args[0], args[0], args[1]),
                      align=4)
        return context.get_dummy_value()

    return types.void(array, index, f32x8), codegen


@intrinsic
def vsplat(typingctx: Any, value: Any) -> Any:
    """``value`` (a float32) in all eight lanes."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return _splat(builder, args[0])

    return f32x8(types.float32), codegen


@intrinsic
def vbroadcast(typingctx: Any, array: Any, index: Any) -> Any:
    """``array[index]`` (``index >= 0``, not checked) in all eight lanes."""
    _check_array(array)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        value = builder.load(builder.gep(data, [args[1]]), align=4)
        return _splat(builder, value)

    return f32x8(array, index), codegen


@intrinsic
def vpair(typingctx: Any, array: Any, index: Any) -> Any:
    """``array[index]`` in lanes 0-3 and ``array[index + 1]`` in lanes 4-7 (one 8-byte load
    and a shuffle; ``index >= 0``, not checked): two elements of a vector laid out as two
    halves of four, such as two rows' worth of weights packed four at a time."""
    _check_array(array)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        pair_type = ir.VectorType(ir.FloatType(), 2)
        pair = builder.load(builder.bitcast(builder.gep(data, [args[1]]), pair_type.as_pointer()),
                            align=4)
        mask = ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0, 0, 0, 0, 1, 1, 1, 1])
        return builder.shuffle_vector(pair, ir.Constant(pair_type, ir.Undefined), mask)

    return f32x8(array, index), codegen


@intrinsic
def vlane(typingctx: Any, value: Any, lane: Any) -> Any:
    """Lane ``lane`` (0..7) of ``value``, as a float32."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.extract_element(args[0], args[1])

    return types.float32(f32x8, lane), codegen


@intrinsic
def vset(typingctx: Any, value: Any, lane: Any, x: Any) -> Any:
    """``value`` with lane ``lane`` (0..7) replaced by the float32 ``x`` (one insert)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.insert_element(args[0], args[2], args[1])

    return f32x8(f32x8, lane, types.float32), codegen


def _shuffle(mask: list[int]) -> Any:
    """Codegen of a shuffle of two vectors (16 lanes, the first's first) by ``mask``."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        indices = ir.Constant(ir.VectorType(ir.IntType(32), LANES), mask)
        return builder.shuffle_vector(args[0], args[-1], indices)

    return codegen


@intrinsic
def veven(typingctx: Any, a: Any, b: Any) -> Any:
    """The even lanes of ``a`` then ``b`` (with ``a, b`` the sixteen consecutive elements from
    ``i``: the elements ``i + 2j``), in the lane order ``j = 0, 1, 4, 5, 2, 3, 6, 7``."""
    return f32x8(f32x8, f32x8), _shuffle([0, 2, 8, 10, 4, 6, 12, 14])


@intrinsic
def vodd(typingctx: Any, a: Any, b: Any) -> Any:
    """The odd lanes of ``a`` then ``b`` (the elements ``i + 2j + 1``), in :func:`veven`'s
    lane order."""
    return f32x8(f32x8, f32x8), _shuffle([1, 3, 9, 11, 5, 7, 13, 15])


@intrinsic
def vorder(typingctx: Any, a: Any) -> Any:
    """``a``'s lanes ``0, 1, 4, 5, 2, 3, 6, 7``: :func:`veven`'s lane order put right (the
    order is its own inverse)."""
    return f32x8(f32x8), _shuffle([0, 1, 4, 5, 2, 3, 6, 7])


@intrinsic
def vtranspose(typingctx: Any, r0: Any, r1: Any, r2: Any, r3: Any, r4: Any, r5: Any, r6: Any,
               r7: Any) -> Any:
    """The columns of the 8 x 8 matrix whose rows are ``r0 .. r7``, as a tuple of eight vectors
    (column ``j``'s lane ``i`` is ``ri``'s lane ``j``): pairs of rows interleaved by lane
    (``vunpcklps`` / ``vunpckhps``), then by lane pair (``vshufps``), then the 128-bit halves
    exchanged (``vperm2f128``), eight shuffles each."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        def shuffle(a: Any, b: Any, mask: list[int]) -> Any:
            return builder.shuffle_vector(
                a, b, ir.Constant(ir.VectorType(ir.IntType(32), LANES), mask))

        def stage(rows: list[Any], pairs: list[tuple[int, int]], first: list[int],
                  second: list[int]) -> list[Any]:
            """Each pair of ``rows`` shuffled by ``first``, then by ``second``."""
            return [shuffle(rows[i], rows[j], mask) for i, j in pairs for mask in (first, second)]

        t = stage(list(args), [(0, 1), (2, 3), (4, 5), (6, 7)], [0, 8, 1, 9, 4, 12, 5, 13],
                  [2, 10, 3, 11, 6, 14, 7, 15])
        u = stage(t, [(0, 2), (1, 3), (4, 6), (5, 7)], [0, 1, 8, 9, 4, 5, 12, 13],
                  [2, 3, 10, 11, 6, 7, 14, 15])
        low, high = [0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]
        columns = [shuffle(u[i], u[i + 4], half) for half in (low, high) for i in range(4)]
        return context.make_tuple(builder, sig.return_type, columns)

    return types.UniTuple(f32x8, LANES)(*[f32x8] * LANES), codegen


@intrinsic
def vtuple(typingctx: Any, r0: Any, r1: Any, r2: Any, r3: Any, r4: Any, r5: Any, r6: Any,
           r7: Any) -> Any:
    """``(r0, .., r7)``, the tuple :func:`vtranspose` would take, built by an intrinsic: an
    inlined function that returns either this or :func:`vtranspose`'s tuple compiles inside a
    parallel loop, where returning a tuple display instead failed Numba's array analysis
    (``AssertionError: Dimension mismatch`` on the unpacked result)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return context.make_tuple(builder, sig.return_type, list(args))

    return types.UniTuple(f32x8, LANES)(*[f32x8] * LANES), codegen


@intrinsic
def vfma(typingctx: Any, a: Any, b: Any, c: Any) -> Any:
    """``a * b + c`` lane-wise, rounded once (``llvm.fma.v8f32``)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_VECTOR, [_VECTOR] * 3), "llvm.fma.v8f32")
        return builder.call(fn, args)

    return f32x8(f32x8, f32x8, f32x8), codegen


@intrinsic
def vadd(typingctx: Any, a: Any, b: Any) -> Any:
    """``a + b`` lane-wise."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.fadd(args[0], args[1])

    return f32x8(f32x8, f32x8), codegen


@intrinsic
def vmul(typingctx: Any, a: Any, b: Any) -> Any:
    """``a * b`` lane-wise."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.fmul(args[0], args[1])

    return f32x8(f32x8, f32x8), codegen


@intrinsic
def vdiv(typingctx: Any, a: Any, b: Any) -> Any:
    """``a / b`` lane-wise."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.fdiv(args[0], args[1])

    return f32x8(f32x8, f32x8), codegen


@intrinsic
def vmax(typingctx: Any, a: Any, b: Any) -> Any:
    """``a`` where ``a > b`` or ``a`` is NaN, else ``b``, lane-wise: the scalar ``pool._max``
    (a NaN in either wins, as in ``np.maximum``; of two equal values, ``b``)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        a, b = args
        keep = builder.or_(builder.fcmp_ordered(">", a, b), builder.fcmp_unordered("uno", a, a))
        return builder.select(keep, a, b)

    return f32x8(f32x8, f32x8), codegen


@intrinsic
def vrelu(typingctx: Any, a: Any) -> Any:
    """``a`` where ``a > 0`` or ``a`` is NaN, else +0 (``fused.activate``'s Relu)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        zero = ir.Constant(_VECTOR, [0.0] * LANES)
        keep = builder.fcmp_unordered(">", args[0], zero)  # true for NaN too
        return builder.select(keep, args[0], zero)

    return f32x8(f32x8), codegen


@intrinsic
def vclamp(typingctx: Any, a: Any, lo: Any, hi: Any) -> Any:
    """``lo`` where ``a < lo``, then ``hi`` where that is ``> hi`` (``fused.activate``'s Clip:
    NaN passes through)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        a, lo, hi = args
        low = builder.select(builder.fcmp_ordered("<", a, lo), lo, a)
        return builder.select(builder.fcmp_ordered(">", low, hi), hi, low)

    return f32x8(f32x8, f32x8, f32x8), codegen


__all__ = ["LANES", "f32x8", "native", "vadd", "vbroadcast", "vclamp", "vdiv", "veven", "vfma",
           "vlane", "vload", "vmax", "vmul", "vodd", "vorder", "vpair", "vrelu", "vset", "vsplat",
           "vstore", "vtranspose"]
