"""The conformance suite (conformance/refmnn_conformance) checks backends, so it is checked here:

* its building blocks (tolerances, comparison rules, seeded samples, the manifest) in-process;
* the suite itself run as a vendor runs it (``pytest -p refmnn_conformance.plugin --pyargs
  refmnn_conformance``) in a subprocess: it passes on the reference; it fails, naming the op
  and the sample, on deliberately broken backends installed as real plugin distributions
  (a dist-info with an entry point in a temporary folder on the import path); its reports
  are complete and deterministic under pytest-xdist; its xfail manifest is validated and strict
  for built-in backends.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from refmnn.dtypes import DType
from refmnn_conformance import xfails
from refmnn_conformance.case import EXTREMAL, OpCase, Sample, SampleContext, Tol
from refmnn_conformance.cases import ALL_CASES
from refmnn_conformance.compare import ConformanceFailure, assert_conforms, ulp_distance
from refmnn_conformance.tolerances import DEFAULTS, tolerance_for
from tests.helpers import install_distribution

ROOT = Path(__file__).resolve().parents[1]
EXPECTATIONS = ROOT / "conformance" / "refmnn_conformance" / "expectations" / "reference.toml"

# ---------------------------------------------------------------------------------------------
# building blocks


def test_every_default_tolerance_has_a_reason_and_integers_are_exact():
    assert DEFAULTS[DType.float32].rtol == 1.3e-6 and DEFAULTS[DType.float32].atol == 1e-5
    assert (DEFAULTS[DType.float16].rtol, DEFAULTS[DType.bfloat16].rtol) == (1e-3, 1.6e-2)
    assert all(tol.why.strip() for tol in DEFAULTS.values())
    assert DEFAULTS[DType.int64].exact and DEFAULTS[DType.bool].exact


def test_tolerance_needs_a_reason_and_widens_by_sqrt_k():
    with pytest.raises(ValueError, match="reason"):
        Tol(1e-3, 0, "")
    case = OpCase("MatMul", dtypes=(DType.float32,), samples=lambda ctx: (),
                  accumulates=lambda s: 400)
    sample = Sample((np.zeros((1, 400), np.float32), np.zeros((400, 1), np.float32)), name="k")
    widened = tolerance_for(case, DType.float32, sample)
    assert widened.rtol == pytest.approx(1.3e-6 * 20) and "sqrt(400)" in widened.why
    assert tolerance_for(case, DType.int32, sample).exact
    low = tolerance_for(None, DType.float32, precision="low")
    assert low.rtol == DEFAULTS[DType.float16].rtol and "low" in low.why


def test_samples_are_seeded_from_the_case_id_not_global_state():
    np.random.seed(1)
    a = SampleContext("Add@14", DType.float32).make((3, 4))
    np.random.seed(2)
    b = SampleContext("Add@14", DType.float32).make((3, 4))
    c = SampleContext("Sub@14", DType.float32).make((3, 4))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    ctx = SampleContext("X@1", DType.float16)
    extremal = ctx.make((64,), EXTREMAL).astype(np.float32)
    assert np.isnan(extremal).any() and np.isposinf(extremal).any() and np.isneginf(extremal).any()
    assert (np.signbit(extremal) & (extremal == 0)).any()  # -0.0
    ints = SampleContext("X@1", DType.int8).make((64,), EXTREMAL)
    assert ints.min() == -128 and ints.max() == 127
    strided = ctx.noncontiguous(ctx.make((3, 5)))
    assert not strided.flags.c_contiguous and strided.shape == (3, 5)


def test_assert_conforms_rules_and_message():
    tol = Tol(1e-3, 1e-5, "test")
    want = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
    assert_conforms(want.copy(), want, tol)
    assert_conforms(np.array([1.0005, np.nan, np.inf, -np.inf, -0.0], np.float32), want, tol)
    for bad in ([1.0, 0.0, np.inf, -np.inf, 0.0], [1.0, np.nan, -np.inf, -np.inf, 0.0],
                [1.1, np.nan, np.inf, -np.inf, 0.0]):
        with pytest.raises(ConformanceFailure):
            assert_conforms(np.array(bad, np.float32), want, tol)
    with pytest.raises(ConformanceFailure, match="dtype float64 != reference float32"):
        assert_conforms(want.astype(np.float64), want, tol)
    with pytest.raises(ConformanceFailure, match=r"shape \[5, 1\]"):
        assert_conforms(want.reshape(5, 1), want, tol)
    with pytest.raises(ConformanceFailure, match="exact"):
        assert_conforms(np.array([1, 2, 4]), np.array([1, 2, 3]), Tol(0.5, 1, "ints are exact anyway"))
    with pytest.raises(ConformanceFailure) as info:
        got = np.arange(12, dtype=np.float32).reshape(3, 4)
        want2 = got.copy()
        want2[2, 1] += 1
        assert_conforms(got, want2, tol, what="Add@14 float32 sample 'x'", inputs="(float32[3, 4])", seed=7)
    message = str(info.value)
    assert "greatest absolute difference: 1 at index [2, 1]" in message
    assert "[2, 1]: got 9, reference 10  NOT OK" in message and "OK" in message
    assert "seed: 7" in message and "Add@14 float32 sample 'x'" in message


def test_ulp_distance_against_a_float64_oracle():
    oracle = np.array([1.0, 2.0, 1e-3])
    got = oracle.astype(np.float32)
    assert ulp_distance(got, oracle) <= 0.5
    nudged = np.nextafter(got, np.float32(np.inf), dtype=np.float32)
    assert 0.5 <= ulp_distance(nudged, oracle) <= 1.5


def test_report_lists_passes_far_from_the_oracle(tmp_path):
    """A pass thousands of ULPs out where the reference is close is listed apart (OpenCL's Elu
    of -1e-30 gave 0: 1e7 ULPs, inside the absolute tolerance); ordinary spreads are not."""
    from refmnn_conformance import report

    def record(name: str, status: str, ulp: float | None, ref: float | None) -> dict:
        return {"id": name, "case": name, "backend": "b", "dtype": "float32", "check": "value",
                "status": status, "ulp_backend": ulp, "ulp_reference": ref, "max_rel": 1.0}

    records = [record("Elu-near-zero", "pass", 1.06e7, 0.0),
               record("LayerNorm-wide", "pass", 3594.0, 292.0),  # 12x: summation order
               record("Sum-cancelled", "pass", 5e4, 768.0),  # the reference as far too
               record("Small", "pass", 900.0, 0.0),  # under FAR_ULP
               record("Broken", "fail", 1e9, 0.0),  # a failure, listed as one
               record("Integer", "pass", None, None)]
    assert [r["id"] for r in report.far_passes(records)] == ["Elu-near-zero"]
    report.write(tmp_path, records, {"backend": "b"})
    markdown = (tmp_path / "report.md").read_text()
    section = markdown.split("## Passes far from the oracle")[1].split("##")[0]
    assert "`Elu-near-zero`: 1.06e+07 ULPs (reference 0)" in section
    assert "LayerNorm" not in section and "Broken" not in section
    assert markdown.rstrip().endswith("5 passed, 1 failed")
    assert json.loads((tmp_path / "report.json").read_text())["far_from_oracle"] == [
        "Elu-near-zero"]
    assert "Passes far from the oracle" in (tmp_path / "report.html").read_text()


def test_case_ids_are_unique_and_cover_the_required_ops():
    ops = {case.op for case in ALL_CASES}
    for required in ("Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Softmax",
                     "MatMul", "Gemm", "Conv", "MaxPool", "AveragePool", "ReduceSum", "ReduceMean",
                     "ReduceMax", "LayerNormalization", "BatchNormalization", "Transpose", "Reshape",
                     "Concat", "Slice", "Gather", "Cast", "Where", "Clip"):
        assert required in ops
    ids = [case.id for case in ALL_CASES]
    assert len(ids) == len(set(ids)) and "Softmax@11" in ids and "BatchNormalization@9" in ids


def test_manifest_entries_need_a_reason(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text('[[xfail]]\ncase = "Relu@14"\nsample = "basic"\n')
    with pytest.raises(xfails.ManifestError, match="has no reason"):
        xfails.load(path)
    path.write_text('[[xfail]]\ncase = "Relu@14"\nreason = "because"\nwhatever = 1\n')
    with pytest.raises(xfails.ManifestError, match="unknown key"):
        xfails.load(path)
    assert len(xfails.load(EXPECTATIONS)) >= 0


# ---------------------------------------------------------------------------------------------
# the suite, run as a vendor runs it

BROKEN = '''
import numpy as np
from refmnn.backends import Backend, Kernel, KernelDef, Probe, Scheme
from refmnn.backends.host import HostMemory
from refmnn.dtypes import DType


class Add(Kernel):
    def run(self, inputs, outputs, workspace):
        np.add(inputs[0], inputs[1], out=outputs[0])
        if {perturb}:
            outputs[0][...] += np.float32(0.01)        # off by far more than float32's tolerance


class Relu(Kernel):
    def run(self, inputs, outputs, workspace):
        x, y = inputs[0].reshape(-1), outputs[0].reshape(-1)
        n = y.size if not {lazy} else y.size // 2    # leaves the second half unwritten
        np.maximum(x[:n], np.float32(0), out=y[:n])


class {cls}(HostMemory, Backend):
    name = "{name}"

    @classmethod
    def probe(cls):
        return Probe(True, "", "0.3", ("sim0",))

    def kernels(self):
        f32 = frozenset({{DType.float32}})
        return (KernelDef("Add", (Scheme("ufunc", lambda b, s: Add()),), since=7, dtypes=f32),
                KernelDef("Relu", (Scheme("ufunc", lambda b, s: Relu()),), since=6, dtypes=f32))


    def describe(self):
        return "{name} simulator"
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Two broken backends, installed as distributions: 'wobbly' perturbs Add's output,
    'lazy' leaves half of Relu's output unwritten. Both are right about everything else."""
    site = tmp_path_factory.mktemp("site-packages")
    for name, cls, perturb, lazy in (("wobbly", "Wobbly", True, False), ("lazy", "Lazy", False, True)):
        source = BROKEN.format(name=name, cls=cls, perturb=perturb, lazy=lazy)
        install_distribution(site, f"{name}-backend", "0.3", f"[refmnn.backends]\n{name} = {name}_backend:{cls}\n",
                 {f"{name}_backend": textwrap.dedent(source)})
    return site


