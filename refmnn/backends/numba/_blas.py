"""BLAS calls of the numba backend: NumPy's sgemm, with threads managed by refmnn.

Numba's ``np.dot`` needs SciPy's BLAS bindings, so the GEMM schemes call ``np.matmul(a, b,
out=view)`` from Python instead (one sgemm, no allocation, the GIL released while it runs).

Threads: OpenBLAS's own worker threads spin after each call, and so do OpenMP's; with Numba's
``prange`` loops between GEMMs both pools fight for the cores (on a loaded two-core machine a
1x1 convolution took 100x longer). So while the backend runs, NumPy's OpenBLAS is set to one
thread (restored after the run) and :func:`gemm` splits a large product into ``threads``
column or row panels, one sgemm each: on the OpenMP (or TBB) threading layer inside one Numba
parallel loop whose workers call ``cblas_sgemm`` themselves (``region``, :mod:`.kernels.sgemm`,
a 1-2 us launch, so products from ``REGION_SPLIT_MIN_FLOPS`` or ``REGION_SPLIT_MIN_BYTES`` are
split), on the ``workqueue`` layer (or with ``gemm="pool"``) over a small Python thread pool.
Without a recognised OpenBLAS (another BLAS vendor) the thread count is left alone and the split
is skipped; without its ILP64 ``cblas_sgemm`` export the pool is used.
On the ``region`` path the panels are sized for OpenBLAS's small-matrix kernel where that is
possible (:func:`panel_plan`), which skips the packing of the operands -- on the OpenBLAS cores
that have one (``SMALL_MATRIX_CORES``); elsewhere each thread takes one panel
(:func:`thread_panels`).
A ``finish`` callback lets a caller apply its epilogue to each panel on the thread that has
just computed it (``gemm_1x1``'s bias + residual + activation), with no second launch.

Which sgemm the ``region`` panels call (:func:`sgemm`, once per process): NumPy's OpenBLAS, or
Intel's MKL where the ``mkl`` wheel is installed and the CPU is Intel's (``REFMNN_SGEMM`` =
``auto``, the default; ``mkl`` or ``openblas`` to force one). MKL runs on its sequential layer,
so it never starts threads of its own. On a two-core Xeon with AVX-512 (2026-11-22, 2 threads,
median of 30, region panels), OpenBLAS / MKL: [128, 384] @ [384, 1536] (BERT's FFN) 685 / 556
us, [128, 1536] @ [1536, 384] 634 / 476, [1000, 512] @ [512, 169] (SqueezeNet's classifier)
600 / 519, [64, 576] @ [576, 3025] 926 / 679; one thread, whole products: 108-126 against
161-193 GFLOP/s, where onnxruntime's MLAS reaches ~175 per thread. MKL's panels follow
:func:`mkl_panel_plan`: it needs no small-matrix tiling.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import math
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

# Below this a product runs as one call. Handing a panel to the pool's thread and waiting for
# it costs 20-50 us on the shared two-core VM (a futex wake-up), so a split pays only on products
# of a few hundred microseconds: at 2 threads, one sgemm against two panels (median us, MobileNet
# 1x1 layers with their epilogue, two measurements under different load):
#   [96, 16] @ [16, 12544] (38.5 MFLOP) 825 split / 1225 one (quieter); 669 / 579 (loaded)
#   [144, 24] @ [24, 3136] (21.7 MFLOP) 366 / 298;  [384, 64] @ [64, 196] (9.6 MFLOP) 148 / 116
SPLIT_MIN_FLOPS = 3e7
# The same inside one Numba parallel loop on the OpenMP layer, whose launch costs 1-2 us.
REGION_SPLIT_MIN_FLOPS = 2e6
# ... or from this many bytes of operands: a product with few flops per byte (a matrix-vector
# product) is bound by memory, and two cores stream it faster than one. ResNet-18's classifier
# [1, 512] @ [512, 1000] (1 MFLOP, 2 MB of weights, from memory every run), 2 threads, in the
# model, 30 interleaved runs: 259 -> 137 us.
REGION_SPLIT_MIN_BYTES = 1 << 19
F32 = np.dtype(np.float32)


def column_panels(m: int, n: int, k: int, parts: int) -> bool:
    """Whether ``out[m, n] = a[m, k] @ b[k, n]`` splits into ``parts`` column panels (True) or
    row panels (False).

    Each panel's sgemm packs its share of one operand and all of the other: column panels
    pack all of ``a`` and ``n / parts`` columns of ``b``, row panels ``m / parts`` rows of
    ``a`` and all of ``b``, so the smaller traffic is columns when ``n >= m``. But when ``k``
    is no larger than ``m`` the product is dominated by writing ``out`` (each element gets
    only ``k`` multiply-adds), and row panels -- each thread's output one contiguous block
    instead of a strided half of every row -- are faster as long as each keeps at least 64
    rows (four of OpenBLAS's 16-row register blocks; fewer leave its kernel half empty).
    Measured in the models, 2 threads, each product timed both ways in alternating runs
    (median us, columns / rows): [192, 32] @ [32, 784] (MobileNetV2) 106 / 76; [128, 32] @
    [32, 729] (SqueezeNet) 92 / 71; [128, 64] @ [64, 784] (ResNet-18) 108 / 92; [197, 192] @
    [192, 576] (ViT-Tiny) 283 / 261; while with ``k > m`` columns stay ahead, [128, 384] @
    [384, 1536] (BERT) 930 / 975, and with fewer rows per panel, [32, 144] @ [144, 784] 55 /
    61, [16, 32] @ [32, 12544] 133 / 160.
    """
    return n >= m and not (m // parts >= 64 and k <= m)


# OpenBLAS (x86-64 builds with SMALL_MATRIX_OPT, as in NumPy's wheels, on its AVX-512 kernels)
# computes a product of m * n * k <= 100**3 with its "small matrix" kernel, straight from the
# operands, without first packing them into its buffers. A panel one element past the limit
# takes the packing path: [96, 16] @ [16, 12544] in 18 column panels (1.07M each) 345 us, in 20
# (0.96M each) 291 us (2 threads, bias + clip, median of 5 x 30 calls).
SMALL_MNK = 100 ** 3
MAX_TILES = 16  # panels per thread, at most
# The OpenBLAS cores (``openblas_get_corename``) with those small-matrix kernels: SkylakeX's
# AVX-512 kernels, which Cooperlake and SapphireRapids reuse (and Zen 4, which OpenBLAS runs
# as SkylakeX). Haswell's and Zen's kernels have none: every panel is packed, so cutting a
# product into many small ones only adds packing and calls. Measured on a Zen 3 EPYC (AVX2,
# core "Haswell"), 2 threads, the models timed in alternating processes, small-matrix tiles
# against one panel per thread (median ms; two orders): vit_tiny 46.7 / 39.0 and 51.8 / 45.7,
# bert6 38.1 / 33.2 and 37.7 / 33.1, mobilenet_v2 12.3 / 11.3 and 13.4 / 12.4, squeezenet1_1
# 14.6 / 14.5, resnet18 39.3 / 39.0.
SMALL_MATRIX_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})


def _largest_panel(m: int, n: int, k: int, parts: int, by_cols: bool) -> int:
    """m * n * k of the largest of ``parts`` panels, as :func:`.kernels.sgemm.gemm_panels`
    cuts them (column panels in multiples of 16 columns)."""
    if by_cols:
        width = -(-n // parts)
        step = -(-width // 16) * 16
        return m * min(n, step) * k
    return -(-m // parts) * n * k


def thread_panels(m: int, n: int, k: int, batch: int, threads: int) -> tuple[int, bool]:
    """``(parts, by_cols)`` with one panel per thread: ``threads / gcd(batch, threads)`` per
    product (3 attention heads on 2 threads run as 6 half-products, not as 2 + 1 whole ones),
    cut as :func:`column_panels` says. The plan for an sgemm without a small-matrix kernel."""
    base = threads // math.gcd(batch, threads)
    return base, column_panels(m, n, k, base)


def panel_plan(m: int, n: int, k: int, batch: int, threads: int) -> tuple[int, bool]:
    """``(parts, by_cols)``: into how many panels :func:`.kernels.sgemm.gemm_panels` splits
    each of ``batch`` products ``out[m, n] = a[m, k] @ b[k, n]`` on ``threads`` threads, and
    whether they are column panels.

    For OpenBLAS on ``SMALL_MATRIX_CORES``. One panel per thread (:func:`thread_panels`) --
    unless its panels are too large for OpenBLAS's small-matrix kernel (``SMALL_MNK``): then the
    fewest multiple of that, up to ``MAX_TILES`` per thread, whose panels all fit it (the threads
    share them out; each panel's epilogue runs right after its sgemm, while it is in cache). Such
    narrow panels are row panels while they keep at least 16 rows, or 8 rows with at most 64
    columns each; otherwise column panels. Measured on an AVX-512 EPYC (core SkylakeX)
    in the models at 2 threads, the zoo's products timed both ways in alternating runs (sum of
    the GEMM calls' medians per run): MobileNetV2 4370 -> 3606 us, SqueezeNet 1.1 2827 ->
    2634, ResNet-18 14077 -> 12862 (its Winograd F(4,3) batch [36 x 256, 256] @ [256, 16] 989
    -> 618), MobileNetV1 6609 -> 6444, BERT 17139 -> 16673, ViT-Tiny 13298 -> 13178; products
    with large panels but more than ``MAX_TILES`` small ones per thread keep theirs.
    """
    plan = thread_panels(m, n, k, batch, threads)
    base = plan[0]
    if _largest_panel(m, n, k, *plan) <= SMALL_MNK:
        return plan
    for tiles in range(2, MAX_TILES + 1):
        parts = base * tiles
        rows = m / parts
        by_cols = not (rows >= 16 or (rows >= 8 and n / parts <= 64))
        if _largest_panel(m, n, k, parts, by_cols) <= SMALL_MNK:
            return parts, by_cols
    return plan


def mkl_panel_plan(m: int, n: int, k: int, batch: int, threads: int) -> tuple[int, bool]:
    """:func:`panel_plan` for MKL's sgemm: row panels (each thread's output one contiguous
    block) while each keeps at least 16 rows, else column panels; one per thread, or more where
    a thread's share of the output exceeds ``MKL_PANEL_BYTES`` (so that each panel's output
    stays in L2 while its epilogue runs). Measured on the Xeon above, 2 threads, median us of
    rows / columns at 2 panels, then rows at 4: [96, 16] @ [16, 12544] 225 / 219, 147 (4.8 MB
    of output); [144, 24] @ [24, 3136] 72 / 82, 69; [128, 384] @ [384, 1536] 533 / 581, 619;
    [1280, 320] @ [320, 49] 149 / 166; [197, 192] @ [192, 576] 130 / 118 (the one product
    where columns won, by 10 %)."""
    base = threads // math.gcd(batch, threads)
    if m // base < 16:
        return base, True
    per_output = max(1, -(-4 * m * n // (base * MKL_PANEL_BYTES)))
    tiles = min(MAX_TILES, per_output, max(1, m // (16 * base)))
    return base * tiles, False


MKL_PANEL_BYTES = 1 << 20


@dataclass(frozen=True)
class Sgemm:
    """The ILP64 ``cblas_sgemm`` that the region kernels call: ``name`` (``"mkl"`` or
    ``"openblas"``), the function's ``address``, and whether it multiplies products of at most
    ``SMALL_MNK`` without packing them (``small_matrix``: OpenBLAS on ``SMALL_MATRIX_CORES``)."""

    name: str
    address: int
    small_matrix: bool = False

    def panel_plan(self, m: int, n: int, k: int, batch: int, threads: int) -> tuple[int, bool]:
        """How :func:`.kernels.sgemm.gemm_panels` cuts a product for this library: MKL's rows
        (:func:`mkl_panel_plan`), OpenBLAS's small-matrix tiles (:func:`panel_plan`) or one
        panel per thread (:func:`thread_panels`)."""
        plan = mkl_panel_plan if self.name == "mkl" else \
            panel_plan if self.small_matrix else thread_panels
        return plan(m, n, k, batch, threads)

    def describe(self) -> str:
        """The library, OpenBLAS's kernels for this CPU, and the panel plan, in words."""
        core = f", {openblas().core} kernels" if self.name == "openblas" and openblas().core \
            else ""
        plan = "row panels" if self.name == "mkl" else \
            "small-matrix panels" if self.small_matrix else "one panel per thread"
        return f"{self.name}{core} ({plan})"


