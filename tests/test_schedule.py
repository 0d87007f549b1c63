"""Pre-inference: memory planning, plan caching per shape signature, explain and arena mode."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import refmnn
from refmnn.backends.base import NodeSpec
from refmnn.backends.reference import ReferenceKernel
from refmnn.backends.registry import BackendRegistry
from refmnn.errors import ShapeError
from refmnn.graph import DType, Node, TensorType
from refmnn.ops import default_registry
from refmnn.ops._schema import OpContext, into
from refmnn.schedule import plan as plan_module
from refmnn.schedule.memory import Interval, align, lower_bound, plan_arena, verify_no_overlap
from tests.helpers import add_relu_model, make_model, require_backend

intervals = st.lists(
    st.tuples(st.integers(1, 5000), st.integers(-1, 30), st.integers(0, 12)).map(
        lambda t: (t[0], t[1], t[1] + t[2])),
    min_size=1, max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(intervals)
def test_planner_never_overlaps_live_values_and_respects_the_lower_bound(raw):
    ivs = [Interval(f"v{i}", n, first, last) for i, (n, first, last) in enumerate(raw)]
    arena = plan_arena(ivs)
    verify_no_overlap(ivs, arena)
    assert arena.lower_bound == lower_bound(ivs)
    assert arena.lower_bound <= arena.peak <= arena.total
    assert all(offset % 64 == 0 for offset in arena.offsets.values())


def _place_by_every_pair(order, reuse):
    """The placement rule written plainly (every placed value tested against each new one):
    the oracle of memory._place, which finds the values live together step by step."""
    placed, offsets = [], {}
    for iv in order:
        size = align(iv.nbytes)
        offset = 0
        for start, end in sorted((off, off + sz) for other, off, sz in placed
                                 if not reuse or other.overlaps(iv)):
            if offset + size <= start:
                break
            offset = max(offset, end)
        offsets[iv.key] = offset
        placed.append((iv, offset, size))
    return offsets, max((off + sz for _, off, sz in placed), default=0)


@settings(max_examples=200, deadline=None)
@given(intervals, st.booleans())
def test_placement_is_the_every_pair_rule(raw, reuse):
    from refmnn.schedule.memory import _place

    ivs = [Interval(f"v{i}", n, first, last) for i, (n, first, last) in enumerate(raw)]
    assert _place(ivs, reuse) == _place_by_every_pair(ivs, reuse)


@settings(max_examples=200, deadline=None)
@given(intervals, st.data())
def test_verify_no_overlap_finds_any_shared_bytes(raw, data):
    """A plan with one value moved to a random aligned offset: verify_no_overlap raises
    exactly when some pair live together shares bytes (checked pair by pair here)."""
    ivs = [Interval(f"v{i}", n, first, last) for i, (n, first, last) in enumerate(raw)]
    good = plan_arena(ivs)
    moved = data.draw(st.sampled_from(ivs))
    offsets = {**good.offsets, moved.key: 64 * data.draw(st.integers(0, good.peak // 64))}
    bad = type(good)(offsets=offsets, sizes=good.sizes, peak=good.peak, total=good.total,
                     lower_bound=good.lower_bound)
    shares = any(a.overlaps(b) and offsets[a.key] < offsets[b.key] + bad.sizes[b.key]
                 and offsets[b.key] < offsets[a.key] + bad.sizes[a.key]
                 for i, a in enumerate(ivs) for b in ivs[i + 1:])
    if shares:
        with pytest.raises(AssertionError, match="memory plan overlap"):
            verify_no_overlap(ivs, bad)
    else:
        verify_no_overlap(ivs, bad)


def test_planner_reaches_the_bound_on_a_chain_and_shrinking_values():
    chain = [Interval(f"v{i}", 4096, i, i + 1) for i in range(20)]
    assert plan_arena(chain).peak == plan_arena(chain).lower_bound == 2 * 4096
    shrinking = [Interval(f"v{i}", 1000 * (20 - i), i, i + 1) for i in range(20)]
    arena = plan_arena(shrinking)
    assert arena.lower_bound == align(20000) + align(19000)
    assert arena.peak == arena.lower_bound


def test_lower_bound_is_not_always_reachable_and_the_plan_says_so():
    """Sizes 1, 2, 3 (KB) repeating along a chain: no placement reaches the bound (3 + 2)."""
    ivs = [Interval(f"v{i}", 1000 * (i % 3 + 1), i, i + 1) for i in range(20)]
    arena = plan_arena(ivs)
    verify_no_overlap(ivs, arena)
    assert arena.lower_bound == align(3000) + align(2000)
    assert arena.peak == align(3000) + align(2000) + align(1000)


def test_verify_no_overlap_catches_a_bad_plan():
    ivs = [Interval("a", 128, 0, 2), Interval("b", 128, 1, 3)]
    good = plan_arena(ivs)
    bad = type(good)(offsets={"a": 0, "b": 64}, sizes=good.sizes, peak=256, total=256, lower_bound=256)
    with pytest.raises(AssertionError, match="overlap: 'a'"):
        verify_no_overlap(ivs, bad)


def test_arena_mode_turns_a_planning_bug_into_a_wrong_answer(monkeypatch):
    """If the planner put every value at offset 0, the reference itself would compute garbage."""
    feeds = {"A": np.full((2, 3), 3, np.float32), "B": np.full((2, 3), -1, np.float32)}
    want = refmnn.Session(add_relu_model()).run(feeds)["Y"]

    def broken(ivs, *, reuse=True):
        arena = plan_arena(ivs, reuse=reuse)
        return type(arena)({k: 0 for k in arena.offsets}, arena.sizes, arena.peak, arena.total,
                           arena.lower_bound)

    monkeypatch.setattr(plan_module, "plan_arena", broken)
    monkeypatch.setattr(plan_module, "verify_no_overlap", lambda ivs, arena: None)
    got = refmnn.Session(add_relu_model()).run(feeds)["Y"]
    assert not np.array_equal(got, want)


def _reference_kernel(op: str, shapes: list[tuple[int, ...]], out_shape: tuple[int, ...],
                      attrs: dict | None = None) -> ReferenceKernel:
    registry = default_registry()
    node = Node(name=f"{op.lower()}0", op=op, domain="",
                inputs=tuple(f"x{i}" for i in range(len(shapes))), outputs=("y",),
                attrs=attrs or {})
    opdef = registry.resolve("", op, 17)
    f32 = lambda shape: TensorType(DType.float32, shape)  # noqa: E731
    spec = NodeSpec(node=node, opdef=opdef, opset=17, attrs=opdef.bind_attrs(node.attrs),
                    inputs=tuple(f32(s) for s in shapes), outputs=(f32(out_shape),), constants={})
    return ReferenceKernel(spec, OpContext(node, 17))


@pytest.mark.parametrize("op, shapes, out_shape, expect", [
    ("Add", [(2, 3), (3,)], (2, 3), lambda a, b: a + b),
    ("Div", [(2, 3), (2, 1)], (2, 3), lambda a, b: a / b),
    ("MatMul", [(2, 4, 3), (3, 5)], (2, 4, 5), lambda a, b: a @ b),
    ("Erf", [(3, 70000)], (3, 70000), None),  # more than one block of the blockwise erf
])
def test_reference_computes_into_the_planned_view_and_still_checks_the_plan(op, shapes, out_shape,
                                                                            expect):
    """Ops with an ``out`` parameter write their result straight into the planned (arena) view,
    with no copy; a view that does not match the result is never written through NumPy's
    broadcasting: the plan check reports it and leaves the view alone."""
    assert default_registry().resolve("", op, 17).writes_out
    rng = np.random.default_rng(0)
    xs = [rng.uniform(0.5, 2, s).astype(np.float32) for s in shapes]
    kernel = _reference_kernel(op, shapes, out_shape)
    arena = np.zeros(np.prod(out_shape) + 16, np.float32)
    view = arena[16:].reshape(out_shape)  # an offset view, as the arena hands out
    kernel.run(xs, [view], None)
    want = expect(*xs) if expect else np.asarray(refmnn.ops.elementwise.erf(xs[0]))
    np.testing.assert_array_equal(view, want)
    assert not arena[:16].any()

    wrong = np.full((2, *out_shape), 7, np.float32)  # a plan that got the shape wrong
    with pytest.raises(ShapeError, match="but the plan"):
        kernel.run(xs, [wrong], None)
    assert (wrong == 7).all()


@pytest.mark.parametrize("op, opset, shapes, attrs", [
    ("Conv", 11, [(2, 4, 7, 6), (6, 2, 3, 3), (6,)], {"group": 2, "pads": [1, 0, 1, 2]}),
    ("Conv", 11, [(1, 5, 4, 4), (3, 5, 1, 1)], {}),  # 1x1: the columns are the input itself
    ("Conv", 11, [(3, 1, 5, 5), (3, 1, 3, 3)], {"group": 1, "strides": [2, 2]}),
    ("Conv", 11, [(0, 2, 5, 5), (3, 2, 3, 3), (3,)], {}),  # an empty batch
    ("Clip", 13, [(3, 4), (), ()], {}),
    ("Clip", 6, [(3, 4)], {"min": -0.5, "max": 0.5}),
    ("Softmax", 13, [(2, 3, 5)], {"axis": 1}),
    ("LayerNormalization", 17, [(2, 3, 5), (5,), (5,)], {"axis": -1}),
])
def test_reference_ops_that_compute_into_out_return_it(op, opset, shapes, attrs):
    """Conv, Clip, Softmax and LayerNormalization write their (first) result straight into a
    fitting ``out`` -- the planned arena view, so the reference backend copies nothing -- and
    compute the same values as without it; an ``out`` that does not fit is left alone."""
    opdef = default_registry().resolve("", op, opset)
    assert opdef.writes_out
    rng = np.random.default_rng(1)
    xs = [np.asarray(rng.uniform(-1, 1, s).astype(np.float32)) for s in shapes]
    if op == "Clip" and opset == 13:
        xs[1], xs[2] = np.float32(-0.25).reshape(()), np.float32(0.5).reshape(())
    bound = opdef.bind_attrs(attrs)
    plain = opdef.reference(*xs, **bound)
    plain = plain[0] if isinstance(plain, tuple) else plain
    out = np.full(plain.shape, np.nan, np.float32)
    got = opdef.reference(*xs, **bound, out=out)
    assert (got[0] if isinstance(got, tuple) else got) is out
    np.testing.assert_array_equal(out, plain)
    wrong = np.full((1, *plain.shape), 7, np.float32)
    got = opdef.reference(*xs, **bound, out=wrong)
    assert (got[0] if isinstance(got, tuple) else got) is not wrong and (wrong == 7).all()


def test_into_accepts_only_an_exact_shape_and_dtype():
    buffer = np.zeros((2, 3), np.float32)
    assert into(buffer, (2, 3), np.float32) is buffer
    assert into(buffer, (3, 2), np.float32) is None
    assert into(buffer, (2, 3), np.float64) is None
    assert into(None, (2, 3), np.float32) is None


def test_plan_is_cached_per_shape_signature(monkeypatch):
    calls = []
    original = plan_module.compile_plan

    def counting(*args, **kwargs):
        calls.append(args[1])
        return original(*args, **kwargs)

    monkeypatch.setattr("refmnn.session.compile_plan", counting)
    session = refmnn.Session(add_relu_model(("N", 3)))
    for n in (2, 2, 5, 2, 5):
        x = np.ones((n, 3), np.float32)
        session.run({"A": x, "B": x})
    assert len(calls) == 2
    assert session.resize({"A": (2, 3), "B": (2, 3)}) is session.plan
    assert len(calls) == 2


def test_explain_reports_memory_and_json_is_deterministic(tmp_path):
    session = refmnn.Session(add_relu_model())
    table = session.explain()
    assert "add0" in table and "Add@17" in table and "arena peak" in table and "lower bound" in table
    first = session.plan.to_json()
    again = refmnn.Session(add_relu_model()).resize().to_json()
    assert first == again
    data = json.loads(first)
    assert [s["node"] for s in data["steps"]] == ["add0", "relu0"]
    assert data["memory"]["reference"]["peak"] <= data["memory"]["reference"]["total"]


def test_explain_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    from refmnn.cli import main

    path = tmp_path / "m.onnx"
    path.write_bytes(add_relu_model(("N", 3)).SerializeToString())
    png = tmp_path / "plan.png"
    assert main(["explain", str(path), "--shape", "A=4,3", "--shape", "B=4,3", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_explain_without_shapes_for_symbolic_inputs_names_them():
    session = refmnn.Session(add_relu_model(("N", 3)))
    with pytest.raises(refmnn.UsageError, match="symbolic or unknown dims \\['N'\\]"):
        session.explain()


def test_shape_chains_are_folded_at_known_shapes():
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    nodes = [helper.make_node("Shape", ["X"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
             helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"], name="unsq"),
             helper.make_node("Concat", ["n1", "minus1"], ["newshape"], name="concat", axis=0),
             helper.make_node("Reshape", ["X", "newshape"], ["Y"], name="reshape")]
    inits = [helper.make_tensor("zero", i64, [], [0]), helper.make_tensor("zero1", i64, [1], [0]),
             helper.make_tensor("minus1", i64, [1], [-1])]
    model = make_model(nodes, [("X", f, ["N", 2, 3])], [("Y", f, ["N", 6])], initializers=inits)
    session = refmnn.Session(model)
    x = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    np.testing.assert_array_equal(session.run({"X": x})["Y"], x.reshape(4, 6))
    ran = [s.node.op for s in session.plan.steps]
    assert ran == ["Reshape"]
    assert set(session.plan.folded) == {"s", "n", "n1", "newshape"}
    everything = session.run({"X": x}, intermediates=True)
    np.testing.assert_array_equal(everything["newshape"], [4, -1])


def _reshape_chain_model():
    """R = Relu(X) dies at the Reshape that aliases it; S (R's bytes) is read only at the end,
    after four new values of R's size: planned without merging the live ranges, one of them
    would land on R's bytes (free after the Reshape) and overwrite S."""
    f = TensorProto.FLOAT
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [6, 4])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    nodes = [
        helper.make_node("Relu", ["X"], ["R"], name="relu"),
        helper.make_node("Reshape", ["R", "shape"], ["S"], name="reshape"),
        helper.make_node("Unsqueeze", ["S", "axes"], ["U"], name="unsqueeze"),
        helper.make_node("Flatten", ["U"], ["F"], name="flatten", axis=1),
        helper.make_node("Transpose", ["X"], ["T"], name="transpose", perm=[1, 0, 2]),
        helper.make_node("Sigmoid", ["T"], ["A"], name="a"),
        helper.make_node("Neg", ["A"], ["B"], name="b"),
        helper.make_node("Exp", ["B"], ["C"], name="c"),
        helper.make_node("Flatten", ["C"], ["D"], name="d", axis=0),
        helper.make_node("Mul", ["F", "D"], ["Y"], name="y"),
    ]
    return make_model(nodes, [("X", f, (2, 3, 4))], [("Y", f, (1, 24))],
                      initializers=[shape, axes])


