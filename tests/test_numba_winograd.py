"""The numba backend's Winograd schemes beyond the per-scheme checks of test_numba_backend.py
(every scheme against the reference, numba_checks.check_node): how the costs choose among them,
and the *_simd variants' spaced slabs of V and M (kernels/conv_winograd.py)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

pytest.importorskip("numba", reason="the numba backend needs numba: pip install 'refmnn[numba]'")

import refmnn  # noqa: E402
from refmnn.backends.numba import NumbaBackend  # noqa: E402
from tests.helpers import assert_same_specials, special_input  # noqa: E402
from tests.numba_checks import SIMD_WINOGRAD, check_node, conv_model, rand, rel_l2  # noqa: E402


def test_winograd_costs_count_the_sgemms_packing():
    """Among the sgemm schemes (what runs on a CPU without AVX2 and FMA), ResNet-18's 3x3 layers
    go to winograd_f23 at 256 @ 14x14 -- F(4,3)'s 36 sgemms of 16 columns each pack a 256 x 256
    U_i, and that costs more than the multiplies they save (GEMM_PACK, conv_base.py) -- and at
    512 @ 7x7, and keep winograd_f43 at 64 @ 56x56. The register-tile variants, which pack U
    once, are cheaper still: winograd_f43_simd at 256 @ 14x14 and 64 @ 56x56, winograd_f23_simd
    at 512 @ 7x7 (measured: conv_winograd's docstring)."""
    from refmnn.backends.numba.kernels import conv, conv_winograd

    def costs(c, hw):  # type: ignore[no-untyped-def]
        model = conv_model((1, c, hw, hw), (c, c, 3, 3), pads=[1, 1, 1, 1])
        spec = refmnn.Session(model, backends=("numba",), check=False).resize().specs["n0"]
        return (conv._im2col_cost(spec), conv_winograd.winograd23_cost(spec),
                conv_winograd.winograd43_cost(spec), conv_winograd.winograd23_simd_cost(spec),
                conv_winograd.winograd43_simd_cost(spec))

    im2col, f23, f43, f23s, f43s = costs(256, 14)
    assert f23 < min(im2col, f43) and f43s < min(f23, f23s)
    im2col, f23, f43, f23s, f43s = costs(512, 7)
    assert f23 < min(im2col, f43) and f23s < min(f23, f43s)
    im2col, f23, f43, f23s, f43s = costs(64, 56)
    assert f43 < min(im2col, f23) and f43s < min(f43, f23s)


@pytest.mark.parametrize("elems", [8, 16, 896, 1024, 3200, 12800, 12816, 100000])
def test_winograd_slabs_are_an_odd_number_of_cache_lines_apart(elems):
    """The *_simd Winograd variants space V's and M's a*a slabs by ``slab(rows * pitch)``: at
    least the slab's elements, less than 32 more, and 16 (mod 32) floats -- an odd number of
    64-byte lines, so one channel's rows in the a*a slabs fall into different L1 sets."""
    from refmnn.backends.numba.kernels.conv_winograd import slab

    spaced = slab(elems)
    assert elems <= spaced < elems + 32 and spaced % 32 == 16
    lines = spaced * 4 // 64
    assert len({a * lines % 64 for a in range(36)}) == 36


@pytest.mark.skipif(not SIMD_WINOGRAD, reason="the *_simd Winograd variants need AVX2 and FMA")
@pytest.mark.parametrize("scheme", SIMD_WINOGRAD)
def test_winograd_simd_spaced_slabs_with_a_stale_workspace(scheme):
    """64 -> 64 channels @ 11x11 (F(4,3): 9 tiles, rows of 16; F(2,3): 36, rows of 40; back to
    back, the slabs would be an even number of cache lines apart, 4096 bytes for F(4,3)) on
    two images, the workspace's bytes NaN before each run: the input transform writes every
    tile and zeroes each channel's padding columns (which the products multiply), and the
    output matches the reference."""
    from refmnn.backends.base import Storage

    x = rand(2, 64, 11, 11)
    model = conv_model((2, 64, 11, 11), (64, 64, 3, 3), pads=[1, 1, 1, 1])
    want = refmnn.Session(model, check=False).run({"X": x})["Y"]
    spec = refmnn.Session(model, backends=("numba",), check=False).resize().specs["n0"]
    backend = NumbaBackend()
    kdef = next(k for k in backend.kernels() if k.op == "Conv" and k.domain == "")
    (chosen,) = [s for s in kdef.schemes if s.name == scheme]
    kernel = chosen.build(backend, spec)
    kernel.prepare(spec)
    assert kernel.v_slab % 32 == 16 and kernel.m_slab % 32 == 16
    assert (kernel.c * kernel.pitch) % 32 == 0 and kernel.pitch > kernel.tiles
    workspace = backend.allocate(kernel.workspace_bytes, Storage.WORKSPACE)
    inputs = [x, np.asarray(spec.constants[1]), np.asarray(spec.constants[2])]
    v = workspace.handle[:kernel.v_elems * 4].view(np.float32).reshape(kernel.a2, kernel.v_slab)
    rows = v[:, :kernel.c * kernel.pitch].reshape(kernel.a2, kernel.c, kernel.pitch)
    for _ in range(2):
        workspace.handle.view(np.uint8)[...] = 0xFF  # every float32 NaN
        out = np.full(want.shape, np.nan, np.float32)
        backend.begin_run()
        kernel.run(inputs, [out], workspace)
        backend.end_run()
        assert rel_l2(out, want) <= 5e-5, rel_l2(out, want)
        assert not np.any(rows[:, :, kernel.tiles:]), "padding columns not zeroed"
    backend.close()


def _same_specials(want):  # type: ignore[no-untyped-def]
    """``inspect`` for check_node: NaN where the reference has NaN, the same infinities, and
    the finite values within float32 rounding of the sums' order."""
    def inspect(scheme, outputs):  # type: ignore[no-untyped-def]
        assert_same_specials(outputs[0], want, scheme, rel_l2=5e-6)
    return inspect


@pytest.mark.parametrize("act", [None, "relu"])
def test_winograd_with_infinite_and_nan_inputs_matches_the_reference(act):
    """Every 3x3 scheme, Winograd's four among them, on a 12 -> 3 channel 9x15 image (two of
    them) whose inputs are a tenth NaN, +-inf, zeros and subnormals: NaN, infinities and
    numbers where the reference has them. Winograd's transforms spread a tile's infinity to
    outputs whose own windows never see it (93 NaN where the reference has numbers or
    infinities, found by tools/fuzz_graphs.py --special --scale 3), so its kernels compute an
    image with a non-finite input again by direct summation (direct_if_nonfinite); with a
    Relu after, a NaN that became -inf could otherwise have come out as a plausible 0.
    Huge finite inputs stay out of this check: there Winograd's transforms can overflow where
    the direct sums do not, as the order of any float32 sum decides where it overflows."""
    x = special_input((2, 12, 9, 15))
    model = conv_model((2, 12, 9, 15), (3, 12, 3, 3), pads=[2, 2, 2, 2])
    if act:  # the same node as refmnn::FusedConv with the activation in its loops
        node = model.graph.node[0]
        node.op_type, node.domain = "FusedConv", "refmnn"
        node.attribute.append(helper.make_attribute("activation", act))
        model.opset_import.append(helper.make_opsetid("refmnn", 1))
    want = refmnn.Session(model, check=False).run({"X": x})["Y"]
    assert np.isnan(want).any() and np.isfinite(want).any()
    ran = check_node(model, {"X": x}, tol=None, inspect=_same_specials(want), min_schemes=3)
    assert {"winograd_f23", "winograd_f43", *SIMD_WINOGRAD} <= set(ran), ran


def test_winograd_does_not_apply_to_weights_with_an_infinity():
    """U = G g G^T mixes a filter's nine taps, so one infinite weight would make NaN of every
    output of its channel: the Winograd schemes decline such weights (direct and im2col_gemm
    take them) and the node still matches the reference. (Without padding; with it, the
    schemes that skip the padding taps decline such weights too: see
    test_numba_conv_specials.py's test_infinite_and_nan_weights_where_windows_overlap_the_padding.)
    """
    from refmnn.backends.numba.kernels.conv_winograd import winograd_applies

    model = conv_model((1, 4, 8, 8), (2, 4, 3, 3))
    weights = model.graph.initializer[0]
    w = numpy_helper.to_array(weights).copy()
    w[1, 2, 0, 0] = np.inf
    weights.CopyFrom(numpy_helper.from_array(w, weights.name))
    spec = refmnn.Session(model, backends=("numba",), check=False).resize().specs["n0"]
    assert not winograd_applies(spec)
    x = rand(1, 4, 8, 8)
    want = refmnn.Session(model, check=False).run({"X": x})["Y"]
    ran = check_node(model, {"X": x}, tol=None, inspect=_same_specials(want))
    assert not any(name.startswith("winograd") for name in ran), ran
