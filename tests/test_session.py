"""Session: model sources, outputs, intermediates, callbacks and feed checking."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import refmnn
from refmnn import InputError, OpError, ShapeError
from tests.helpers import add_relu_model, gelu_chain_model, make_model, require_backend


def _feeds(shape=(2, 3), seed=0):
    rng = np.random.default_rng(seed)
    return {"A": rng.standard_normal(shape).astype(np.float32),
            "B": rng.standard_normal(shape).astype(np.float32)}


def _expected(feeds):
    return np.maximum(feeds["A"] + feeds["B"], 0)


@pytest.mark.parametrize("kind", ["path", "bytes", "proto", "graph"])
def test_session_accepts_every_model_source(kind, tmp_path):
    model = add_relu_model()
    if kind == "path":
        path = tmp_path / "m.onnx"
        path.write_bytes(model.SerializeToString())
        source = str(path)
    elif kind == "bytes":
        source = model.SerializeToString()
    elif kind == "proto":
        source = model
    else:
        source = refmnn.load(model)
    feeds = _feeds()
    out = refmnn.Session(source).run(feeds)
    assert list(out) == ["Y"]
    np.testing.assert_array_equal(out["Y"], _expected(feeds))


def test_outputs_come_in_graph_order():
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Relu", ["A"], ["second"], name="r"),
             helper.make_node("Add", ["A", "A"], ["first"], name="a")]
    model = make_model(nodes, [("A", f, [3])], [("first", f, [3]), ("second", f, [3])])
    out = refmnn.Session(model).run({"A": np.array([-1, 0, 2], np.float32)})
    assert list(out) == ["first", "second"]
    np.testing.assert_array_equal(out["first"], [-2, 0, 4])


def test_intermediates_and_callback():
    feeds = _feeds()
    seen = []
    sess = refmnn.Session(add_relu_model())
    out = sess.run(feeds, intermediates=True,
                   callback=lambda name, op, ins, outs: seen.append((name, op, len(ins), outs[0].shape)))
    assert seen == [("add0", "Add", 2, (2, 3)), ("relu0", "Relu", 1, (2, 3))]
    np.testing.assert_array_equal(out["S"], feeds["A"] + feeds["B"])
    assert list(out)[0] == "Y"


@pytest.mark.parametrize("optimize", [True, None])
def test_intermediates_after_a_fusion_drops_folded_constants(optimize):
    """A constant folded at plan time (sqrt(2), 0.5) that a fusion then leaves unread (the
    Div/Erf/Add/Mul/Mul chain becomes one Gelu) is dropped from the graph; the intermediates
    list the folded values the plan still holds. It was a raw KeyError (found while reading a
    finding of tools/fuzz_models.py --opsets --values --backend opencl with intermediates)."""
    model = gelu_chain_model()
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    session = refmnn.Session(model, optimize=optimize)
    out = session.run({"x": x}, intermediates=True)
    want = refmnn.Session(model, optimize=False).run({"x": x})["y"]
    np.testing.assert_allclose(out["y"], want, rtol=1e-6, atol=1e-7)
    assert "half" not in out or out["half"] == np.float32(0.5)


def test_missing_and_unknown_feeds_are_named():
    sess = refmnn.Session(add_relu_model())
    with pytest.raises(InputError, match=r"missing feed\(s\) \['B'\].*unknown input name\(s\) \['C'\]"):
        sess.run({"A": np.zeros((2, 3), np.float32), "C": np.zeros(1)})


@pytest.mark.parametrize("feeds", ["AB", [np.ones((2, 3), np.float32)] * 2, None])
def test_feeds_that_are_not_a_mapping_are_an_input_error(feeds):
    with pytest.raises(InputError, match=r"feeds must map input names to values, got "
                                         r"(str|list|NoneType); the model's inputs are \['A', 'B'\]"):
        refmnn.Session(add_relu_model()).run(feeds)


def test_wrong_dtype_is_an_input_error():
    sess = refmnn.Session(add_relu_model())
    feeds = _feeds()
    feeds["A"] = feeds["A"].astype(np.float64)
    with pytest.raises(InputError, match="input 'A': dtype float64 given, the model declares float32"):
        sess.run(feeds)


def test_shape_contradicting_declaration_is_an_input_error():
    sess = refmnn.Session(add_relu_model())
    with pytest.raises(InputError, match=r"input 'A': shape \[2, 4\] contradicts"):
        sess.run(_feeds((2, 4)))


def test_symbolic_dims_bind_per_run_and_consistently():
    sess = refmnn.Session(add_relu_model(("N", 3)))
    for n in (1, 5):
        feeds = _feeds((n, 3))
        np.testing.assert_array_equal(sess.run(feeds)["Y"], _expected(feeds))
    feeds = {"A": np.zeros((2, 3), np.float32), "B": np.zeros((4, 3), np.float32)}
    with pytest.raises(InputError, match="dim 'N' is 4 here but 2 in another input"):
        sess.run(feeds)


def test_runtime_failure_names_node_op_opset_and_shapes():
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Add", ["A", "B"], ["Y"], name="the_add")]
    model = make_model(nodes, [("A", f, ["N"]), ("B", f, ["M"])], [("Y", f, ["K"])])
    sess = refmnn.Session(model)
    with pytest.raises((OpError, ShapeError)) as info:
        sess.run({"A": np.zeros(3, np.float32), "B": np.zeros(4, np.float32)})
    message = str(info.value)
    for part in ("the_add", "Add", "opset 17", "float32[3]", "float32[4]"):
        assert part in message


def test_shape_contradiction_inside_graph_is_found_at_load():
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Add", ["A", "B"], ["Y"], name="bad_add")]
    model = make_model(nodes, [("A", f, [2, 3]), ("B", f, [4, 5])], [("Y", f, ["K"])])
    with pytest.raises(ShapeError, match="bad_add.*cannot broadcast"):
        refmnn.Session(model)


def test_unknown_backend_is_a_usage_error():
    with pytest.raises(refmnn.UsageError, match="no such backend is installed"):
        refmnn.Session(add_relu_model(), backends=("warp-drive",))


def test_session_runs_are_repeatable_and_do_not_modify_feeds():
    sess = refmnn.Session(add_relu_model())
    feeds = _feeds()
    copies = {k: v.copy() for k, v in feeds.items()}
    first = sess.run(feeds)["Y"]
    second = sess.run(feeds)["Y"]
    np.testing.assert_array_equal(first, second)
    for name in feeds:
        np.testing.assert_array_equal(feeds[name], copies[name])


def _chain_model(size: int = 48, depth: int = 6):
    """x [size, size] -> depth x (MatMul by a fixed matrix, Add x, Relu): enough steps, each
    reading the arena, for runs on two threads to interleave."""
    f = TensorProto.FLOAT
    rng = np.random.default_rng(3)
    weights = rng.standard_normal((size, size)).astype(np.float32) / np.sqrt(size)
    nodes, inits, prev = [], [helper.make_tensor("W", f, [size, size], weights.ravel())], "x"
    for i in range(depth):
        nodes += [helper.make_node("MatMul", [prev, "W"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", "x"], [f"a{i}"]),
                  helper.make_node("Relu", [f"a{i}"], [f"r{i}"])]
        prev = f"r{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    return make_model(nodes, [("x", f, [size, size])], [("y", f, [size, size])],
                      initializers=inits)


@pytest.mark.parametrize("backend", ["reference", "numba"])
def test_threads_sharing_a_session_each_get_their_own_answers(backend):
    """Runs of one Session from several threads take turns: each gets its own feeds' outputs
    (the runs share the plan's arena). The GIL switch interval is shortened so that the
    threads' runs interleave step by step if nothing keeps them apart."""
    import sys
    import threading

    require_backend(backend)
    sess = refmnn.Session(_chain_model(), backends=(backend,))
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((48, 48)).astype(np.float32) for _ in range(4)]
    want = [sess.run({"x": x})["y"] for x in xs]
    assert not np.array_equal(want[0], want[1])
    wrong: list[tuple[int, int]] = []

    def work(thread: int) -> None:
        for i in range(40):
            k = (thread + i) % len(xs)
            if not np.array_equal(sess.run({"x": xs[k]})["y"], want[k]):
                wrong.append((thread, i))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        sys.setswitchinterval(interval)
    assert not any(t.is_alive() for t in threads)
    assert wrong == []