@pytest.mark.parametrize("backend", ["reference", "numba", "opencl"])
def test_reshapes_are_planned_as_aliases_of_their_input(backend):
    """Reshape-like steps (and the Rasters that lower them) run nothing: the output is the
    input's bytes at the same offset, live for the union of both ranges; a Transpose (a real
    permutation) still runs. Results equal the reference without an arena (no planning)."""
    require_backend(backend)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    want = refmnn.Session(_reshape_chain_model(), arena=False).run({"X": x})["Y"]
    session = refmnn.Session(_reshape_chain_model(), backends=(backend,))
    got = session.run({"X": x})["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    if backend == "reference":
        np.testing.assert_array_equal(got, want)
    plan = session.plan
    steps = {s.node.name: s for s in plan.steps if isinstance(s, plan_module.RunStep)}
    aliased = sorted(name for name, s in steps.items() if s.scheme == plan_module.ALIAS)
    assert [steps[n].node.op for n in aliased] == \
        (["Flatten", "Flatten", "Reshape", "Unsqueeze"] if backend == "reference" else ["Raster"] * 4)
    transpose = [s for s in steps.values() if s.node.name.startswith("transpose")]
    assert transpose and all(s.scheme != plan_module.ALIAS for s in transpose)
    group = [steps[n].outputs[0] for n in aliased if not n.startswith("d")] + ["R"]
    assert len({plan.slots[k].offset for k in group}) == 1
    r, c = plan.slots["R"], plan.slots["C"]
    # C is written after R's own last read: only the merged live range keeps it off R's bytes
    assert c.first > r.last
    assert r.offset >= c.offset + c.nbytes or c.offset >= r.offset + r.nbytes
    assert "alias" in session.explain()


def test_only_backends_with_linear_memory_get_aliases():
    """A backend keeps running its reshapes unless it declares ``linear_memory`` (an image or
    blocked layout cannot alias two shapes onto the same bytes)."""
    from tests.test_lowering import CoreBackend

    class LinearCore(CoreBackend):
        name = "linear-core"
        linear_memory = True

    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    want = refmnn.Session(_reshape_chain_model(), arena=False).run({"X": x})["Y"]
    for cls, aliased in ((CoreBackend, 0), (LinearCore, 4)):
        session = refmnn.Session(_reshape_chain_model(), backends=(cls.name,),
                                 backend_registry=BackendRegistry(extra=[cls]))
        np.testing.assert_array_equal(session.run({"X": x})["Y"], want)
        steps = [s for s in session.plan.steps if isinstance(s, plan_module.RunStep)]
        assert {s.backend for s in steps} == {cls.name}
        assert sum(s.scheme == plan_module.ALIAS for s in steps) == aliased, session.explain()


def _runs_model():
    """Concat(A, B) along channels with batch 1 (A and B written in place into C), Split of
    Exp(C) (P and Q runs of E), Q read only at the end after four new values of its size; and
    two Concats that must copy: batch 2 (the inputs are not runs of the output) and 12-byte runs
    (not 64-byte aligned)."""
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("Relu", ["X"], ["A"], name="a"),
        helper.make_node("Sigmoid", ["X"], ["B"], name="b"),
        helper.make_node("Concat", ["A", "B"], ["C"], name="concat", axis=1),
        helper.make_node("Exp", ["C"], ["E"], name="exp"),
        helper.make_node("Split", ["E"], ["P", "Q"], name="split", axis=1, num_outputs=2),
        helper.make_node("Neg", ["P"], ["T1"], name="t1"),
        helper.make_node("Abs", ["T1"], ["T2"], name="t2"),
        helper.make_node("Sqrt", ["T2"], ["T3"], name="t3"),
        helper.make_node("Neg", ["T3"], ["T4"], name="t4"),
        helper.make_node("Mul", ["T4", "Q"], ["Y"], name="y"),
        helper.make_node("Relu", ["Z"], ["ZR"], name="zr"),
        helper.make_node("Concat", ["ZR", "Z"], ["ZC"], name="concat_batch", axis=1),
        helper.make_node("Relu", ["W"], ["WR"], name="wr"),
        helper.make_node("Concat", ["WR", "W"], ["WC"], name="concat_odd", axis=1),
    ]
    return make_model(nodes, [("X", f, (1, 16, 2, 2)), ("Z", f, (2, 16)), ("W", f, (1, 3))],
                      [("Y", f, (1, 16, 2, 2)), ("ZC", f, (2, 32)), ("WC", f, (1, 6))], opset=18)


