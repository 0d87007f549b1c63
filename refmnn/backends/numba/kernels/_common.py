"""Helpers shared by the kernel modules: dtype sets, attribute helpers, broadcast layouts.

Broadcast layout (used by the elementwise kernels): the output shape and every input's element
strides (0 along broadcast axes) are *collapsed* -- size-1 axes dropped, neighbouring axes merged
when every operand walks them as one -- and then padded in front to a fixed number of axes
(four here: a ``[N, C, H, W] + [C, 1, 1]`` bias add becomes ``sizes (1, N, C, H*W)`` with strides
``(0, C*H*W, H*W, 1)`` and ``(0, 0, 1, 0)``): a fixed-depth loop whose innermost axis is contiguous
for the first operand and constant for the second -- the case the kernels specialise.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numba import njit

from refmnn.backends.base import NodeSpec
from refmnn.backends.numba._blas import Binding
from refmnn.dtypes import DType
from refmnn.ops._erf import ERF32_P, ERF32_Q
from refmnn.ops.raster import contiguous_strides

RANK = 4
F32 = frozenset({DType.float32})

# njit options of every kernel: compiled once per signature, cached on disk; fastmath is off so
# results follow IEEE float32 like the reference, and NumPy's error model makes x / 0 give inf or
# NaN instead of raising ZeroDivisionError (Python's rule, Numba's default).
JIT = {"cache": True, "nogil": True, "error_model": "numpy"}
PJIT = {**JIT, "parallel": True}

# Inlining, and what it costs to compile. ``@njit(inline="always")`` makes Numba copy a helper's
# IR into its caller at every call site before typing (nested helpers multiply), and Numba's
# passes -- the parallel loops' above all -- then work on the whole: the tile functions of the
# SIMD products were inlined six times into gemm_1x1_simd and twice into matmul_packed and
# packed_batched_product, 62, 35 and 11 s of the 195 s a fresh cache took to compile what the
# zoo runs. Helpers called per vector, per tile or per row (where a call would cost a
# noticeable share of their work) are ``inline="always"``; work called once per channel, strip
# or block of rows is a plain njit function that the parallel loop calls, its own helpers
# inlined into it once (matmul_packed's ``_strip``, packed_batched_product's ``_block_row``,
# Winograd's ``zero_padding`` and ``store_tile_rows``): 195 -> 165 s for the zoo (resnet18 56 ->
# 45 s, vit_tiny 46 -> 28), run times the same within the noise. gemm_1x1_simd keeps its tiles
# inlined at both call sites (63 s): one plain call per stretch of strips and blocks ran a
# small convolution 8-20 % slower (96 -> 24 channels at 56 x 56: 92 -> 99-113 us; why, not
# found). A literal argument (``0``, ``True``) is a type of its own: a call site that passes
# one compiles the callee again (epilogue_rows has six variants).


def renamed(fn: Callable[..., Any], suffix: str, **overrides: Any) -> Callable[..., Any]:
    """A copy of the Python function ``fn`` named ``fn.__qualname__ + suffix``, to jit a second
    build of the same loops (a serial copy of a parallel kernel); ``overrides`` rebind globals
    the copy reads (Numba freezes globals at compile time, so a copy that calls another helper
    compiles only that one: a BLAS-free build never links the sgemm symbol).

    Why a copy: Numba's disk cache files a function's machine code under its module and
    qualified name and keys the entries by signature and bytecode only, not by the jit options.
    Two dispatchers over one function overwrite each other's entries, and a later process loads
    whichever build was written last for both: the serial loops ran in the parallel depthwise
    kernel's place (mobilenet_v2 at 2 threads 9.4-10.0 ms from such a cache against 7.1-7.5 ms
    with a cache of separate entries, fresh processes, same sources). Its own name gives each
    build its own cache files."""
    scope = {**fn.__globals__, **overrides} if overrides else fn.__globals__
    copy = types.FunctionType(fn.__code__, scope, fn.__name__ + suffix, fn.__defaults__,
                              fn.__closure__)
    copy.__qualname__ = fn.__qualname__ + suffix
    copy.__module__ = fn.__module__
    copy.__doc__ = fn.__doc__
    return copy


def bits(a: np.ndarray) -> np.ndarray:
    """A flat view of ``a`` as unsigned integers of its item size, for kernels that only move
    elements (Raster, Split, Gather): one compiled copy loop serves float16, bfloat16, bool and
    every other fixed-size type, including those Numba cannot type."""
    return a.reshape(-1).view(_UINT[a.dtype.itemsize])


_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

PARALLEL_LOCK = threading.Lock()
"""Held around every call of a ``parallel=True`` kernel: Numba's workqueue threading layer
aborts the process if two threads enter parallel loops at once; the OpenMP layer is thread-safe,
but two sessions' loops at once would only oversubscribe the cores, so they take turns there too."""


