"""The Numba CPU backend against the NumPy reference.

* every zoo model runs with every node on numba and matches the reference (relative L2 <= 1e-5);
* every scheme of every kernel is forced in turn (built from the planner's own NodeSpec, prepared,
  run on NaN-filled outputs) and compared with the op's reference on small random shapes; the
  run must write every output element, leave its inputs alone and allocate nothing sizeable
  (:func:`tests.numba_checks.check_node`; the fused ops' cases are in test_numba_fused.py, the
  MatMul schemes' in test_numba_matmul.py, the GEMM panels' in test_numba_blas.py, the pools' in
  test_numba_pool.py, the convolutions' with infinities and NaN in test_numba_conv_specials.py).

Kernels are compiled on first use and cached on disk (see refmnn/backends/numba/backend.py), so
only the first run of this file pays the JIT.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba", reason="the numba backend needs numba: pip install 'refmnn[numba]'")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refmnn  # noqa: E402
from refmnn.backends.numba import NumbaBackend  # noqa: E402
from refmnn.schedule.plan import RunStep  # noqa: E402
from tests.helpers import make_model  # noqa: E402
from tests.numba_checks import (F, SIMD_1X1, SIMD_DW_C8, SIMD_DW_S2,  # noqa: E402
                                WINOGRAD, check_node, conv_model, rand, rel_l2)

I64 = TensorProto.INT64


def test_probe_reports_numba_version():
    import numba

    probe = NumbaBackend.probe()
    assert probe.available and probe.version == numba.__version__


def test_import_refmnn_does_not_import_numba():
    code = ("import sys, refmnn, refmnn.backends.numba; from refmnn.backends import BackendRegistry; "
            "BackendRegistry(); assert 'numba' not in sys.modules, 'numba imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------------------------------
# the zoo

ZOO = ("resnet18", "mobilenet_v2", "squeezenet1_1", "vit_tiny", "bert6")


@pytest.mark.parametrize("exporter", ("torchscript", "dynamo"))
@pytest.mark.parametrize("name", ZOO)
def test_zoo_model_runs_entirely_on_numba(name, exporter):
    pytest.importorskip("torch", reason="the zoo is exported with torch: pip install torch==2.13.0")
    if exporter == "dynamo":
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    from refmnn import zoo

    path = zoo.export_onnx(name, exporter=exporter)
    reference = refmnn.Session(path)
    session = refmnn.Session(path, backends=("numba",))
    # a second run with other inputs: the kernels' calls, bound to the arena's arrays in the
    # first run (kernels._common.Bound), must read the arrays' new contents
    for seed in (0, 1):
        feeds = zoo.make_inputs(name, seed=seed)
        expected, got = reference.run(feeds), session.run(feeds)
        for key, value in expected.items():
            assert rel_l2(got[key], value) <= 1e-5, (seed, key, rel_l2(got[key], value))
    elsewhere = [f"{s.node.name} ({s.node.op})" for s in session.plan.steps
                 if isinstance(s, RunStep) and s.backend != "numba"]
    assert not elsewhere, f"nodes not on numba: {elsewhere}"


def test_bound_calls_follow_the_arrays():
    """Bound makes a kernel's calls once per set of arrays, runs them on every call (reading the
    arrays' current contents), makes them again for other arrays, and never binds an array that
    is not C-contiguous."""
    from refmnn.backends.numba.kernels._common import Bound

    bound, made = Bound(), []

    def make(x, out):  # type: ignore[no-untyped-def]
        made.append(x)
        return ((np.add, (x, np.float32(1), out)),)

    a, out = rand(4, 3), np.zeros((4, 3), np.float32)
    bound((a, out), lambda: make(a, out))
    a[:] = rand(4, 3)  # same arrays, new contents
    bound((a, out), lambda: pytest.fail("made again for the same arrays"))
    assert len(made) == 1 and np.array_equal(out, a + 1)
    b = rand(4, 3)
    bound((b, out), lambda: make(b, out))
    assert len(made) == 2 and np.array_equal(out, b + 1)
    t = rand(3, 4).T  # not C-contiguous: made on every call
    for _ in range(2):
        bound((t, out), lambda: make(t, out))
    assert len(made) == 4 and np.array_equal(out, t + 1)


def test_bound_bind_gives_the_calls_then_the_pass_after():
    """Bound.bind (Kernel.bind's numba form) returns one callable that runs the calls made for
    the arrays, on their current contents, then the kernel's pass after them; None for arrays it
    must not bind."""
    from refmnn.backends.numba.kernels._common import Bound

    a, out, after = rand(4, 3), np.zeros((4, 3), np.float32), []
    run = Bound().bind((a, out), lambda: ((np.add, (a, np.float32(1), out)),),
                       lambda: after.append(out.copy()))
    assert run is not None
    for _ in range(2):
        a[:] = rand(4, 3)
        run()
        assert np.array_equal(out, a + 1) and np.array_equal(after[-1], a + 1)
    assert len(after) == 2
    t = rand(3, 4).T
    assert Bound().bind((t, out), lambda: pytest.fail("bound a strided array")) is None


def test_runs_go_through_the_bound_calls_and_name_a_failing_node():
    """A run calls what each kernel bound for the plan's tensors (Kernel.bind) in place of its
    run: every step of a conv + pool + reduce model is bound, later runs read new feeds, the
    result is the callback path's and the reference's, and an error raised by a bound call
    comes out as an OpError that names the node, the backend and the scheme."""
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("ReduceMean", ["p"], ["Y"], name="mean", axes=[2, 3])]
    inits = [numpy_helper.from_array(rand(16, 8, 3, 3), "W"),
             numpy_helper.from_array(rand(16), "B")]
    model = make_model(nodes, [("X", F, (1, 8, 12, 12))], [("Y", F, (1, 16, 1, 1))],
                       initializers=inits)
    session, reference = refmnn.Session(model, backends=("numba",)), refmnn.Session(model)
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((1, 8, 12, 12)).astype(np.float32)
        got = session.run({"X": x})["Y"]
        assert rel_l2(got, reference.run({"X": x})["Y"]) <= 1e-6
        seen = []
        session.run({"X": x}, callback=lambda *args: seen.append(args[1]))  # the run path
        assert seen and np.array_equal(session.run({"X": x})["Y"], got)
    program = session._last._program
    assert program and all(call is not None for _, _, call in program), program

    def broken() -> None:
        raise ValueError("injected")

    step, kernel, _ = program[0]
    program[0] = (step, kernel, broken)
    with pytest.raises(refmnn.OpError, match=f"{step.node.name}.*numba.*{step.scheme}.*injected"):
        session.run({"X": x})


# ---------------------------------------------------------------------------------------------
# every scheme, forced


CONV_CASES = [
    # x shape, w shape, attrs, schemes that must run
    ((2, 4, 9, 7), (6, 4, 3, 3), {"pads": [1, 1, 1, 1]}, WINOGRAD),
    ((1, 4, 8, 8), (6, 4, 3, 3), {}, WINOGRAD),
    ((1, 4, 9, 9), (6, 4, 3, 3), {"strides": [2, 2], "pads": [1, 0, 2, 1]}, ("direct", "im2col_gemm")),
    ((1, 4, 11, 10), (6, 2, 3, 2), {"group": 2, "dilations": [2, 1], "pads": [2, 1, 0, 1]},
     ("direct", "im2col_gemm")),
    ((2, 8, 5, 6), (5, 8, 1, 1), {}, ("direct", "im2col_gemm", "gemm_1x1", *SIMD_1X1)),
    # gemm_1x1_simd's edges: 19 output channels (four blocks of 4, then three rows through the
    # spare tile), 99 pixels (four strips of 24, then 3 pixels of an 8-wide strip); 400 pixels
    # (16 strips, a 16-wide last one); a 7 x 7 plane (two strips of 24, then one pixel as a
    # column, see below) with one channel block; 141 output channels on small planes, run in the
    # "by rows" order (36 blocks shared out over the workers, the last one of one channel) over
    # 35 pixels (24, then 11 of a 16-wide strip), and over 169 pixels (seven strips and a
    # column, more than the six a pass over the packed plane takes: two passes); 131 output
    # channels from 5 inputs over 323 pixels, also by rows (few inputs; 13 strips, then 11
    # pixels of a 16-wide one); 1900 pixels (79 strips of 24, then 4 pixels of an 8-wide one:
    # tasks of several strips, packed together, the last task's run ending in the narrow strip)
    ((2, 5, 9, 11), (19, 5, 1, 1), {}, ("gemm_1x1", *SIMD_1X1)),
    ((1, 6, 50, 38), (10, 6, 1, 1), {}, ("gemm_1x1", *SIMD_1X1)),
    ((1, 8, 20, 20), (40, 8, 1, 1), {}, ("gemm_1x1", *SIMD_1X1)),
    ((1, 70, 7, 7), (4, 70, 1, 1), {}, ("gemm_1x1", *SIMD_1X1)),
    ((2, 314, 5, 7), (141, 314, 1, 1), {}, ("gemm_1x1", *SIMD_1X1)),
    ((1, 314, 13, 13), (141, 314, 1, 1), {}, ("gemm_1x1", *SIMD_1X1)),
    ((1, 5, 17, 19), (131, 5, 1, 1), {}, ("gemm_1x1", *SIMD_1X1)),
    # by rows from 700 inputs over a 7 x 7 plane: a pass takes two strips of 24, so the strip of
    # one column joins the one pass rather than a second pass of its own
    ((1, 700, 7, 7), (130, 700, 1, 1), {}, ("gemm_1x1", *SIMD_1X1)),
    # its strips of columns (a plane's last one or two pixels as dot products): 50 pixels (two
    # strips, then two columns) with an odd number of input channels (the last one added
    # apart), 7 output channels (the second block of 3 rows), N = 2; 25 pixels (one column)
    # with 13 channels (a step of four pairs, two pairs more, one channel); 2 pixels (no full
    # strip, columns alone) from 3 channels
    ((2, 9, 5, 10), (7, 9, 1, 1), {}, ("gemm_1x1", *SIMD_1X1)),
    ((1, 13, 5, 5), (6, 13, 1, 1), {}, ("gemm_1x1", *SIMD_1X1)),
    ((1, 3, 1, 2), (5, 3, 1, 1), {}, ("gemm_1x1", *SIMD_1X1)),
    ((1, 6, 10, 10), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]},
     ("direct", "im2col_gemm", "depthwise", "depthwise_s1", "depthwise3x3",
      "depthwise3x3_same")),
    ((2, 3, 9, 12), (6, 1, 3, 2), {"group": 3, "dilations": [2, 3], "pads": [2, 0, 1, 3]},
     ("direct", "depthwise", "depthwise_s1")),
    ((1, 4, 11, 11), (8, 1, 3, 3), {"group": 4, "strides": [2, 2], "pads": [1, 1, 1, 1]},
     ("depthwise", "depthwise3x3", "depthwise3x3_same")),
    # depthwise3x3(_same): N > 1, odd sizes, uneven / wide / no padding, stride 2, channel
    # multiplier 2; _same with padding only on the left and right, or two rows above none below,
    # at stride 2 with none on the right, odd widths
    ((2, 5, 9, 11), (5, 1, 3, 3), {"group": 5, "pads": [1, 1, 1, 1]},
     ("depthwise_s1", "depthwise3x3", "depthwise3x3_same")),
    ((2, 3, 6, 9), (6, 1, 3, 3), {"group": 3, "pads": [0, 1, 0, 1]},
     ("depthwise_s1", "depthwise3x3", "depthwise3x3_same")),
    ((1, 4, 5, 7), (4, 1, 3, 3), {"group": 4, "pads": [2, 1, 0, 1]},
     ("depthwise_s1", "depthwise3x3", "depthwise3x3_same")),
    ((1, 2, 4, 1), (2, 1, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, ("depthwise3x3_same",)),
    ((2, 4, 11, 10), (8, 1, 3, 3), {"group": 4, "strides": [2, 2], "pads": [0, 1, 2, 1]},
     ("depthwise", "depthwise3x3", "depthwise3x3_same")),
    ((1, 3, 9, 8), (3, 1, 3, 3), {"group": 3, "strides": [2, 2], "pads": [1, 1, 0, 0]},
     ("depthwise", "depthwise3x3", "depthwise3x3_same")),
    ((2, 2, 6, 7), (2, 1, 3, 3), {"group": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]},
     ("depthwise", "depthwise3x3", "depthwise3x3_same")),
    ((1, 3, 8, 7), (3, 1, 3, 3), {"group": 3, "strides": [2, 2]}, ("depthwise", "depthwise3x3")),
    ((1, 3, 6, 5), (3, 1, 3, 3), {"group": 3, "pads": [2, 0, 3, 2]}, ("depthwise_s1", "depthwise3x3")),
    ((3, 2, 3, 4), (2, 1, 3, 3), {"group": 2, "strides": [2, 2], "pads": [2, 2, 2, 2]},
     ("depthwise", "depthwise3x3")),
    # depthwise3x3_s2_simd (eight outputs a vector, output 0 with one column of padding too, the
    # rest of a row's ends one by one): an odd width (the last vector overlaps the one before
    # it, the last output is scalar), channel multiplier 2, N = 2; a width of 18 (output 0's
    # vector, then one overlapping it by seven) with three rows of padding above and below
    # (output rows wholly outside the plane: the bias alone); no padding (one vector, the whole
    # row); two columns and rows of padding on the left and top (the first output from one tap
    # column), three rows below
    ((2, 3, 9, 37), (6, 1, 3, 3), {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]},
     ("depthwise", "depthwise3x3", *SIMD_DW_S2)),
    ((1, 2, 6, 18), (2, 1, 3, 3), {"group": 2, "strides": [2, 2], "pads": [3, 1, 3, 1]},
     ("depthwise", "depthwise3x3", "depthwise3x3_same", *SIMD_DW_S2)),
    ((1, 2, 5, 17), (2, 1, 3, 3), {"group": 2, "strides": [2, 2]}, ("depthwise", *SIMD_DW_S2)),
    ((1, 3, 8, 24), (3, 1, 3, 3), {"group": 3, "strides": [2, 2], "pads": [2, 2, 3, 0]},
     ("depthwise", "depthwise3x3", *SIMD_DW_S2)),
    # depthwise3x3_c8 (eight channels a vector, transposed in and out eight pixels at a time):
    # N = 2 and two blocks of channels, planes of 49 pixels (the last group of eight overlaps
    # the one before); stride 2 with odd sizes; uneven padding; no padding at stride 2, where
    # the last input row and column feed no output (the junk slot); padding wider than the
    # kernel's reach; a plane of exactly eight pixels in and out
    ((2, 16, 7, 7), (16, 1, 3, 3), {"group": 16, "pads": [1, 1, 1, 1]},
     ("depthwise3x3", "depthwise3x3_same", *SIMD_DW_C8)),
    ((1, 8, 9, 13), (8, 1, 3, 3), {"group": 8, "strides": [2, 2], "pads": [1, 1, 1, 1]},
     ("depthwise", "depthwise3x3", "depthwise3x3_same", *SIMD_DW_C8)),
    ((1, 16, 6, 5), (16, 1, 3, 3), {"group": 16, "pads": [0, 2, 1, 0]},
     ("depthwise_s1", "depthwise3x3", *SIMD_DW_C8)),
    ((2, 8, 10, 12), (8, 1, 3, 3), {"group": 8, "strides": [2, 2]},
     ("depthwise", "depthwise3x3", *SIMD_DW_C8)),
    ((1, 8, 4, 4), (8, 1, 3, 3), {"group": 8, "pads": [2, 2, 2, 2]},
     ("depthwise_s1", "depthwise3x3", *SIMD_DW_C8)),
    ((1, 8, 2, 4), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]},
     ("depthwise3x3", "depthwise3x3_same", *SIMD_DW_C8)),
    ((1, 3, 7, 8), (4, 3, 5, 5), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, ("direct", "im2col_gemm")),
    ((1, 3, 7, 8), (4, 3, 3, 3), {"auto_pad": "VALID"}, WINOGRAD),
    # Winograd edge tiles: output sizes not multiples of 4 (or 2), uneven and wide padding, N > 1
    ((2, 5, 13, 11), (7, 5, 3, 3), {"pads": [2, 0, 1, 2]}, WINOGRAD),
    ((3, 3, 5, 6), (4, 3, 3, 3), {"pads": [3, 2, 2, 3]}, WINOGRAD),
    ((1, 4, 3, 3), (2, 4, 3, 3), {}, WINOGRAD),
    ((2, 6, 12, 9), (5, 6, 3, 3), {"auto_pad": "SAME_LOWER"}, WINOGRAD),
    # the register-tile products' edges: 37 output channels (two tasks of 16 rows, then 4, then
    # one, its U rows packed with 3 zero rows and M's with 3 unread ones), F(4,3)'s 225 tiles
    # padded to 232 (a task of 192, then 24 + 16), F(2,3)'s 900; 128 and 300 input channels
    ((1, 8, 60, 60), (37, 8, 3, 3), {"pads": [1, 1, 1, 1]}, WINOGRAD),
    ((1, 128, 6, 6), (9, 128, 3, 3), {"pads": [1, 1, 1, 1]}, WINOGRAD),
    ((1, 300, 7, 7), (10, 300, 3, 3), {"pads": [1, 1, 1, 1]}, WINOGRAD),
]


@pytest.mark.parametrize(("x_shape", "w_shape", "attrs", "schemes"), CONV_CASES)
def test_conv_schemes(x_shape, w_shape, attrs, schemes):
    check_node(conv_model(x_shape, w_shape, **attrs), {"X": rand(*x_shape)}, must_run=schemes)


def test_conv_without_bias():
    check_node(conv_model((1, 4, 6, 6), (5, 4, 3, 3), bias=False, pads=[1, 1, 1, 1]),
               {"X": rand(1, 4, 6, 6)}, must_run=WINOGRAD)


def test_gemm_1x1_simd_is_chosen_for_constant_weights():
    """The costs give a 1x1 conv with constant weights to gemm_1x1_simd at every size (priced
    below gemm_1x1, which also packs the weights on every call: measured in conv_1x1_simd's
    docstring); weights fed at run time cannot be packed in prepare, so the scheme does not
    apply to them and gemm_1x1 runs."""
    def chosen(model):  # type: ignore[no-untyped-def]
        plan = refmnn.Session(model, backends=("numba",), check=False).resize()
        return next(s.scheme for s in plan.steps if isinstance(s, RunStep))

    if not SIMD_1X1:
        pytest.skip("gemm_1x1_simd applies only on CPUs with AVX2 and FMA")
    assert chosen(conv_model((1, 16, 56, 56), (96, 16, 1, 1))) == "gemm_1x1_simd"
    assert chosen(conv_model((1, 256, 14, 14), (64, 256, 1, 1))) == "gemm_1x1_simd"
    assert chosen(conv_model((1, 256, 14, 14), (128, 256, 1, 1))) == "gemm_1x1_simd"
    assert chosen(conv_model((1, 96, 14, 14), (576, 96, 1, 1))) == "gemm_1x1_simd"
    assert chosen(conv_model((1, 128, 56, 56), (128, 128, 1, 1))) == "gemm_1x1_simd"
    assert chosen(conv_model((1, 512, 13, 13), (1000, 512, 1, 1))) == "gemm_1x1_simd"  # 169
    assert chosen(conv_model((1, 160, 7, 7), (960, 160, 1, 1))) == "gemm_1x1_simd"
    node = helper.make_node("Conv", ["X", "W"], ["Y"], name="n0")
    fed = make_model([node], [("X", F, (1, 16, 56, 56)), ("W", F, (96, 16, 1, 1))],
                     [("Y", F, None)])
    assert chosen(fed) == "gemm_1x1"


def test_gemm_1x1_simd_loop_order_follows_the_layer():
    """gemm_1x1_simd runs by rows where many output channels meet a small plane or few inputs
    (or the weights outgrow L2), by strips elsewhere -- the orders measured fastest on the zoo's
    layers (conv_1x1_simd's docstring)."""
    from refmnn.backends.numba.kernels.conv_1x1_simd import by_rows_order

    # (output channels, input channels, pixels) -> by rows
    layers = {(576, 96, 196): True, (96, 576, 196): False, (144, 24, 3136): True,
              (24, 144, 3136): False, (96, 16, 12544): False, (128, 128, 3136): False,
              (256, 256, 784): False, (1024, 1024, 49): True, (1000, 512, 169): True,
              (16, 128, 3025): False, (64, 2560, 3136): True}
    assert {layer: by_rows_order(*layer) for layer in layers} == layers


def test_gemm_1x1_simd_runs_no_pass_of_columns_alone():
    """By rows, a plane's last strip, when it is one or two columns, joins the pass before it
    (a pass of its own reads all the weights again): MobileNetV2's 960 -> 160 and 960 -> 320
    over 7 x 7 (two strips of 24 a pass, then one column) run in one pass; 512 -> 1000 over
    13 x 13 keeps its two passes of four strips (the last has full strips too)."""
    from refmnn.backends.numba.kernels.conv_1x1_simd import plan

    assert plan(160, 960, 49, 2)[:3] == (True, 1, 3)
    assert plan(320, 960, 49, 2)[:3] == (True, 1, 3)
    assert plan(1000, 512, 169, 2)[:3] == (True, 1, 4)


BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min"]
SHAPES = [((2, 3, 4, 5), (2, 3, 4, 5)), ((2, 3, 4, 5), (3, 1, 1)), ((2, 3, 4, 5), ()), ((1,), (2, 3, 4, 5)),
          ((2, 1, 4, 1, 6), (3, 1, 5, 6)), ((4, 1), (1, 5))]


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize(("sa", "sb"), SHAPES)
def test_binary_broadcast(op, sa, sb):
    node = helper.make_node(op, ["A", "B"], ["Y"], name="n0")
    model = make_model([node], [("A", F, sa), ("B", F, sb)], [("Y", F, None)])
    b = rand(*sb)
    if op == "Div":
        b = np.where(np.abs(b) < 0.1, 1.0, b).astype(np.float32)
    check_node(model, {"A": rand(*sa), "B": b})


def test_pow_equal_where():
    nodes = [helper.make_node("Pow", ["A", "P"], ["Y"], name="n0"),
             helper.make_node("Equal", ["A", "C"], ["E"], name="n1"),
             helper.make_node("Where", ["E", "A", "Y"], ["Z"], name="n2")]
    model = make_model(nodes, [("A", F, (3, 4)), ("P", F, (4,)), ("C", F, (3, 1))],
                       [("Y", F, None), ("Z", F, None)])
    a = np.abs(rand(3, 4)) + 0.1
    c = a[:, 1:2].copy()
    feeds = {"A": a, "P": rand(4), "C": c}
    for name in ("n0", "n1", "n2"):
        check_node(model, feeds, node=name)


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt", "Neg", "Abs"])
def test_unary(op):
    node = helper.make_node(op, ["X"], ["Y"], name="n0")
    model = make_model([node], [("X", F, (3, 50))], [("Y", F, None)])
    x = rand(3, 50)
    if op in ("Log", "Sqrt"):
        x = np.abs(x) + 0.01
    check_node(model, {"X": x})


def test_clip():
    lo = numpy_helper.from_array(np.array(-0.5, np.float32), "lo")
    hi = numpy_helper.from_array(np.array(0.7, np.float32), "hi")
    node = helper.make_node("Clip", ["X", "lo", "hi"], ["Y"], name="n0")
    model = make_model([node], [("X", F, (4, 9))], [("Y", F, None)], initializers=[lo, hi])
    check_node(model, {"X": rand(4, 9)})


@pytest.mark.parametrize("bounds", [(np.nan, 0.5), (-0.5, np.nan)])
def test_clip_with_a_nan_bound_is_nan(bounds):
    """Clip is Min(max, Max(input, min)) and ONNX's Max and Min propagate NaN: a NaN bound
    makes every element NaN, as the reference says (numba's comparisons skipped it; found by
    tools/fuzz_models.py --values --all-inputs)."""
    node = helper.make_node("Clip", ["X", "lo", "hi"], ["Y"], name="n0")
    model = make_model([node], [("X", F, (3, 4)), ("lo", F, ()), ("hi", F, ())],
                       [("Y", F, (3, 4))])
    lo, hi = (np.array(b, np.float32) for b in bounds)

    def all_nan(scheme, outputs):
        assert np.isnan(outputs[0]).all(), scheme

    check_node(model, {"X": rand(3, 4), "lo": lo, "hi": hi}, tol=None, inspect=all_nan)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize(("axes", "keepdims"), [((3,), 1), ((2, 3), 1), ((1,), 0), ((0, 2), 1), (None, 0),
                                                ((-1, 1), 0)])
def test_reductions(op, axes, keepdims):
    shape = (2, 3, 4, 5)
    inits = []
    inputs = ["X"]
    attrs = {"keepdims": keepdims}
    if op == "ReduceSum":  # axes is an input from opset 13
        if axes is not None:
            inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
            inputs.append("axes")
    elif axes is not None:
        attrs["axes"] = list(axes)
    node = helper.make_node(op, inputs, ["Y"], name="n0", **attrs)
    model = make_model([node], [("X", F, shape)], [("Y", F, None)], initializers=inits)
    # centred on 2: the sum of N(0, 1) values can land near 0, where the check's relative error
    # measures cancellation, not the kernel (ReduceMean over all 120 values drew 1.3e-5)
    check_node(model, {"X": rand(*shape) + 2})


@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_softmax(axis):
    node = helper.make_node("Softmax", ["X"], ["Y"], name="n0", axis=axis)
    model = make_model([node], [("X", F, (3, 4, 7))], [("Y", F, None)])
    check_node(model, {"X": 3 * rand(3, 4, 7)}, must_run=("last_axis", "strided") if axis == -1 else ("strided",))


@pytest.mark.parametrize(("axis", "bias"), [(-1, True), (1, True), (-1, False)])
def test_layer_norm(axis, bias):
    shape = (2, 5, 8)
    d = int(np.prod(shape[axis % 3:]))
    inits = [numpy_helper.from_array(rand(*shape[axis % 3:]), "S")]
    inputs = ["X", "S"]
    if bias:
        inits.append(numpy_helper.from_array(rand(*shape[axis % 3:]), "B"))
        inputs.append("B")
    assert d
    node = helper.make_node("LayerNormalization", inputs, ["Y"], name="n0", axis=axis, epsilon=1e-5)
    model = make_model([node], [("X", F, shape)], [("Y", F, None)], initializers=inits)
    check_node(model, {"X": rand(*shape) + 2})


def test_depthwise_c8_is_chosen_for_small_planes_and_stride_2():
    """The costs give depthwise3x3_c8 MobileNetV2's depthwise layers on small planes and at
    stride 2 down to 28 x 28, and leave the large stride-1 planes to depthwise3x3_same and
    96 @ 112 at stride 2 to depthwise3x3_s2_simd (the kernels' times in
    conv_depthwise3x3_c8's docstring)."""
    def chosen(c, h, s):  # type: ignore[no-untyped-def]
        model = conv_model((1, c, h, h), (c, 1, 3, 3), group=c, strides=[s, s],
                           pads=[1, 1, 1, 1])
        plan = refmnn.Session(model, backends=("numba",), check=False).resize()
        return next(str(st.scheme) for st in plan.steps if isinstance(st, RunStep))

    if not SIMD_DW_C8:
        pytest.skip("depthwise3x3_c8 applies only on CPUs with AVX2 and FMA")
    for c, h, s in ((960, 7, 1), (384, 14, 1), (576, 14, 2), (192, 28, 2), (144, 56, 2)):
        assert chosen(c, h, s) == "depthwise3x3_c8", (c, h, s)
    for c, h in ((192, 28), (144, 56), (32, 112)):
        assert chosen(c, h, 1) == "depthwise3x3_same", (c, h)
    assert chosen(96, 112, 2) == "depthwise3x3_s2_simd"


def test_vtranspose_is_the_8x8_transpose():
    """simd.vtranspose returns the columns of the matrix whose rows it is given."""
    if not SIMD_DW_C8:
        pytest.skip("the 8-lane vectors are tested where the CPU has AVX2 and FMA")
    from numba import njit

    from refmnn.backends.numba.kernels.simd import vload, vstore, vtranspose

    @njit
    def transpose(a, out):  # type: ignore[no-untyped-def]
        c = vtranspose(vload(a, 0), vload(a, 8), vload(a, 16), vload(a, 24), vload(a, 32),
                       vload(a, 40), vload(a, 48), vload(a, 56))
        for j in range(8):
            vstore(out, 8 * j, c[j])

    a = rand(64)
    out = np.zeros(64, np.float32)
    transpose(a, out)
    np.testing.assert_array_equal(out.reshape(8, 8), a.reshape(8, 8).T)


@pytest.mark.parametrize("parallel_min", [None, 0])
def test_raster_from_movement_ops(parallel_min, monkeypatch):
    """Transpose, Slice, Reshape, Concat, Expand lower to Raster; the session runs them on numba,
    also with every disjoint Raster on the parallel copy (threshold 0)."""
    from refmnn.backends.numba.kernels import raster

    if parallel_min is not None:
        monkeypatch.setattr(raster, "RASTER_PARALLEL_MIN", parallel_min)
    shape_c = numpy_helper.from_array(np.array([4, 30], np.int64), "shape")
    starts = numpy_helper.from_array(np.array([1, 0], np.int64), "starts")
    ends = numpy_helper.from_array(np.array([4, 30], np.int64), "ends")
    axes = numpy_helper.from_array(np.array([0, 1], np.int64), "axes")
    steps = numpy_helper.from_array(np.array([2, 1], np.int64), "steps")
    eshape = numpy_helper.from_array(np.array([3, 4, 30], np.int64), "eshape")
    nodes = [helper.make_node("Transpose", ["X"], ["T"], name="n0", perm=[2, 0, 1]),
             helper.make_node("Reshape", ["T", "shape"], ["R"], name="n1"),
             helper.make_node("Slice", ["R", "starts", "ends", "axes", "steps"], ["S"], name="n2"),
             helper.make_node("Concat", ["S", "R"], ["C"], name="n3", axis=0),
             helper.make_node("Expand", ["R", "eshape"], ["E"], name="n4")]
    model = make_model(nodes, [("X", F, (2, 3, 20))], [("C", F, None), ("E", F, None)],
                       initializers=[shape_c, starts, ends, axes, steps, eshape])
    feeds = {"X": rand(2, 3, 20)}
    expected = refmnn.Session(model, check=False).run(feeds)
    session = refmnn.Session(model, backends=("numba",), check=False)
    got = session.run(feeds)
    ops = {s.node.op for s in session.plan.steps if isinstance(s, RunStep) and s.backend == "numba"}
    assert "Raster" in ops
    assert all(s.backend == "numba" for s in session.plan.steps if isinstance(s, RunStep))
    prepared = next(iter(session._prepared.values()))
    copies = [k for k in prepared.kernels if isinstance(k, raster.Raster)]
    assert any(k.parallel for k in copies) == (parallel_min == 0)
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key])