MKL_THREADING_SEQUENTIAL = 1


def _cpu_vendor() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


@functools.cache
def wide_fma_cpu() -> bool:
    """True on an Intel CPU with AVX-512 (as LLVM sees the host): there a BLAS runs 16-lane FMAs
    at full rate, twice the lanes of refmnn's own 8-lane register tiles. AMD's Zen 4 runs a
    512-bit FMA as two 256-bit halves, so its AVX-512 is no wider than AVX2 for them."""
    import llvmlite.binding as llvm

    return bool(llvm.get_host_cpu_features().get("avx512f")) and _cpu_vendor() == "GenuineIntel"


def _mkl_sgemm() -> int | None:
    """The address of MKL's ``cblas_sgemm_64`` with MKL set to its sequential layer, or None
    where no ``libmkl_rt`` loads, or one already runs on another layer (it would start its own
    threads inside refmnn's)."""
    candidates = sorted(glob.glob(os.path.join(sys.prefix, "lib", "libmkl_rt.so*")))
    found = ctypes.util.find_library("mkl_rt")
    for path in candidates + ([found] if found else []):
        try:
            lib = ctypes.CDLL(path)
            fn = lib.cblas_sgemm_64
            lib.MKL_Set_Threading_Layer.restype = ctypes.c_int
            lib.MKL_Set_Threading_Layer.argtypes = [ctypes.c_int]
        except (OSError, AttributeError):
            continue
        if lib.MKL_Set_Threading_Layer(MKL_THREADING_SEQUENTIAL) != MKL_THREADING_SEQUENTIAL:
            return None
        return ctypes.cast(fn, ctypes.c_void_p).value
    return None


