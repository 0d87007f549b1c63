"""Draw random valid configurations of an op and judge the reference against a peer engine.

    .venv/bin/python tools/sweep_ops.py                          # every sweep, onnxruntime
    .venv/bin/python tools/sweep_ops.py --ops Resize --count 500 --seed 3 --verbose
    .venv/bin/python tools/sweep_ops.py --ops Pad --peer onnx.reference

The conformance samples (``tools/peer_cases.py``) are written by hand, a few per op; the ops
whose meaning depends on many attributes and shapes at once (Resize's modes x coordinate
transforms x rounding x roi, a convolution's pads x strides x dilations x groups, Slice's
negative steps and clamped ends) have far more combinations than anyone writes. A sweep
(``tools/sweeps/``) draws them: each sample is a random configuration valid at its opset, run
as a one-node model on the peer and judged against the reference with the conformance
suite's tolerance for the op and dtype. The outcomes:

* ``agree``;
* ``DIFF``: both ran and disagree -- a lead to read, not a verdict (the peer may be wrong);
* ``known``: a DIFF the sweep's ``known`` settles as the peer's, with its reason;
* ``REFUSED``: the reference raised on a configuration the peer ran;
* ``both refused``: neither ran it (the draw made an invalid configuration: fix the draw);
* ``peer failed``: the peer did not run it and the reference did (a dtype or opset it lacks).

The same ``--seed`` and ``--count`` give the same samples; a finding is reproduced with
``--ops OP --seed S --count N`` (its sample is ``rI`` with I < N). The exit status is 1 when
there was a DIFF, a REFUSED or a both refused.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections import Counter
from collections.abc import Iterator

from peer_cases import judge, one_node_model  # tools/, this script's folder
from peers import PEERS, run_peer
from sweeps import Sweep, all_sweeps

from refmnn_conformance.case import OpCase, Sample

FAILING = ("DIFF", "REFUSED", "both refused")


def outcome(sweep: Sweep, case: OpCase, dtype, sample: Sample, peer: str) -> tuple[str, str]:
    """(status, detail) of one sample; see the module docstring for the statuses."""
    status, detail = judge(case, dtype, sample, peer)
    if status == "reference failed":
        model, feeds = one_node_model(case, sample)
        try:
            run_peer(model, feeds, peer)
        except Exception as exc:
            return "both refused", f"{detail}; peer: {type(exc).__name__}: {exc}"[:400]
        return "REFUSED", detail
    if status == "DIFF" and sweep.known is not None:
        reason = sweep.known(sample, case.resolved_opset, peer)
        if reason:
            return "known", reason
    return status, detail


def samples(sweeps: list[Sweep], count: int, seed: int
            ) -> Iterator[tuple[Sweep, OpCase, object, Sample]]:
    for sweep in sweeps:
        for case in sweep.cases(count, seed):
            for dtype in case.dtypes:
                for sample in case.make_samples(dtype):
                    yield sweep, case, dtype, sample


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="only these ops (comma-separated, exact names)")
    parser.add_argument("--peer", choices=PEERS, default="onnxruntime",
                        help="the engine to compare with")
    parser.add_argument("--count", type=int, default=40, help="samples per sweep and opset")
    parser.add_argument("--seed", type=int, default=0, help="which draw (part of the case id)")
    parser.add_argument("--verbose", action="store_true",
                        help="print the known and peer-failed samples too")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    wanted = set(args.ops.split(",")) if args.ops else None
    sweeps = [s for s in all_sweeps() if wanted is None or s.op in wanted]
    if wanted and not sweeps:
        parser.error(f"no sweep for {sorted(wanted)}")
    counts: Counter[str] = Counter()
    for sweep, case, dtype, sample in samples(sweeps, args.count, args.seed):
        status, detail = outcome(sweep, case, dtype, sample, args.peer)
        counts[status] += 1
        if status in FAILING or (args.verbose and status != "agree"):
            print(f"{status} {case.id}-{dtype.name}-{sample.name} {sample.describe()}: {detail}",
                  flush=True)
    print(", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr)
    return 1 if any(counts[s] for s in FAILING) else 0


if __name__ == "__main__":
    sys.exit(main())