@pytest.mark.parametrize("overlap", [False, True])
def test_raster_regions(overlap, monkeypatch):
    """Hand-written regions: a partial cover (the rest must be zero) and overlapping writes
    (later regions win, so they stay on the serial copy even above the parallel threshold)."""
    from refmnn.backends.numba.kernels import raster

    monkeypatch.setattr(raster, "RASTER_PARALLEL_MIN", 0)
    regions = [0, 0, 0, 2, 3, 3, 1, 6, 1]  # source (2, 3) into the left half of a (2, 6) output
    if overlap:
        regions += [0, 0, 1, 2, 3, 1, 2, 6, 1]  # the transpose-ish second write overlaps the first
    node = helper.make_node("Raster", ["X"], ["Y"], name="n0", domain="refmnn", shape=[2, 6], rank=2,
                            regions=regions)
    model = make_model([node], [("X", F, (2, 3))], [("Y", F, None)], extra_opsets=[("refmnn", 1)])
    check_node(model, {"X": rand(2, 3)})


def test_split_gather_cast():
    table = numpy_helper.from_array(rand(10, 6), "T")
    split = numpy_helper.from_array(np.array([2, 4], np.int64), "split")
    nodes = [helper.make_node("Gather", ["T", "I"], ["G"], name="n0", axis=0),
             helper.make_node("Split", ["G", "split"], ["S0", "S1"], name="n1", axis=-1),
             helper.make_node("Cast", ["I"], ["C"], name="n2", to=TensorProto.FLOAT),
             helper.make_node("Gather", ["G", "J"], ["H"], name="n3", axis=2)]
    model = make_model(nodes, [("I", I64, (2, 3)), ("J", I64, (2,))],
                       [("S0", F, None), ("S1", F, None), ("C", F, None), ("H", F, None)],
                       initializers=[table, split])
    feeds = {"I": np.array([[1, -2, 3], [9, 0, 0]], np.int64), "J": np.array([5, -6], np.int64)}
    for name in ("n0", "n1", "n2", "n3"):
        check_node(model, feeds, node=name)