_SGEMM: list[Sgemm | None] = []  # the process's choice, made once (LLVM links one address)


def sgemm() -> Sgemm | None:
    """The process's sgemm for the region kernels (see the module docstring), chosen on the
    first call; None without an ILP64 ``cblas_sgemm`` from either library."""
    if not _SGEMM:
        choice = os.environ.get("REFMNN_SGEMM", "auto").strip().lower()
        if choice not in ("auto", "mkl", "openblas"):
            from refmnn.errors import RefmnnError

            raise RefmnnError(f"REFMNN_SGEMM={choice!r}: expected auto, mkl or openblas")
        address = None
        if choice == "mkl" or (choice == "auto" and _cpu_vendor() == "GenuineIntel"):
            address = _mkl_sgemm()
            if address is None and choice == "mkl":
                from refmnn.errors import RefmnnError

                raise RefmnnError("REFMNN_SGEMM=mkl but no libmkl_rt with cblas_sgemm_64 loads "
                                  "on its sequential layer (pip install mkl)")
        if address is not None:
            _SGEMM.append(Sgemm("mkl", address))
        else:
            lib = openblas()
            _SGEMM.append(Sgemm("openblas", lib.sgemm64, lib.core.lower() in SMALL_MATRIX_CORES)
                          if lib.sgemm64 else None)
    return _SGEMM[0]


