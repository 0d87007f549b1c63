"""tools/sweep_ops.py: every sweep draws configurations the reference runs and, where
onnxruntime is installed, agrees with it on them (or differs only where a sweep's ``known``
settles the difference as onnxruntime's); the runner's statuses mean what they say."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import sweep_ops  # noqa: E402
from sweeps import Sweep, all_sweeps  # noqa: E402

from refmnn.dtypes import DType  # noqa: E402
from refmnn_conformance.case import Sample  # noqa: E402
from refmnn_conformance.runner import reference_outputs  # noqa: E402

SWEEPS = all_sweeps()


@pytest.mark.parametrize("sweep", SWEEPS, ids=lambda s: f"{s.op}-{s.opsets[0]}")
def test_the_reference_runs_every_draw(sweep):
    """A draw makes valid configurations only: the reference runs each (a refusal here is
    either a bad draw or the reference refusing valid input -- both need fixing)."""
    for case in sweep.cases(count=6, seed=0):
        for dtype in case.dtypes:
            for sample in case.make_samples(dtype):
                reference_outputs(case.op, case.domain, case.resolved_opset, sample)


@pytest.mark.parametrize("op", sorted({s.op for s in SWEEPS}))
def test_onnxruntime_agrees_on_every_draw(op, capsys):
    pytest.importorskip("onnxruntime")
    code = sweep_ops.main(["--ops", op, "--count", "12", "--seed", "1"])
    assert code == 0, capsys.readouterr().out[-4000:]


def _cast_e5m2(ctx, opset):
    """61440 is a tie above float8e5m2's largest value: it rounds to inf without saturation,
    where onnxruntime 1.32 gives NaN (tests/test_reference_oracles.py)."""
    return Sample((np.array([61440.0], np.float32),), {"to": 19, "saturate": 0})


def _known_cast(sample, opset, peer):
    return "onnxruntime casts the tie to NaN" if peer == "onnxruntime" else None


def _outcomes(sweep: Sweep) -> list[str]:
    return [sweep_ops.outcome(sweep, case, DType.float32, sample, "onnxruntime")[0]
            for case in sweep.cases(1, 0) for sample in case.make_samples(DType.float32)]


def test_statuses():
    """A settled difference is ``known`` (and a DIFF without the predicate); a configuration
    neither engine runs is ``both refused``."""
    pytest.importorskip("onnxruntime")
    assert _outcomes(Sweep("Cast", (19,), _cast_e5m2)) == ["DIFF"]
    assert _outcomes(Sweep("Cast", (19,), _cast_e5m2, known=_known_cast)) == ["known"]

    def too_much(ctx, opset):  # removes 5 of an axis of 3
        return Sample((ctx.make((3,)), np.array([-2, -3], np.int64)), {"mode": "constant"})

    assert _outcomes(Sweep("Pad", (13,), too_much)) == ["both refused"]