def test_threads_and_cache_dir_options(tmp_path):
    from refmnn.backends import BackendConfig

    model = conv_model((1, 4, 8, 8), (6, 4, 3, 3), pads=[1, 1, 1, 1])
    x = {"X": rand(1, 4, 8, 8)}
    expected = refmnn.Session(model, check=False).run(x)["Y"]
    config = BackendConfig(threads=1, options={"cache_dir": str(tmp_path / "cache")})
    got = refmnn.Session(model, backends=("numba",), configs={"numba": config}, check=False).run(x)["Y"]
    assert rel_l2(got, expected) <= 1e-5


def test_cache_folder_is_keyed_by_every_kernel_source(tmp_path):
    """Editing any source of the package (a helper another module inlines, say) changes the
    cache folder, so Numba can never load machine code compiled from the old helper."""
    import shutil

    import numba

    from refmnn.backends.numba import backend as numba_backend

    package = Path(numba_backend.__file__).parent
    copy = tmp_path / "numba_pkg"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = numba_backend.kernel_fingerprint(copy)
    assert before == numba_backend.kernel_fingerprint(package)
    helper_file = copy / "kernels" / "_common.py"
    helper_file.write_text(helper_file.read_text() + "\n# edited\n")
    assert numba_backend.kernel_fingerprint(copy) != before
    previous = numba.core.config.CACHE_DIR
    try:
        numba_backend._configure_cache(str(tmp_path / "cache"))
        assert numba.core.config.CACHE_DIR == str(tmp_path / "cache" / before)
    finally:
        numba.core.config.CACHE_DIR = previous