Call = tuple[Callable[..., Any], tuple[Any, ...]]
"""One call a kernel's run makes: a compiled function (or any callable) and its arguments."""


class Bound:
    """A kernel's calls for the arrays of one run, made again only when the executor hands it
    other arrays.

    The executor passes the same tensors every run (views of its arenas, made once per plan),
    so the views, argument tuples and checks that a kernel's ``run`` makes in Python are made
    once; a run is then its calls alone, under :data:`PARALLEL_LOCK`. In MobileNetV2 that work
    was about 6 % of the numba backend's run (bound against made per run, alternating in one
    process: 9.53 against 10.17 ms, 2 threads). This is :class:`.._blas.Binding`'s idea for
    the BLAS products, applied to the compiled loops. Arrays that are not C-contiguous are never
    bound (a reshaped view of one may be a copy, which a later run would read stale), and the
    arrays are held, so that their ids cannot be reused while they are the key.

    A kernel's calls may depend only on the arrays' identity, never on their values (which
    change from run to run): on shapes, on views, on what ``prepare`` worked out.
    """

    __slots__ = ("ids", "arrays", "calls")

    def __init__(self) -> None:
        self.ids: tuple[int, ...] = ()
        self.arrays: tuple[Any, ...] = ()
        self.calls: tuple[Call, ...] = ()

    def __call__(self, arrays: tuple[Any, ...], make: Callable[[], tuple[Call, ...]]) -> None:
        """Run the calls bound to ``arrays`` (``make()`` builds them when the arrays are new)."""
        ids = tuple(map(id, arrays))
        if ids == self.ids:
            calls = self.calls
        else:
            calls = make()
            bound = Binding.bindable(arrays)
            self.ids, self.arrays, self.calls = (ids, arrays, calls) if bound else ((), (), ())
        run_calls(calls)

    def bind(self, arrays: tuple[Any, ...], make: Callable[[], tuple[Call, ...]],
             after: Callable[[], None] | None = None) -> Callable[[], None] | None:
        """For :meth:`refmnn.backends.base.Kernel.bind`: a callable that runs the calls made
        for ``arrays`` (then ``after``, a pass the kernel runs after its calls), or None where
        they cannot be bound (see above)."""
        if not Binding.bindable(arrays):
            return None
        calls = make()
        self.ids, self.arrays, self.calls = tuple(map(id, arrays)), arrays, calls

        def run() -> None:
            run_calls(calls)
            if after is not None:
                after()
        return run


def run_calls(calls: tuple[Call, ...]) -> None:
    """Make a kernel's calls in order, under :data:`PARALLEL_LOCK`."""
    with PARALLEL_LOCK:
        for function, args in calls:
            function(*args)


class BoundRun:
    """A kernel whose run is its :class:`Bound` calls, then an optional pass: it says which in
    :meth:`binding`, and ``run`` and ``bind`` (:meth:`refmnn.backends.base.Kernel.bind`) both
    follow from that. By default the calls are ``self.calls(inputs, outputs[0], workspace)``,
    keyed by the inputs, the output and the workspace, and the pass is :meth:`after_calls`'s."""

    bound: Bound

    def binding(self, inputs: Sequence[Any], outputs: Sequence[Any], workspace: Any | None
                ) -> tuple[tuple[Any, ...], Callable[[], tuple[Call, ...]],
                           Callable[[], None] | None]:
        """``(arrays, make, after)``: the arrays the calls are made for (their key), how to make
        the calls, and a pass to run after them on every run (None: none)."""
        out = outputs[0]
        return ((*inputs, out, handle(workspace)),
                lambda: self.calls(inputs, out, workspace),  # type: ignore[attr-defined]
                self.after_calls(inputs, out))

    def after_calls(self, inputs: Sequence[Any], out: Any) -> Callable[[], None] | None:
        """The default :meth:`binding`'s pass after the calls (an epilogue); None: none."""
        return None

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], workspace: Any | None) -> None:
        arrays, make, after = self.binding(inputs, outputs, workspace)
        self.bound(arrays, make)
        if after is not None:
            after()

    def bind(self, inputs: Sequence[Any], outputs: Sequence[Any],
             workspace: Any | None) -> Callable[[], None] | None:
        return self.bound.bind(*self.binding(inputs, outputs, workspace))


