"""The zoo on the reference (arena mode) against onnxruntime, and its memory-plan figures, as
either of torch's exporters writes it (TorchScript at opset 17, and dynamo: torch's default
since 2.9, with its weights in an external-data file)."""

from __future__ import annotations

import numpy as np
import pytest

import refmnn
from refmnn import zoo
from refmnn.demo import rel_l2

pytest.importorskip("torch", reason="the zoo is built with torch: pip install torch==2.13.0")
ort = pytest.importorskip("onnxruntime", reason="the comparison needs onnxruntime")


@pytest.fixture(scope="module",
                params=[(n, e) for e in zoo.EXPORTERS for n in zoo.names()],
                ids=[n if e == zoo.EXPORTERS[0] else f"{n}@{e}"
                     for e in zoo.EXPORTERS for n in zoo.names()])
def zoo_model(request):
    name, exporter = request.param
    if exporter == "dynamo":
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript: "
                            "pip install onnxscript")
    return name, zoo.export_onnx(name, exporter=exporter), zoo.make_inputs(name)


def test_reference_matches_onnxruntime(zoo_model):
    name, path, feeds = zoo_model
    session = refmnn.Session(path)
    got = session.run(feeds)
    runtime = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in runtime.get_outputs()]
    want = dict(zip(names, runtime.run(names, feeds), strict=True))
    assert list(got) == names
    for key in names:
        assert got[key].shape == want[key].shape and got[key].dtype == want[key].dtype
        assert rel_l2(got[key], want[key]) <= 1e-5, f"{name}:{key} relative L2 {rel_l2(got[key], want[key]):.2e}"


def test_arena_peak_is_within_5_percent_of_the_lower_bound(zoo_model):
    name, path, feeds = zoo_model
    session = refmnn.Session(path)
    plan = session.resize({k: v.shape for k, v in feeds.items()})
    arena = plan.arenas["reference"]
    assert arena.lower_bound <= arena.peak <= 1.05 * arena.lower_bound, session.explain()
    assert arena.peak < arena.total
    assert all(step.backend == "reference" for step in plan.steps)
    text = plan.table()
    assert "arena peak" in text and "sum of activations" in text and "lower bound" in text


def test_intermediates_cover_every_computed_value(zoo_model):
    name, path, feeds = zoo_model
    session = refmnn.Session(path)
    plain = session.run(feeds)
    seen = []
    everything = session.run(feeds, intermediates=True,
                             callback=lambda node, op, ins, outs: seen.append(node))
    for key, value in plain.items():
        np.testing.assert_array_equal(everything[key], value)
    ran = [s.node.name for s in session.plan.steps if hasattr(s, "node")]
    assert seen == ran
    produced = {o for s in session.plan.steps if hasattr(s, "node") for o in s.node.outputs if o}
    assert produced <= set(everything)