# ---------------------------------------------------------------------------------------------
# the threading layers (the GEMM panels' own tests: test_numba_blas.py)


@pytest.mark.parametrize("layer", ["workqueue", "omp"])
def test_threading_layers_and_sessions_on_several_threads(layer):
    """Each threading layer (fixed per process: a subprocess each) runs a conv + 1x1 + matmul
    model at 2 threads like the reference, also from four Python threads at once."""
    code = f"""
import threading, numpy as np, numba, refmnn
from refmnn.backends.base import BackendConfig
from tests.numba_checks import conv_model, rand, rel_l2
model = conv_model((2, 32, 40, 40), (64, 32, 1, 1))
x = {{"X": rand(2, 32, 40, 40)}}
want = refmnn.Session(model, check=False).run(x)["Y"]
cfg = {{"numba": BackendConfig(threads=2, options={{"threading_layer": "{layer}"}})}}
sessions = [refmnn.Session(model, backends=("numba",), configs=cfg, check=False) for _ in range(4)]
errors = []
def work(s):
    for _ in range(20):
        errors.append(rel_l2(s.run(x)["Y"], want))
threads = [threading.Thread(target=work, args=(s,)) for s in sessions]
[t.start() for t in threads]; [t.join() for t in threads]
assert numba.threading_layer() == "{layer}", numba.threading_layer()
assert len(errors) == 80 and max(errors) <= 1e-5, max(errors)
"""
    env = {k: v for k, v in __import__("os").environ.items() if k != "NUMBA_THREADING_LAYER"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env,
                   cwd=str(Path(__file__).resolve().parent.parent))