def into_contiguous(out: np.ndarray, call: Callable[[np.ndarray], Call]) -> tuple[Call, ...]:
    """The calls of a kernel that writes a C-contiguous output through its flat view: ``call(out)``
    when ``out`` is C-contiguous, else ``call`` on a temporary of its shape, then a copy of the
    temporary into ``out``."""
    if out.flags.c_contiguous:
        return (call(out),)
    target = np.empty(out.shape, out.dtype)
    return (call(target), (np.copyto, (out, target)))


def handle(workspace: Any) -> np.ndarray | None:
    """A workspace buffer's array (None without a workspace), for :class:`Bound`'s key."""
    return None if workspace is None else workspace.handle


def broadcast_layout(out_shape: Sequence[int], in_shapes: Sequence[Sequence[int]],
                     rank: int = RANK) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """Collapsed ``(sizes[rank], [strides[rank] per input])`` or None when more than ``rank``
    axes remain after collapsing (the kernels then do not apply)."""
    out_shape = [int(d) for d in out_shape]
    r = len(out_shape)
    strides = []
    for shape in in_shapes:
        shape = [1] * (r - len(shape)) + [int(d) for d in shape]
        s = contiguous_strides(shape)
        strides.append([0 if shape[i] == 1 and out_shape[i] != 1 else s[i] for i in range(r)])
    sizes: list[int] = []
    merged: list[list[int]] = [[] for _ in in_shapes]
    for axis in range(r):
        if out_shape[axis] == 1:
            continue
        pairs = zip(merged, strides, strict=True)
        if sizes and all(m[-1] == st[axis] * out_shape[axis] for m, st in pairs):
            sizes[-1] *= out_shape[axis]
            for m, st in zip(merged, strides, strict=True):
                m[-1] = st[axis]
            continue
        sizes.append(out_shape[axis])
        for m, st in zip(merged, strides, strict=True):
            m.append(st[axis])
    if len(sizes) > rank:
        return None
    pad = rank - len(sizes)
    return (np.array([1] * pad + sizes, dtype=np.int64),
            [np.array([0] * pad + m, dtype=np.int64) for m in merged])


def shapes_static(spec: NodeSpec) -> bool:
    return all(t is None or (t.is_static and t.shape is not None)
               for t in (*spec.inputs, *spec.outputs))


def numel(spec_type) -> int:  # type: ignore[no-untyped-def]
    return int(np.prod(spec_type.shape, dtype=np.int64)) if spec_type.shape else 1


def item_offsets(shape: Sequence[int], strides: Sequence[int], batch: Sequence[int]
                 ) -> np.ndarray:
    """For an operand of ``shape`` ([..., rows, cols]) with element ``strides`` whose leading
    axes broadcast to ``batch`` (MatMul's rule): the element offset of the [rows, cols] matrix
    that each batch item reads, int64 [prod(batch)] in C order."""
    offsets = np.zeros(int(np.prod(batch, dtype=np.int64)), np.int64)
    index = np.unravel_index(np.arange(offsets.size), tuple(batch)) if len(batch) else ()
    lead = len(batch) - (len(shape) - 2)
    for axis in range(len(batch)):
        own = axis - lead
        if own >= 0 and shape[own] != 1:
            offsets += index[axis] * strides[own]
    return offsets


def batch_items(shape: Sequence[int], batch: Sequence[int]) -> np.ndarray:
    """:func:`item_offsets` counted in whole matrices: the index of the [rows, cols] matrix of
    a C-contiguous operand of ``shape`` that each batch item reads."""
    lead = tuple(int(d) for d in shape[:-2])
    return item_offsets(tuple(shape), (*contiguous_strides(lead), 0, 0), batch)


def flat(a: np.ndarray) -> np.ndarray:
    """A 1-D view of a C-contiguous array (a copy only if it is not contiguous)."""
    return a.reshape(-1)


def single_output(spec: NodeSpec) -> bool:
    """True when only the first output of the node is used."""
    return all(not name for name in spec.node.outputs[1:])


# Row reductions that vectorise (Softmax's and LayerNorm's row sums): a strict float sum is one
# dependent add per element (4 cycles of latency each); ``reassoc`` lets LLVM keep SIMD partial
# sums instead. The result differs from a left-to-right sum only in rounding, and accumulates in
# float64. The loops must be written inside the kernel over a row slice from 0 (``row =
# x[base:base + n]``): a helper called once per row, indexing ``x[base + j]``, did not vectorise
# (Numba's negative-index fix-ups) and cost ~60 ns per call; 1536 rows of 128 float32 summed and
# scaled at 2 threads: 101 -> 15 us.
SUM_MATH = {"reassoc", "nsz", "contract"}