def run_suite(cwd: Path, site: Path | None, *args: str) -> subprocess.CompletedProcess:
    """The suite in a subprocess, from a folder outside the project (as a vendor runs it)."""
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    command = [sys.executable, "-m", "refmnn_conformance", "-q", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _closing(text: str) -> tuple[int, int]:
    found = re.findall(r"^(\d+) passed, (\d+) failed$", text, flags=re.MULTILINE)
    assert found, text[-3000:]
    return int(found[-1][0]), int(found[-1][1])


def test_suite_passes_on_the_reference(tmp_path):
    done = run_suite(tmp_path, None, "--backend", "reference", "--source", "refmnn", "--xfails",
                     str(EXPECTATIONS), "-k", "Relu or Softmax or MatMul or Conv or Gather or Cast")
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-3000:]
    passed, failed = _closing(done.stdout)
    assert failed == 0 and passed > 300


def test_perturbed_backend_fails_naming_op_and_sample(tmp_path, site):
    done = run_suite(tmp_path, site, "--backend", "wobbly", "--source", "refmnn", "-k", "Add or Relu",
                     "--report", str(tmp_path / "report"))
    assert done.returncode == 1, done.stdout[-3000:]
    out = done.stdout
    assert "Add@14-float32-broadcast_row[wobbly]" in out and "does not conform to the reference" in out
    assert "Add@14 float32 sample 'broadcast_row' on backend 'wobbly'" in out
    assert "greatest absolute difference" in out and "NOT OK" in out
    assert not re.search(r"FAILED .*Relu@", out)  # Relu is right
    assert not re.search(r"FAILED .*Add@14-float16", out)  # float16 is not declared: fell back
    records = json.loads((tmp_path / "report" / "report.json").read_text())["results"]
    status = {(r["check"], r["id"]): r["status"] for r in records}
    assert status[("value", "Add@14-float32-same[wobbly]")] == "fail"
    # a node with an empty tensor is always the reference's (nothing to compute)
    assert status[("value", "Add@14-float32-empty[wobbly]")] == "fell back"
    assert status[("value", "Add@14-float16-same[wobbly]")] == "fell back"
    assert status[("value", "Relu@14-int32-basic[wobbly]")] == "fell back"
    assert status[("value", "Relu@14-float32-basic[wobbly]")] == "pass"
    header = (tmp_path / "report" / "report.md").read_text()
    assert "**backend**: wobbly" in header and "wobbly-backend" in header and "wobbly simulator" in header