def test_each_jit_build_has_its_own_disk_cache_entry():  # type: ignore[no-untyped-def]
    """Numba keys its disk cache by module, qualified name, signature and bytecode, not by the
    jit options: two builds of one Python function (a parallel kernel and its serial copy)
    would overwrite each other's cached machine code, and a later process could run the serial
    loops where the parallel ones were asked for. Every dispatcher of the kernel modules must
    therefore have a (module, qualified name) of its own (see ``_common.renamed``); a second
    name bound to the same dispatcher (``attention.SCORES``) is the same build."""
    import importlib
    import pkgutil

    from numba.core.registry import CPUDispatcher

    import refmnn.backends.numba.kernels as package

    owners: dict[tuple[str, str], tuple[str, object]] = {}
    seen = 0
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for attr, value in vars(module).items():
            if not isinstance(value, CPUDispatcher) or value.__module__ != module.__name__:
                continue
            key = (value.py_func.__module__, value.py_func.__qualname__)
            name, first = owners.setdefault(key, (f"{module.__name__}.{attr}", value))
            assert first is value, f"{name} and {module.__name__}.{attr} share the cache name {key}"
            seen += 1
    assert seen > 20  # the scan found the kernels
    from refmnn.backends.numba.kernels import conv_depthwise3x3, conv_depthwise3x3_c8, fused
    for module, name in ((conv_depthwise3x3, "conv_depthwise3x3"),
                         (conv_depthwise3x3, "conv_depthwise3x3_same"),
                         (conv_depthwise3x3, "conv_depthwise3x3_s2_simd"),
                         (conv_depthwise3x3_c8, "conv_depthwise3x3_c8")):
        serial = getattr(module, name + "_serial")
        assert serial.targetoptions.get("parallel") is not True
        assert getattr(module, name).targetoptions.get("parallel") is True
    assert fused.epilogue_serial.py_func.__qualname__ == "epilogue_kernel_serial"
    from refmnn.backends.numba.kernels import attention
    assert attention.attend_blas.py_func.__qualname__ == "_attend_blas"