@pytest.mark.parametrize("backend", ["reference", "numba", "opencl"])
def test_concat_inputs_and_split_outputs_are_planned_as_runs_of_one_value(backend):
    """A Concat whose inputs are aligned runs of its output runs nothing (the producers write
    into the output's bytes), so does a Split whose outputs are runs of its input; the group
    lives as long as any of its values. Batch > 1 and unaligned runs still copy."""
    require_backend(backend)
    rng = np.random.default_rng(2)
    feeds = {"X": rng.standard_normal((1, 16, 2, 2)).astype(np.float32),
             "Z": rng.standard_normal((2, 16)).astype(np.float32),
             "W": rng.standard_normal((1, 3)).astype(np.float32)}
    want = refmnn.Session(_runs_model(), arena=False).run(feeds)
    session = refmnn.Session(_runs_model(), backends=(backend,))
    got = session.run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-7)
    plan = session.plan
    steps = [s for s in plan.steps if isinstance(s, plan_module.RunStep)]
    idle = {s.node.name.split("/")[0] for s in steps if s.scheme == plan_module.ALIAS}
    assert idle == {"concat", "split"}, session.explain()
    slots = plan.slots
    assert slots["A"].offset == slots["C"].offset and slots["B"].offset == slots["C"].offset + 256
    assert slots["P"].offset == slots["E"].offset and slots["Q"].offset == slots["E"].offset + 256
    q, t4 = slots["Q"], slots["T4"]
    # T4 is written after E's own last read: only the group's merged live range keeps it off Q
    assert t4.first > slots["E"].last
    assert q.offset >= t4.offset + t4.nbytes or t4.offset >= q.offset + q.nbytes