def test_unwritten_output_fails_the_poison_check(tmp_path, site):
    done = run_suite(tmp_path, site, "--backend", "lazy", "--source", "refmnn", "-k", "Relu")
    assert done.returncode == 1
    out = done.stdout
    assert "Relu@14 float32 sample 'basic' on backend 'lazy' breaks the backend contract" in out
    assert "never written (they kept the poison in both runs)" in out
    assert re.search(r"FAILED .*test_contract.py::contract_checks::Relu@14-float32-basic\[lazy\]", out)


def test_reports_are_complete_and_deterministic_under_xdist(tmp_path):
    args = ("--backend", "reference", "--source", "refmnn", "--xfails", str(EXPECTATIONS), "-k",
            "Relu or Softmax or Gemm")
    first = run_suite(tmp_path, None, *args, "-n", "2", "--report", str(tmp_path / "a"))
    second = run_suite(tmp_path, None, *args, "--report", str(tmp_path / "b"))
    assert first.returncode == 0 and second.returncode == 0, first.stdout[-3000:]
    for name in ("report.json", "report.md", "report.html"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text(), name
    markdown = (tmp_path / "a" / "report.md").read_text()
    assert "| case |" in markdown and "| Relu@14 |" in markdown and "| Softmax@11 |" in markdown
    last = markdown.rstrip("\n").splitlines()[-1]
    assert re.fullmatch(r"\d+ passed, 0 failed", last)
    assert last in first.stdout
    page = (tmp_path / "a" / "report.html").read_text()
    assert "<table>" in page and "Gemm@13" in page and last in page and "<script" not in page
    data = json.loads((tmp_path / "a" / "report.json").read_text())
    assert data["closing"] == last and data["matrix"]["reference"]["Relu@14"]["float32"]["status"] == "pass"


def test_manifest_without_reason_is_rejected_and_stale_strict_xfail_fails(tmp_path, site):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[xfail]]\ncase = "Relu@14"\nsample = "basic"\n')
    done = run_suite(tmp_path, None, "--backend", "reference", "--source", "refmnn", "--xfails", str(bad),
                     "-k", "Relu")
    assert done.returncode != 0 and "has no reason" in done.stdout + done.stderr
    stale = tmp_path / "stale.toml"
    stale.write_text('[[xfail]]\ncase = "Relu@14"\ndtype = "float32"\nsample = "basic"\n'
                     'reason = "was broken once"\n')
    done = run_suite(tmp_path, None, "--backend", "reference", "--source", "refmnn", "--xfails",
                     str(stale), "-k", "Relu")
    assert done.returncode == 1 and "XPASS(strict)" in done.stdout
    # for a third-party backend a stale entry is reported but does not fail ... unless asked to
    done = run_suite(tmp_path, site, "--backend", "wobbly", "--source", "refmnn", "--xfails", str(stale),
                     "-k", "Relu")
    assert done.returncode == 0, done.stdout[-3000:]
    done = run_suite(tmp_path, site, "--backend", "wobbly", "--source", "refmnn", "--xfails", str(stale),
                     "-k", "Relu", "--strict-xfails")
    assert done.returncode == 1 and "XPASS(strict)" in done.stdout