def test_omp_wait_option_reaches_the_openmp_runtime():  # type: ignore[no-untyped-def]
    """``options["omp_wait"]`` must be in the environment before the OpenMP runtime loads (it
    reads ``OMP_WAIT_POLICY`` once, then); probing for the runtime loads it, so the option was
    once set too late and silently ignored. GNU OpenMP prints the policy it took with
    ``OMP_DISPLAY_ENV``: its default shows as PASSIVE, the option's ACTIVE must show instead."""
    from refmnn.backends.numba.backend import _omp_available

    if not _omp_available():
        pytest.skip("no OpenMP runtime for Numba here")
    code = """
from refmnn.backends.base import BackendConfig
from refmnn.backends.numba.backend import NumbaBackend
NumbaBackend(BackendConfig(options={"omp_wait": "active"})).kernels()
"""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME", "NUMBA_THREADING_LAYER")}
    env["OMP_DISPLAY_ENV"] = "TRUE"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=str(Path(__file__).resolve().parent.parent), check=True)
    shown = [line.strip() for line in (done.stdout + done.stderr).splitlines()
             if "OMP_WAIT_POLICY" in line]
    if not shown:
        pytest.skip("this OpenMP runtime does not display its settings (not GNU libgomp)")
    assert shown == ["OMP_WAIT_POLICY = 'ACTIVE'"], shown


def test_a_child_forked_while_openmp_threads_run_is_refused_not_killed():
    """A child forked (a multiprocessing pool's "fork" start) after the parent ran a numba
    Session: GNU OpenMP would terminate it at its first parallel loop (and the pool would wait
    for ever), so the run and a new Session there raise a BackendError saying what to do."""
    import numba

    from tests.helpers import add_relu_model, in_forked_child

    session = refmnn.Session(add_relu_model(), backends=("numba",))
    feeds = {k: np.ones((2, 3), np.float32) for k in ("A", "B")}
    np.testing.assert_array_equal(session.run(feeds)["Y"], np.full((2, 3), 2, np.float32))
    again = in_forked_child(lambda: session.run(feeds))
    new = in_forked_child(lambda: refmnn.Session(add_relu_model(), backends=("numba",)).run(feeds))
    if numba.threading_layer() != "omp":  # workqueue and tbb survive fork
        assert again == new == "ran"
        return
    for outcome in (again, new):
        assert outcome.startswith("BackendError: numba: this process was forked"), outcome
        assert "'spawn'" in outcome