# erf for float32 results: the reference's own rational fit (refmnn/ops/_erf.py,
# erf(x) = x P(x^2) / Q(x^2) on x clipped to [-4, 4], float64 arithmetic, <= 0.52 ulp once
# rounded to float32). Branch-free, so the loops that call it vectorise, unlike libm's erf.
P0, P1, P2, P3, P4, P5, P6 = ERF32_P
Q0, Q1, Q2, Q3, Q4, Q5, _ = ERF32_Q  # monic: the last coefficient is 1


@njit(inline="always", **JIT)
def erf32(x):  # type: ignore[no-untyped-def]
    v = float(x)
    if v != v:
        return v
    v = min(max(v, -4.0), 4.0)
    z = v * v
    p = ((((((P6 * z + P5) * z + P4) * z + P3) * z + P2) * z + P1) * z + P0)
    q = ((((((z + Q5) * z + Q4) * z + Q3) * z + Q2) * z + Q1) * z + Q0)
    return v * p / q


# GELU of the fused epilogues in float32 arithmetic: 0.5 x (1 + erf(x / sqrt 2)) with the same
# rational erf evaluated in float32 (coefficients rounded to float32). Eight float32 lanes per
# AVX2 vector instead of four float64 ones and no float64 division: the epilogue of ViT-Tiny's
# fc1 ([197, 768]) cost 165-175 us over the plain product with ``erf32``, 65-80 us with this
# (2 threads, same process). The price is the negative tail, where 1 + erf cancels: measured on
# every 5th float32 in [-12, 12] against the Gelu reference -- at most 4 ulp for x >= -1, 49
# ulp on [-2, -1), and an absolute error of at most 1.4e-6 everywhere (so below x = -3, where
# |GELU(x)| < 4e-3, the relative error grows; onnxruntime's and PyTorch's float32 GELU have
# the same 1 + erf cancellation). Every one of those values is within the float32 conformance
# tolerance (rtol 1.3e-6, atol 1e-5). NaN stays NaN, +inf gives +inf, -inf NaN (as the
# reference: -inf * 0).
_P32 = tuple(np.float32(c) for c in ERF32_P)
_Q32 = tuple(np.float32(c) for c in ERF32_Q)
F0, F1, F2, F3, F4, F5, F6 = _P32
G0, G1, G2, G3, G4, G5, _ = _Q32
_SQRT1_2_F32 = np.float32(0.7071067811865476)
_FOUR, _HALF, _ONE = np.float32(4.0), np.float32(0.5), np.float32(1.0)


@njit(inline="always", **JIT)
def gelu32(x):  # type: ignore[no-untyped-def]
    v = x * _SQRT1_2_F32
    v = _FOUR if v > _FOUR else v  # NaN fails both tests and flows through
    v = -_FOUR if v < -_FOUR else v
    z = v * v
    p = ((((((F6 * z + F5) * z + F4) * z + F3) * z + F2) * z + F1) * z + F0)
    q = ((((((z + G5) * z + G4) * z + G3) * z + G2) * z + G1) * z + G0)
    return _HALF * x * (_ONE + v * p / q)


def window_params(spec: NodeSpec, kernel: Sequence[int]) -> tuple[int, ...]:
    """A 2-D window op's geometry: (kh, kw, sh, sw, dh, dw, pad_top, pad_left, pad_bottom,
    pad_right), with SAME_UPPER/SAME_LOWER pads derived from the planned output size."""
    a = spec.attrs
    kh, kw = (int(k) for k in kernel)
    sh, sw = (int(s) for s in (a.get("strides") or (1, 1)))
    dh, dw = (int(d) for d in (a.get("dilations") or (1, 1)))
    h, w = (int(d) for d in spec.inputs[0].shape[2:])
    oh, ow = (int(d) for d in spec.outputs[0].shape[2:])
    auto = a.get("auto_pad", "NOTSET") or "NOTSET"
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for size, out, k, s, d in ((h, oh, kh, sh, dh), (w, ow, kw, sw, dw)):
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small, big = total // 2, total - total // 2
            pads.append((small, big) if auto == "SAME_UPPER" else (big, small))
        return kh, kw, sh, sw, dh, dw, pads[0][0], pads[1][0], pads[0][1], pads[1][1]
    p = [int(v) for v in (a.get("pads") or (0, 0, 0, 0))] if auto == "NOTSET" else [0, 0, 0, 0]
    return kh, kw, sh, sw, dh, dw, p[0], p[1], p[2], p[3]