def test_ops_and_checks_select_exactly_those_cases(tmp_path):
    """``--ops Mul,Relu`` keeps the cases of exactly those ops (not MatMul's, whose name holds
    "Mul", as ``-k Mul`` would), ``--checks value`` only the value checks; an unknown kind of
    check, or an op with no case, is a usage error that names it."""
    done = run_suite(tmp_path, None, "--backend", "reference", "--source", "all", "--ops", "Mul",
                     "--ops", "Relu", "--checks", "value", "--report", str(tmp_path / "r"))
    assert done.returncode == 0, done.stdout[-3000:]
    results = json.loads((tmp_path / "r" / "report.json").read_text())["results"]
    assert {r["op"] for r in results} == {"Mul", "Relu"}
    assert {r["check"] for r in results} == {"value"}
    assert {r["source"] for r in results} == {"refmnn", "onnx"} and len(results) > 100
    contract = run_suite(tmp_path, None, "--backend", "reference", "--source", "refmnn", "--ops",
                         "Relu", "--checks", "contract,probe", "--report", str(tmp_path / "c"))
    assert contract.returncode == 0, contract.stdout[-3000:]
    results = json.loads((tmp_path / "c" / "report.json").read_text())["results"]
    assert {r["check"] for r in results} == {"contract"} and {r["op"] for r in results} == {"Relu"}
    wrong = run_suite(tmp_path, None, "--backend", "reference", "--checks", "values")
    assert wrong.returncode == 4 and "unknown kind(s) ['values']" in wrong.stderr + wrong.stdout
    typo = run_suite(tmp_path, None, "--backend", "reference", "--source", "refmnn", "--ops",
                     "Conv2D,Relu")
    assert typo.returncode == 4 and "no case of ['Conv2D']" in typo.stderr + typo.stdout