def test_a_run_inside_its_own_callback_is_refused_not_hung():
    sess = refmnn.Session(add_relu_model())
    feeds = _feeds()

    def nested(name, op, ins, outs):
        sess.run(feeds)

    with pytest.raises(refmnn.errors.UsageError, match="during this Session's own run"):
        sess.run(feeds, callback=nested)
    np.testing.assert_array_equal(sess.run(feeds)["Y"], _expected(feeds))  # still usable


def test_ieee_overflow_is_an_answer_not_a_warning():
    """3e38 * 10 = inf and inf - inf = NaN are the ops' results; a run does not warn about
    them (under warnings-as-errors it used to fail with an OpError on valid input)."""
    import warnings

    f = TensorProto.FLOAT
    nodes = [helper.make_node("Mul", ["A", "A"], ["M"], name="mul"),
             helper.make_node("Sub", ["M", "M"], ["Y"], name="sub")]
    model = make_model(nodes, [("A", f, [2])], [("Y", f, [2]), ("M", f, [2])])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = refmnn.Session(model).run({"A": np.array([3e38, 2.0], np.float32)})
    np.testing.assert_array_equal(out["M"], [np.inf, 4.0])
    assert np.isnan(out["Y"][0]) and out["Y"][1] == 0


@pytest.mark.parametrize("op", ["GlobalAveragePool", "MeanVarianceNormalization"])
def test_the_mean_of_nothing_is_nan_not_a_warning(op):
    """np.mean of an empty slice warns through Python's warnings (not NumPy's error state), so
    a valid GlobalAveragePool over an empty image failed with an OpError under
    warnings-as-errors. Now the reductions divide the sum by the count themselves."""
    import warnings

    f = TensorProto.FLOAT
    shape = [1, 3, 0, 0] if op == "GlobalAveragePool" else [0, 3, 2, 2]
    out_shape = [1, 3, 1, 1] if op == "GlobalAveragePool" else shape
    model = make_model([helper.make_node(op, ["X"], ["Y"], name="n")], [("X", f, shape)],
                       [("Y", f, out_shape)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = refmnn.Session(model).run({"X": np.zeros(shape, np.float32)})["Y"]
    assert y.shape == tuple(out_shape) and np.isnan(y).all()


def test_an_input_with_an_initializer_is_a_default_a_feed_replaces():
    """ONNX IR: "an initializer with the name of a graph input specifies a default value for
    it" (IR 3 models list every initializer as an input). Without a feed the initializer is
    used; a feed replaces it (it used to be refused as an unknown input); the plans of both
    are kept apart."""
    from onnx import numpy_helper

    f = TensorProto.FLOAT
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    weight = np.arange(6, dtype=np.float32).reshape(3, 2)
    model = make_model(nodes, [("x", f, [1, 3]), ("w", f, [3, 2])], [("y", f, [1, 2])],
                       initializers=[numpy_helper.from_array(weight, "w")], opset=9)
    model.ir_version = 3
    x = np.ones((1, 3), np.float32)
    other = np.ones((3, 2), np.float32)
    for backend in ("reference", "numba"):
        if not refmnn.backends.BackendRegistry().info(backend).available:
            continue
        sess = refmnn.Session(model, backends=(backend,))
        assert [v.name for v in sess.inputs] == ["x"]
        np.testing.assert_array_equal(sess.run({"x": x})["y"], x @ weight)
        np.testing.assert_array_equal(sess.run({"x": x, "w": other})["y"], x @ other)
        np.testing.assert_array_equal(sess.run({"x": x})["y"], x @ weight)
        with pytest.raises(InputError, match="input 'w': dtype float64 given"):
            sess.run({"x": x, "w": other.astype(np.float64)})
        with pytest.raises(InputError, match=r"unknown input name\(s\) \['v'\].*with a "
                                             r"default, \['w'\]"):
            sess.run({"x": x, "v": other})