_NO_EPILOGUE = (np.zeros(1, np.float32), np.zeros(1, np.float32), False, False, False, 0,
                np.float32(0), np.float32(0), np.float32(0))


class _OpenBlas:
    def __init__(self) -> None:
        self.set = self.get = None
        self.sgemm64: int | None = None  # address of the ILP64 cblas_sgemm, if exported
        self.core = ""  # the kernels it runs on this CPU (openblas_get_corename), if it says
        here = os.path.dirname(np.__file__)
        for path in glob.glob(os.path.join(here, "..", "numpy.libs", "*openblas*")) + \
                glob.glob(os.path.join(here, ".dylibs", "*openblas*")):
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for suffix in ("64_", ""):
                for prefix in ("scipy_openblas_", "openblas_"):
                    setter = getattr(lib, f"{prefix}set_num_threads{suffix}", None)
                    getter = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
                    if setter is not None and getter is not None:
                        setter.argtypes, getter.restype = [ctypes.c_int], ctypes.c_int
                        self.set, self.get = setter, getter
                        corename = getattr(lib, f"{prefix}get_corename{suffix}", None)
                        if corename is not None:
                            corename.restype = ctypes.c_char_p
                            self.core = (corename() or b"").decode(errors="replace").strip()
                        for name in ("scipy_cblas_sgemm64_", "cblas_sgemm64_"):
                            fn = getattr(lib, name, None)
                            if fn is not None:
                                self.sgemm64 = ctypes.cast(fn, ctypes.c_void_p).value
                                break
                        return