def test_refmnn_conformance_command(tmp_path, monkeypatch):
    from refmnn.cli import main
    from refmnn_conformance import cli

    seen = []
    monkeypatch.setattr("pytest.main", lambda argv: seen.append(argv) or 0)
    assert main(["conformance", "--backend", "acme", "-n", "2", "-k", "Relu", "--source", "onnx",
                 "--report", "out"]) == 0
    argv = seen[0]
    assert argv[:5] == ["-p", "refmnn_conformance.plugin", "-p", "no:cacheprovider", "--pyargs"]
    assert argv[5] == "refmnn_conformance" and "--backend" in argv and "acme" in argv
    assert ["-n", "2"] == argv[argv.index("-n"):argv.index("-n") + 2] and "onnx" in argv
    assert main(["conformance", "--backend", "acme", "--ops", "Conv,MatMul", "--ops", "Erf",
                 "--checks", "value"]) == 0
    argv = seen[-1]
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--ops"] == ["Conv,MatMul", "Erf"]
    assert argv[argv.index("--checks") + 1] == "value"
    assert cli.main(["--backend", "reference", "-k", "Relu"]) == 0
    assert main(["conformance", "--backend", "opencl", "--device", "1", "--option", "tune=off",
                 "--option", "platform=NVIDIA"]) == 0
    argv = seen[-1]
    assert argv[argv.index("--device") + 1] == "1"
    options = [argv[i + 1] for i, a in enumerate(argv) if a == "--option"]
    assert options == ["tune=off", "platform=NVIDIA"]


def test_backend_settings_reach_the_backend_and_the_report(tmp_path):
    """--device and --option become the BackendConfig the cases run with (named in the report,
    so that a run can be repeated); a malformed --option stops the run before any case."""
    done = run_suite(tmp_path, None, "--backend", "reference", "--source", "refmnn", "--xfails",
                     str(EXPECTATIONS), "-k", "Relu", "--option", "arena=on", "--option",
                     "note = kept", "--report", str(tmp_path / "r"))
    assert done.returncode == 0, done.stdout[-3000:]
    markdown = (tmp_path / "r" / "report.md").read_text()
    assert "**options**: arena=on, note=kept" in markdown
    done = run_suite(tmp_path, None, "--backend", "reference", "-k", "Relu", "--option", "tune")
    assert done.returncode != 0 and "--option 'tune': expected KEY=VALUE" in done.stderr


@pytest.mark.slow
def test_full_suite_on_the_reference(tmp_path):
    """Every refmnn case and every ONNX node test on the reference, with -n 2."""
    done = run_suite(tmp_path, None, "--backend", "reference", "--xfails", str(EXPECTATIONS), "-n", "2")
    assert done.returncode == 0, done.stdout[-5000:]
    assert _closing(done.stdout)[1] == 0