@pytest.mark.parametrize("backend", ["numba", "opencl"])
def test_a_node_with_an_empty_tensor_is_the_references(backend):
    """A batch of 0: every node that reads or writes an empty tensor is placed on the
    reference (nothing to compute; kernels need not handle empty tensors), and the outputs
    are the reference's. MobileNetV2 with a dynamic batch, run on a batch of 0, used to stop
    with a ZeroDivisionError in numba's blocked 1x1 convolution's prepare."""
    from tests.test_blocked import _inverted_residual

    require_backend(backend)
    model, feeds = _inverted_residual()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "n"
    session = refmnn.Session(model, backends=(backend,), check=False)
    reference = refmnn.Session(model, check=False)
    steps = {}
    for batch in (2, 0, 2):
        x = np.resize(feeds["X"], (batch, *feeds["X"].shape[1:]))
        got = session.run({"X": x})["Y"]
        want = reference.run({"X": x})["Y"]
        assert got.shape == want.shape == (batch, 16, 1, 1)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        steps[batch] = {s.node.name: s.backend for s in session.plan.steps
                        if isinstance(s, plan_module.RunStep)}
    assert set(steps[0].values()) == {"reference"}
    assert "reference" not in {steps[2][name] for name in ("stem", "dw")}


def test_a_kernel_that_fails_to_prepare_is_an_op_error_naming_the_node(monkeypatch):
    def broken(self, spec):
        raise ZeroDivisionError("integer division or modulo by zero")

    monkeypatch.setattr(ReferenceKernel, "prepare", broken)
    session = refmnn.Session(add_relu_model())
    feeds = {k: np.ones((2, 3), np.float32) for k in ("A", "B")}
    with pytest.raises(refmnn.OpError, match=r"node 'add0' \(Add, opset \d+\) with inputs "
                                             r"\(float32\[2,3\], float32\[2,3\]\): backend "
                                             r"'reference' could not prepare scheme reference: "
                                             r"ZeroDivisionError"):
        session.run(feeds)
