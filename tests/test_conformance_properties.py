"""The property-based conformance cases (``refmnn_conformance/test_properties.py``), run as a
vendor runs them (``python -m refmnn_conformance -k property`` in a subprocess, outside the
project): they pass on the reference, and a deliberately broken backend installed as a real
plugin distribution is caught by the Add property, with hypothesis's falsifying example.

The broken backend and the helpers are a minimal copy of those in ``test_conformance.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("hypothesis")

from refmnn_conformance.properties import PROPERTIES, Example  # noqa: E402
from tests.helpers import install_distribution  # noqa: E402

WOBBLY = '''
import numpy as np
from refmnn.backends import Backend, Kernel, KernelDef, Probe, Scheme
from refmnn.backends.host import HostMemory
from refmnn.dtypes import DType


class Add(Kernel):
    def run(self, inputs, outputs, workspace):
        np.add(inputs[0], inputs[1], out=outputs[0])
        outputs[0][...] += np.float32(0.01)        # off by far more than float32's tolerance


class Relu(Kernel):
    def run(self, inputs, outputs, workspace):
        np.maximum(inputs[0], np.float32(0), out=outputs[0])


class Wobbly(HostMemory, Backend):
    name = "wobbly"

    @classmethod
    def probe(cls):
        return Probe(True, "", "0.3", ("sim0",))

    def kernels(self):
        f32 = frozenset({DType.float32})
        return (KernelDef("Add", (Scheme("ufunc", lambda b, s: Add()),), since=7, dtypes=f32),
                KernelDef("Relu", (Scheme("ufunc", lambda b, s: Relu()),), since=6, dtypes=f32))


    def describe(self):
        return "wobbly simulator"
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """'wobbly' (Add perturbed by 0.01, Relu right), installed as a distribution with a
    ``refmnn.backends`` entry point in a folder put on the import path."""
    site = tmp_path_factory.mktemp("site-packages")
    install_distribution(site, "wobbly-backend", "0.3",
                         "[refmnn.backends]\nwobbly = wobbly_backend:Wobbly\n",
                         {"wobbly_backend": textwrap.dedent(WOBBLY)})
    return site


def run_suite(cwd: Path, site: Path | None, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    command = [sys.executable, "-m", "refmnn_conformance", "-q", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _closing(text: str) -> tuple[int, int]:
    found = re.findall(r"^(\d+) passed, (\d+) failed$", text, flags=re.MULTILINE)
    assert found, text[-3000:]
    return int(found[-1][0]), int(found[-1][1])


def test_example_repr_evaluates_back_and_samples_are_reproducible():
    from refmnn.dtypes import DType

    example = Example(shapes=((2, 1), (3,)), domains=("any", "extremal"), seed=7)
    assert eval(repr(example)) == example  # what hypothesis prints can be pasted back
    prop = PROPERTIES["Add"]
    first, second = prop.sample(DType.float32, example), prop.sample(DType.float32, example)
    assert first.name == "property" and [a.shape for a in first.inputs] == [(2, 1), (3,)]
    assert all((a == b).all() or (a != a).all() for a, b in zip(first.inputs, second.inputs, strict=True))
    assert PROPERTIES["Conv.1d"].sample_name == "property_1d"


def test_property_tests_pass_on_the_reference(tmp_path):
    done = run_suite(tmp_path, None, "--backend", "reference", "--source", "refmnn", "-k", "property",
                     "--report", str(tmp_path / "report"))
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-3000:]
    passed, failed = _closing(done.stdout)
    expected = sum(len(p.dtypes) for p in PROPERTIES.values())
    assert failed == 0 and passed == expected, done.stdout[-3000:]
    records = json.loads((tmp_path / "report" / "report.json").read_text())["results"]
    ids = {r["id"]: r for r in records if r["check"] == "property"}
    assert len(ids) == expected
    for name in ("Add-float32[reference]", "Conv.2d-float16[reference]", "Slice-int32[reference]",
                 "MaxPool-int8[reference]"):
        assert ids[name]["status"] == "pass" and ids[name]["sample"].startswith("property"), name
    assert re.fullmatch(r"\d+ examples: \d+ pass", ids["Add-float32[reference]"]["reason"])
    # the properties are not collected outside --source refmnn/all
    done = run_suite(tmp_path, None, "--backend", "reference", "--source", "onnx", "-k", "property",
                     "--co")
    assert "property::" not in done.stdout


def test_add_property_catches_a_perturbed_backend(tmp_path, site):
    done = run_suite(tmp_path, site, "--backend", "wobbly", "--source", "refmnn", "-k",
                     "property and (Add or Relu)", "--report", str(tmp_path / "report"))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"FAILED .*test_properties.py::property::Add-float32\[wobbly\]", out), out[-3000:]
    assert "does not conform to the reference" in out and "on backend 'wobbly'" in out
    assert "Example(shapes=" in out  # hypothesis's (shrunk) falsifying example, pasteable
    assert not re.search(r"FAILED .*property::Relu", out)  # Relu is right
    records = json.loads((tmp_path / "report" / "report.json").read_text())["results"]
    status = {r["id"]: r["status"] for r in records if r["check"] == "property"}
    assert status["Add-float32[wobbly]"] == "fail"
    assert status["Add-float16[wobbly]"] == "fell back"  # not declared for float16: not a failure
    assert status["Add-int32[wobbly]"] == "fell back"
    assert status["Relu-float32[wobbly]"] == "pass"
    assert _closing(out) == (1, 1)
