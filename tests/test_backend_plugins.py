"""Backends as plugins: a third-party distribution, installed for real, runs part of a model.

The example backend of docs/example_backend/acme_backend.py is installed as a distribution
(its own dist-info with an entry point in the ``refmnn.backends`` group) in a temporary folder
put on the import path, exactly as ``pip install acme-backend`` would leave it.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import refmnn
from refmnn.backends import BackendRegistry
from refmnn.cli import main
from tests.helpers import install_distribution, make_model

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "example_backend" / "acme_backend.py"


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    site = tmp_path / "site-packages"
    site.mkdir()
    shutil.copy(EXAMPLE, site / "acme_backend.py")
    install_distribution(site, "acme-backend", "1.0", '[refmnn.backends]\nacme = acme_backend:AcmeBackend\n', {})
    install_distribution(site, "broken-backend", "0.1", '[refmnn.backends]\nbroken = broken_backend:Broken\n',
             {"broken_backend": "raise ImportError('libbroken.so: cannot open shared object file')\n"})
    install_distribution(site, "wrong-backend", "0.2", '[refmnn.backends]\nwrong = wrong_backend:NotABackend\n',
             {"wrong_backend": "class NotABackend:\n    pass\n"})
    monkeypatch.syspath_prepend(str(site))
    yield site
    for module in ("acme_backend", "broken_backend", "wrong_backend"):
        sys.modules.pop(module, None)


def _model():
    """Y = Relu(A @ W + b); Z = Softmax(Y) (not in acme: reference); out = Z + Z (acme)."""
    f = TensorProto.FLOAT
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 5)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal((5,)).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["A", "W"], ["AW"], name="matmul"),
             helper.make_node("Add", ["AW", "b"], ["H"], name="add_bias"),
             helper.make_node("Relu", ["H"], ["Y"], name="relu"),
             helper.make_node("Softmax", ["Y"], ["Z"], name="softmax", axis=-1),
             helper.make_node("Add", ["Z", "Z"], ["out"], name="double")]
    return make_model(nodes, [("A", f, [4, 8])], [("out", f, [4, 5])], initializers=[w, b])


def test_registry_lists_plugins_with_provenance_and_reasons(plugins):
    registry = BackendRegistry()
    infos = {info.name: info for info in registry}
    assert infos["acme"].available and infos["acme"].distribution == "acme-backend"
    assert infos["acme"].version == "1.0"
    assert not infos["broken"].available and "libbroken.so" in infos["broken"].reason
    assert not infos["wrong"].available and "not a refmnn.backends.Backend subclass" in infos["wrong"].reason
    assert infos["reference"].available


def test_refmnn_backends_command_lists_every_plugin(plugins, capsys):
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "acme" in out and "acme-backend" in out and "1.0" in out
    assert "unavailable: import failed: ImportError: libbroken.so" in out
    assert "reference" in out


def test_model_runs_across_plugin_and_reference(plugins):
    feeds = {"A": np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)}
    alone = refmnn.Session(_model()).run(feeds)["out"]
    hybrid_session = refmnn.Session(_model(), backends=("acme",))
    hybrid = hybrid_session.run(feeds)["out"]
    np.testing.assert_allclose(hybrid, alone, rtol=1e-6, atol=1e-7)
    plan = hybrid_session.plan
    placed = {s.node.name: s.backend for s in plan.steps if hasattr(s, "node")}
    assert placed == {"matmul": "acme", "add_bias": "acme", "relu": "acme",
                      "softmax": "reference", "double": "acme"}
    copies = [(s.value, s.src_backend, s.dst_backend) for s in plan.steps if not hasattr(s, "node")]
    assert copies == [("A", "reference", "acme"), ("Y", "acme", "reference"), ("Z", "reference", "acme")]
    table = hybrid_session.explain()
    assert "acme" in table and "copy Y" in table and "reference->acme" in table
    assert "blocked" in table  # the scheme column names acme's MatMul scheme


def test_plugin_scheme_that_does_not_apply_falls_back(plugins):
    f = TensorProto.FLOAT
    model = make_model([helper.make_node("MatMul", ["A", "B"], ["Y"], name="batched")],
                       [("A", f, [2, 3, 4]), ("B", f, [2, 4, 5])], [("Y", f, [2, 3, 5])])
    session = refmnn.Session(model, backends=("acme",))
    rng = np.random.default_rng(0)
    feeds = {"A": rng.standard_normal((2, 3, 4)).astype(np.float32),
             "B": rng.standard_normal((2, 4, 5)).astype(np.float32)}
    np.testing.assert_allclose(session.run(feeds)["Y"], feeds["A"] @ feeds["B"], rtol=1e-6)
    (step,) = session.plan.steps
    assert step.backend == "reference" and "acme: no kernel" in step.reason


def test_unavailable_backend_is_a_clear_error(plugins):
    with pytest.raises(refmnn.UsageError, match="broken.*import failed"):
        refmnn.Session(_model(), backends=("broken",))


def test_explain_command_shows_placement_and_copies(plugins, tmp_path, capsys):
    path = tmp_path / "m.onnx"
    path.write_bytes(_model().SerializeToString())
    assert main(["explain", str(path), "--backends", "acme,reference"]) == 0
    out = capsys.readouterr().out
    assert "copy Y" in out and "acme->reference" in out and "placement: acme 4 node(s), reference 1 node(s); 3 copy step(s)" in out
    assert main(["explain", str(path), "--backends", "acme", "--json"]) == 0
    first = capsys.readouterr().out
    assert main(["explain", str(path), "--backends", "acme", "--json"]) == 0
    assert capsys.readouterr().out == first
