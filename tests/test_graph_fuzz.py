"""tools/fuzz_graphs.py: a Session's run of a random model -- planned, placed, fused, in place,
in an arena, re-planned for another batch -- gives what a plain node-by-node run of the same
references gives (bit for bit on the reference backend), and the check catches a planner that
frees memory one step too early."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import fuzz_graphs  # noqa: E402

from refmnn import Session  # noqa: E402
from refmnn.schedule import plan as plan_module  # noqa: E402
from tests.helpers import require_backend  # noqa: E402

SEEDS = range(40)
BACKEND_SEEDS = range(25)


def _findings(seeds: range, backend: str = "reference", *, dynamic: bool = False,
              scale: int = 1, dtype: str = "float32") -> dict[int, list[str]]:
    tolerance = None if backend == "reference" else fuzz_graphs.TOLERANCE
    found = {}
    for seed in seeds:
        drawn = fuzz_graphs.draw(seed, dynamic=dynamic, scale=scale, exact=tolerance is None,
                                 dtype=dtype)
        if findings := fuzz_graphs.check(drawn, backend, tolerance, dynamic):
            found[seed] = findings
    return found


@pytest.mark.parametrize(("dynamic", "scale", "dtype"),
                         [(False, 1, "float32"), (True, 1, "float32"), (False, 3, "float32"),
                          (True, 1, "float16"), (False, 1, "float64")],
                         ids=["static", "dynamic", "scale3", "float16", "float64"])
def test_the_reference_backend_is_the_plain_run_bit_for_bit(dynamic, scale, dtype):
    assert _findings(SEEDS, dynamic=dynamic, scale=scale, dtype=dtype) == {}


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("backend", ["numba", "opencl"])
def test_a_backend_is_the_plain_run_within_tolerance(backend, dynamic):
    require_backend(backend)
    assert _findings(BACKEND_SEEDS, backend, dynamic=dynamic) == {}


def test_the_draws_reach_the_machinery_they_are_for():
    """Over the seeds the tests use, the reference plans work in place and run views, and
    the static draws hold every kind of step."""
    reasons, ops = [], set()
    for seed in SEEDS:
        drawn = fuzz_graphs.draw(seed)
        ops |= {node.op_type for node in drawn.model.graph.node}
        session = Session(drawn.model)
        session.run(drawn.feeds())
        reasons += [step.reason for step in session._last.plan.steps if hasattr(step, "reason")]
    assert sum("in place of" in r for r in reasons) >= 20
    assert sum("run as an alias" in r for r in reasons) >= 20
    assert {"Conv", "MatMul", "Gemm", "Concat", "Split", "Slice", "Softmax", "Erf",
            "LayerNormalization", "Transpose", "MaxPool", "BatchNormalization", "If", "Loop",
            "Cast", "SequenceAt", "OptionalGetElement", "Shape", "ConstantOfShape", "TopK",
            "LSTM", "Dropout", "Pad", "Tile", "Where"} <= ops


def test_the_draws_with_a_symbolic_batch_run_at_every_batch():
    drawn = fuzz_graphs.draw(3, dynamic=True)
    shapes = {batch: next(iter(drawn.feeds(batch).values())).shape[0]
              for batch in fuzz_graphs.BATCHES}
    assert shapes == {b: b for b in fuzz_graphs.BATCHES}
    assert all(d.dim_param for v in drawn.model.graph.input for d in
               v.type.tensor_type.shape.dim[:1])


def test_a_planner_that_frees_one_step_early_is_caught(monkeypatch):
    """Shorten every value's live range by a step (the arena and the in-place pass then
    hand out bytes still to be read): the check reports wrong values, not a pass (4 of the
    40 models here; in the others no value happens to be written into such bytes before
    their last read)."""
    liveness = plan_module._liveness

    def one_step_early(*args, **kwargs):
        first, last = liveness(*args, **kwargs)
        return first, {k: max(first.get(k, v), v - 1) for k, v in last.items()}

    monkeypatch.setattr(plan_module, "_liveness", one_step_early)
    found = _findings(SEEDS)
    assert len(found) >= 3, found
    assert all("differ" in f for findings in found.values() for f in findings)
