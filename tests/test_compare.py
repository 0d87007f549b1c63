"""``refmnn compare``: per-value error tables, the first divergent node, golden sets.

A tiny plugin backend ("skewed") is installed as a real distribution, as in
tests/test_backend_plugins.py. It keeps its tensors in host memory and computes Conv, Relu,
Add, Concat and MatMul with each op's own reference, but adds a planted error to the output of
one chosen node (the class attribute ``PERTURB``), so compare must point at exactly that node.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from refmnn.cli import main
from refmnn.compare import (MISMATCH, OK, Tolerance, compare_backends, compare_values,
                            main as compare_main)
from tests.helpers import (add_relu_model, gelu_chain_model, install_distribution, make_model,
                           require_backend)

SKEWED = '''
import numpy as np
from refmnn.backends import Backend, Kernel, KernelDef, Probe, Scheme
from refmnn.backends.host import HostMemory
from refmnn.dtypes import DType


class ByReference(Kernel):
    """The op's own reference, written into the planned output; PERTURB's output is skewed."""

    def __init__(self, spec):
        self.spec = spec

    def run(self, inputs, outputs, workspace):
        spec = self.spec
        result = np.asarray(spec.opdef.reference(*inputs, **spec.attrs))
        if spec.node.name == SkewedBackend.PERTURB:
            result = result + np.float32(0.25)
        np.copyto(outputs[0], result)


class SkewedBackend(HostMemory, Backend):
    name = "skewed"
    PERTURB = ""

    @classmethod
    def probe(cls):
        return Probe(True, "", "0.1", ("host",))

    def kernels(self):
        f32 = frozenset({DType.float32})
        scheme = Scheme("ref", lambda b, s: ByReference(s))
        return tuple(KernelDef(op, (scheme,), since=1, dtypes=f32)
                     for op in ("Conv", "Relu", "Add", "Concat", "MatMul"))

'''

PLANTED = "/features/features.4/squeeze/Conv"


@pytest.fixture
def skewed(tmp_path, monkeypatch):
    """The plugin installed in a temporary site folder; yields its backend class."""
    site = tmp_path / "site-packages"
    install_distribution(site, "skewed-backend", "0.1",
                         "[refmnn.backends]\nskewed = skewed_backend:SkewedBackend\n",
                         {"skewed_backend": SKEWED})
    monkeypatch.syspath_prepend(str(site))
    import skewed_backend

    yield skewed_backend.SkewedBackend
    sys.modules.pop("skewed_backend", None)


@pytest.fixture(scope="module")
def squeezenet() -> Path:
    pytest.importorskip("torch")
    from refmnn import zoo

    return zoo.export_onnx("squeezenet1_1")


@pytest.fixture
def small(tmp_path) -> Path:
    path = tmp_path / "add_relu.onnx"
    path.write_bytes(add_relu_model().SerializeToString())
    return path


# ---------------------------------------------------------------------------------------------
# value comparison


def test_compare_values_rules():
    tol = Tolerance(1e-5, 1e-4)
    a = np.array([1.0, 2.0, np.nan, np.inf], np.float32)
    assert compare_values(a, a.copy(), tol).status == OK
    near = a.copy()
    near[0] += 5e-5  # within atol + rtol*|b| = 1e-5 + 1e-4
    assert compare_values(near, a, tol).status == OK
    far = a.copy()
    far[1] += 1e-3
    diff = compare_values(far, a, tol)
    assert diff.status == MISMATCH and diff.bad == 1
    assert diff.max_abs == pytest.approx(1e-3, rel=1e-3)
    nan_moved = a.copy()
    nan_moved[2] = 0
    assert compare_values(nan_moved, a, tol).status == "NONFINITE"
    assert compare_values(a[None], a, tol).status == "SHAPE"
    assert compare_values(a.astype(np.float64), a, tol).status == "DTYPE"
    ints = np.arange(4, dtype=np.int64)
    assert compare_values(ints, ints + np.arange(4) // 3, tol).status == MISMATCH
    assert compare_values([ints], [ints.copy()], tol).status == OK
    assert compare_values(None, None, tol).status == OK


def test_the_absolute_term_scales_with_the_value():
    """An element that cancels to near zero in a value of magnitude 15 may carry a float32
    sum's rounding error of its terms' size (1.5e-5 here: ResNet-18 on numba/opencl): noise
    under the scaled rule, a mismatch under the plain one. An error of the value's own scale
    still diverges under both."""
    want = np.array([15.0, -14.0, 0.05, 3.0], np.float32)
    noise = want.copy()
    noise[2] += 1.5e-5
    assert compare_values(noise, want, Tolerance()).status == OK
    assert compare_values(noise, want, Tolerance(scaled=False)).status == MISMATCH
    wrong = want.copy()
    wrong[2] += 2e-3
    for tol in (Tolerance(), Tolerance(scaled=False)):
        assert compare_values(wrong, want, tol).status == MISMATCH
    small = np.array([0.5, 0.05], np.float32)  # below 1 the scale stays 1: atol as given
    assert compare_values(small + np.float32(2e-5), small, Tolerance()).status == MISMATCH


# ---------------------------------------------------------------------------------------------
# the command


def test_identical_backends_agree(small, capsys):
    assert main(["compare", str(small), "--backends", "reference,reference"]) == 0
    out = capsys.readouterr().out
    assert "all 2 compared value(s) agree" in out and "add0" in out and "relu0" in out


def test_values_a_backend_fused_away_are_not_divergences(tmp_path, capsys):
    """numba fuses a Gelu chain (Div, Erf, Add, Mul, Mul) and folds its constants: those values
    exist on the reference only. They are listed as not computed by B, not counted as
    divergences; the chain's output is compared. Before, every such value was a divergence
    (SqueezeNet 1.1 against numba: "27 of 65 value(s) diverge", first at its first Conv), and
    the folded constants made the run a KeyError."""
    require_backend("numba")
    path = tmp_path / "gelu.onnx"
    path.write_bytes(gelu_chain_model().SerializeToString())
    assert main(["compare", str(path), "--backends", "reference,numba"]) == 0
    out = capsys.readouterr().out
    assert "all 1 compared value(s) agree (8 not computed by one side" in out
    assert "not-in-b" in out


def test_json_report_is_deterministic(small, capsys):
    assert main(["compare", str(small), "--backends", "reference,reference", "--json"]) == 0
    first = capsys.readouterr().out
    assert main(["compare", str(small), "--backends", "reference,reference", "--json"]) == 0
    assert capsys.readouterr().out == first
    report = json.loads(first)
    assert report["ok"] and report["first_divergence"] is None
    assert [v["node"] for v in report["values"]] == ["add0", "relu0"]


def test_planted_divergence_is_located(squeezenet, skewed, monkeypatch, capsys):
    monkeypatch.setattr(skewed, "PERTURB", PLANTED)
    assert main(["compare", str(squeezenet), "--backends", "reference,skewed"]) == 1
    out = capsys.readouterr().out
    assert f"first divergent node: {PLANTED} (Conv)" in out
    assert "inputs (all agree)" in out
    report = compare_backends(squeezenet, "reference", "skewed")
    assert not report.ok and report.first is not None
    assert report.first.node == PLANTED and report.first.inputs_agree
    names = [i.name for i in report.first.inputs]
    assert names[0] == "/features/features.3/Concat_output_0" and len(names) == 3  # X, W, B
    assert report.first.inputs[0].stats_a["shape"] == "1x128x55x55"
    rows = {r.value: r for r in report.rows}
    before = [r for r in report.rows if r.index < report.first.outputs[0].index]
    assert before and all(r.diff.status == OK for r in before)
    assert rows[f"{PLANTED}_output_0"].diff.status == MISMATCH


def test_unperturbed_plugin_agrees(squeezenet, skewed):
    report = compare_backends(squeezenet, "reference", "skewed")
    assert report.ok and report.first is None


def test_golden_round_trip(squeezenet, skewed, tmp_path, monkeypatch, capsys):
    golden = tmp_path / "golden"
    assert main(["compare", str(squeezenet), "--backends", "reference",
                 "--save-golden", str(golden), "--seed", "3"]) == 0
    manifest = json.loads((golden / "manifest.json").read_text())
    assert manifest["seed"] == 3 and manifest["shapes"] == {"input": [1, 3, 224, 224]}
    assert (golden / "golden.npz").is_file() and (golden / "inputs.npz").is_file()
    capsys.readouterr()
    assert main(["compare", str(squeezenet), "--backends", "reference",
                 "--golden", str(golden)]) == 0
    assert "agree" in capsys.readouterr().out
    monkeypatch.setattr(skewed, "PERTURB", PLANTED)
    assert main(["compare", str(squeezenet), "--backends", "reference,skewed",
                 "--golden", str(golden), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["first_divergence"]["node"] == PLANTED
    assert report["a"].startswith("golden:")


def test_values_of_one_side_only_are_listed_not_failed(skewed, tmp_path, capsys):
    """skewed lacks Gemm, so its plan lowers Gemm into core ops whose values A never had (the
    product before alpha's Mul; the weight's transpose is made when planning)."""
    f = TensorProto.FLOAT
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W")
    model = make_model([helper.make_node("Gemm", ["A", "W"], ["G"], name="gemm", transB=1,
                                         alpha=0.5),
                        helper.make_node("Relu", ["G"], ["Y"], name="relu")],
                       [("A", f, [2, 3])], [("Y", f, [2, 4])], initializers=[w])
    path = tmp_path / "gemm.onnx"
    path.write_bytes(model.SerializeToString())
    assert main(["compare", str(path), "--backends", "reference,skewed", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    statuses = {v["value"]: v["status"] for v in report["values"]}
    assert statuses["G"] == statuses["Y"] == OK
    assert "only-b" in statuses.values()
    assert [v["value"] for v in report["values"]][:2] == ["G", "Y"]


# ---------------------------------------------------------------------------------------------
# errors


def test_unknown_backend_is_a_clean_error(small, capsys):
    assert main(["compare", str(small), "--backends", "reference,nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: backend 'nosuch'") and "Traceback" not in err


def test_one_backend_without_golden_is_a_usage_error(small, capsys):
    assert compare_main([str(small), "--backends", "reference"]) == 2
    assert "needs two names" in capsys.readouterr().err


def test_golden_of_another_model_is_refused(small, tmp_path, capsys):
    golden = tmp_path / "golden"
    assert main(["compare", str(small), "--backends", "reference",
                 "--save-golden", str(golden)]) == 0
    other = tmp_path / "other.onnx"
    f = TensorProto.FLOAT
    other.write_bytes(make_model([helper.make_node("Relu", ["A"], ["Y"], name="r")],
                                 [("A", f, [2, 3])], [("Y", f, [2, 3])]).SerializeToString())
    capsys.readouterr()
    assert main(["compare", str(other), "--backends", "reference",
                 "--golden", str(golden)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --golden") and "another model" in err


def test_incomplete_golden_is_refused(small, tmp_path, capsys):
    golden = tmp_path / "golden"
    assert main(["compare", str(small), "--backends", "reference",
                 "--save-golden", str(golden)]) == 0
    np.savez(golden / "golden.npz")  # every value gone
    capsys.readouterr()
    assert main(["compare", str(small), "--backends", "reference",
                 "--golden", str(golden)]) == 2
    assert "incomplete" in capsys.readouterr().err