_OPENBLAS: _OpenBlas | None = None


def openblas() -> _OpenBlas:
    global _OPENBLAS
    if _OPENBLAS is None:
        _OPENBLAS = _OpenBlas()
    return _OPENBLAS


def _panel(a: np.ndarray, b: np.ndarray, out: np.ndarray, box, finish) -> None:  # type: ignore[no-untyped-def]
    np.matmul(a, b, out=out)
    if finish is not None:
        finish(out, *box)


def _batch_view(x: np.ndarray, batch: tuple[int, ...]) -> np.ndarray | None:
    """``x`` [*batch, r, c] as a [prod(batch), r, c] view, or None when its leading axes differ
    from ``batch`` (broadcast) or cannot be merged without a copy."""
    if x.shape[:-2] != tuple(batch):
        return None
    view = x.view()
    try:
        view.shape = (-1, *x.shape[-2:])  # raises instead of copying
    except AttributeError:
        return None
    return view


def region_plan(a: np.ndarray, b: np.ndarray, out: np.ndarray, threads: int,
                kernel: Sgemm | None = None) -> tuple | None:
    """``(ta, tb, lda, ldb, m, n, k, batch, sa, sb, parts, by_cols)``, the geometry operands of
    :func:`.kernels.sgemm.gemm_panels` for ``out = a @ b`` (2-D or 3-D, ``a`` and ``b`` may have
    fewer axes and broadcast); None when it does not fit: not float32, ``out`` not
    C-contiguous, strides BLAS cannot take, an empty product, or one too small to split
    (under ``REGION_SPLIT_MIN_FLOPS`` and ``REGION_SPLIT_MIN_BYTES``: one sgemm on the calling
    thread is the plain path). The panels follow ``kernel``'s plan (OpenBLAS's by default)."""
    if out.ndim not in (2, 3) or out.dtype != F32 or not out.flags.c_contiguous or \
            a.dtype != F32 or b.dtype != F32 or a.ndim > out.ndim or b.ndim > out.ndim:
        return None
    m, n = out.shape[-2], out.shape[-1]
    k = a.shape[-1]
    batch = out.shape[0] if out.ndim == 3 else 1
    if min(m, n, k, batch) == 0 or (2.0 * m * n * k * batch < REGION_SPLIT_MIN_FLOPS and
                                    4.0 * (m + n) * k * batch < REGION_SPLIT_MIN_BYTES):
        return None
    ops = []
    for x in (a, b):
        sb = 0
        if x.ndim == 3:
            if x.shape[0] != batch:
                return None
            sb = x.strides[0] // 4 if batch > 1 else 0
        s0, s1 = x.strides[-2], x.strides[-1]
        rows, cols = x.shape[-2], x.shape[-1]
        if (s1 == 4 or cols == 1) and s0 % 4 == 0 and s0 >= 4 * cols:
            ops.append((111, s0 // 4, sb))
        elif (s0 == 4 or rows == 1) and s1 % 4 == 0 and s1 >= 4 * rows:
            ops.append((112, s1 // 4, sb))
        else:
            return None
    (ta, lda, sa), (tb, ldb, sbb) = ops
    plan = (kernel.panel_plan if kernel is not None else panel_plan)(m, n, k, batch, threads)
    return (ta, tb, lda, ldb, m, n, k, batch, sa, sbb, *plan)


# distinct operand geometries whose region plans a Gemm keeps
_MAX_PLANS = 512


class Binding:
    """A kernel's :meth:`Gemm.bind` call for the arrays of its last run, made again when the
    executor hands it other arrays. The executor passes the same tensors every run (views of
    its arenas, made once per plan), so a bound kernel skips the per-call Python work -- the
    checks, the plan lookup, the views and addresses: 8-13 us of a 1x1 convolution's 15-20 us
    of Python in MobileNetV2 -- and makes the launch directly. The arrays are held, so their
    ids cannot be reused by other objects while they are the key.
    """

    __slots__ = ("call", "ids", "arrays")

    def __init__(self) -> None:
        self.call: Callable[[], bool] | None = None
        self.ids: tuple[int, ...] = ()
        self.arrays: tuple = ()

    @staticmethod
    def bindable(arrays: tuple) -> bool:
        """Whether every array is C-contiguous (None stands for an absent input): the views a
        kernel makes of them (reshapes) then share their memory, never a copy that a bound call
        would go on reading after the run has changed the original."""
        return all(x is None or (isinstance(x, np.ndarray) and x.flags.c_contiguous)
                   for x in arrays)

    def run(self, arrays: tuple, bind: Callable[[], Callable[[], bool] | None]) -> bool:
        """Run the call bound to ``arrays`` (``bind()`` makes it when they are new); False when
        there is none (the product does not take the region path) or it did nothing."""
        ids = tuple(map(id, arrays))
        if ids != self.ids:
            self.call, self.ids, self.arrays = bind(), ids, arrays
        return self.call is not None and self.call()


class Gemm:
    """``out = a @ b`` for 2-D (or batched) float32 views on ``threads`` threads: split into
    panels with a one-thread BLAS (``split``) -- inside one Numba parallel loop (``region``, the
    OpenMP layer: :mod:`.kernels.sgemm`) or over refmnn's thread pool -- or left to the BLAS's
    own pool (``split=False``)."""

    def __init__(self, threads: int, split: bool = True, region: bool = False) -> None:
        self.threads = max(1, threads)
        self.split = split
        lib = openblas()
        self.region = None
        self.kernel = sgemm() if split and region and self.threads > 1 else None
        if self.kernel is not None and lib.set is not None:
            from refmnn.backends.numba.kernels import sgemm as region

            region.register(self.kernel.address)
            self.region = region
        self.pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="refmnn-gemm") \
            if split and self.region is None and self.threads > 1 and lib.set is not None \
            else None
        self._saved: int | None = None
        self._plans: dict[tuple, tuple] = {}

    def begin(self) -> None:
        """Set the BLAS's thread count for the run (1 when splitting), remembering the old one."""
        lib = openblas()
        if lib.set is not None:
            self._saved = lib.get()
            lib.set(1 if self.split else self.threads)

    def end(self) -> None:
        lib = openblas()
        if self._saved is not None and lib.set is not None:
            lib.set(self._saved)
            self._saved = None

    def __call__(self, a: np.ndarray, b: np.ndarray, out: np.ndarray, finish=None,
                 epilogue=None) -> None:
        """``out = a @ b``; then ``finish(panel, i0, i1, j0, j1)`` on each panel
        ``out[..., i0:i1, j0:j1]``, called by the thread that computed it, right after its
        sgemm (a fused epilogue while the panel is in cache; one call on the whole output when
        the product is not split). ``epilogue``, ``(bias, z, has_b, has_z, b_cols, act, alpha,
        lo, hi)`` of :func:`.kernels.fused.epilogue_rows`, is the same epilogue in the form the
        ``region`` path runs inside its parallel loop (required there when ``finish`` is given:
        without it such products take the other paths)."""
        if self.region is not None and self._saved is not None and \
                (finish is None or epilogue is not None) and self._in_region(a, b, out, epilogue):
            return
        if out.ndim < 2 or a.ndim < 2 or b.ndim < 2 or out.size == 0:
            np.matmul(a, b, out=out)
            if finish is not None and out.ndim >= 2:
                finish(out, 0, out.shape[-2], 0, out.shape[-1])
            return
        m, n = out.shape[-2], out.shape[-1]
        k = a.shape[-1]
        parts = self.threads
        flops = 2.0 * m * n * k * (out.size // (m * n))
        if self.pool is None or self._saved is None or flops < SPLIT_MIN_FLOPS:
            np.matmul(a, b, out=out)
            if finish is not None:
                finish(out, 0, m, 0, n)
            return
        if column_panels(m, n, k, parts):  # b[..., :, j0:j1] -> out[..., :, j0:j1]
            step = -(-n // parts)
            step = -(-step // 16) * 16
            cuts = [(j, min(n, j + step)) for j in range(0, n, step)]
            jobs = [(a, b[..., :, j0:j1], out[..., :, j0:j1], (0, m, j0, j1)) for j0, j1 in cuts]
        else:  # row panels
            step = -(-m // parts)
            cuts = [(i, min(m, i + step)) for i in range(0, m, step)]
            jobs = [(a[..., i0:i1, :], b, out[..., i0:i1, :], (i0, i1, 0, n)) for i0, i1 in cuts]
        futures = [self.pool.submit(_panel, *job, finish) for job in jobs[1:]]
        _panel(*jobs[0], finish)
        for f in futures:
            f.result()

    def _in_region(self, a, b, out, epilogue) -> bool:  # type: ignore[no-untyped-def]
        """Run the product as :func:`.kernels.sgemm.gemm_panels`; False (nothing done) when the
        operands do not fit it (see :func:`region_plan`)."""
        args = self._region_args(a, b, out, epilogue)
        if args is None:
            return False
        with self.region.PARALLEL_LOCK:
            self.region.gemm_panels(*args)
        return True

    def _region_args(self, a, b, out, epilogue) -> tuple | None:  # type: ignore[no-untyped-def]
        """:func:`.kernels.sgemm.gemm_panels`'s arguments for ``out = a @ b`` and ``epilogue``,
        or None when the operands do not fit it. The plan of each operand geometry is made once
        and kept (a model has a few dozen; a kernel calls with the same ones every run)."""
        if out.ndim > 3:  # batch axes collapsed into one where every operand allows a view
            a, b, out = (_batch_view(x, out.shape[:-2]) if x.ndim == out.ndim else x
                         for x in (a, b, out))
            if a is None or b is None or out is None:
                return None
        key = (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype, out.shape,
               out.strides, out.dtype)
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= _MAX_PLANS:  # shapes that change every run: start over
                self._plans.clear()
            # () when the product does not fit: remembered too
            plan = self._plans[key] = region_plan(a, b, out, self.threads, self.kernel) or ()
        if not plan:
            return None
        bias, z, has_b, has_z, b_cols, act, alpha, lo, hi = \
            _NO_EPILOGUE if epilogue is None else epilogue
        return (a.ctypes.data, b.ctypes.data, out.reshape(-1), *plan, bias, z.reshape(-1),
                has_b, has_z, b_cols, act, alpha, lo, hi)

    def bind(self, a: np.ndarray, b: np.ndarray, out: np.ndarray,
             epilogue: tuple | None = None) -> Callable[[], bool] | None:
        """``out = a @ b`` with ``epilogue`` (as in ``__call__``) on the region path, as a call
        whose operands -- addresses included -- are all computed now; it returns False, doing
        nothing, outside a run (between :meth:`end` and :meth:`begin`). None when the product
        does not take the region path. The arrays must stay alive and unchanged while the call
        is in use: :class:`Binding` keeps them."""
        if self.region is None:
            return None
        args = self._region_args(a, b, out, epilogue)
        if args is None:
            return None
        gemm_panels, lock = self.region.gemm_panels, self.region.PARALLEL_LOCK

        def call() -> bool:
            if self._saved is None:
                return False
            with lock:
                gemm_panels(*args)
            return True

        return call

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False)
