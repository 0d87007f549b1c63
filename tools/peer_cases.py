"""Run every conformance sample on a peer engine and compare it with refmnn's reference.

    .venv/bin/python tools/peer_cases.py                       # onnxruntime, every case
    .venv/bin/python tools/peer_cases.py --ops Conv,Resize --peer onnx.reference --verbose

The conformance suite (``conformance/``) checks refmnn's backends against the reference; this
tool turns the same cases round and checks the reference against another engine: each (case,
dtype, sample) becomes a one-node ONNX model at the case's opset (the inputs the op's shape
rule reads and a case's ``constants`` as initializers, as the suite's graphs have them), runs
on onnxruntime's CPU provider (or onnx.reference, ``--peer``), and its outputs are judged
against the reference's with the case's own tolerance. Samples the peer cannot load or run (a
dtype or opset it lacks) are counted, not judged. A disagreement is a lead to read, not a
verdict: the peer may be the one that is wrong (``tests/test_reference_oracles.py`` holds the
cases read). The exit status is 1 when any sample disagrees.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from refmnn.dtypes import DType

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))

from refmnn_conformance.case import OpCase, Sample  # noqa: E402
from refmnn_conformance.cases import ALL_CASES  # noqa: E402
from refmnn_conformance.compare import compare  # noqa: E402
from refmnn_conformance.runner import reference_outputs, sample_ports  # noqa: E402
from refmnn_conformance.tolerances import tolerance_for  # noqa: E402

from peers import PEERS, as_bytes, run_peer  # noqa: E402  (tools/, this script's folder)

IR_VERSION = 10
"""The IR version of the models made here: one every onnxruntime of the last two years reads."""

KNOWN = {
    ("onnxruntime", "Conv@22.constant_weights", "nonfinite_weights_padded"):
        "onnxruntime 1.32's convolution with constant weights skips the padding taps, so an "
        "infinite weight over the padding gives a number where the spec's zero padding gives "
        "inf * 0 = NaN (with the weights as an input it agrees; "
        "tests/test_reference_oracles.py)",
}
"""(peer, case id, sample name) -> why the peer differs where the reference follows the spec:
reported as "known", not as a DIFF."""


def _attribute(name: str, value: Any) -> onnx.AttributeProto:
    if isinstance(value, np.ndarray):
        value = numpy_helper.from_array(value)
    elif isinstance(value, np.generic):
        value = value.item()
    elif isinstance(value, list | tuple):
        value = [v.item() if isinstance(v, np.generic) else v for v in value]
    return helper.make_attribute(name, value)


def one_node_model(case: OpCase, sample: Sample) -> tuple[onnx.ModelProto, dict[str, Any]]:
    """The sample as an ONNX model at the case's opset, and its feeds."""
    opset = case.resolved_opset
    names, feeds, constants = sample_ports(case.op, case.domain, opset, sample, case.constants)
    inputs = [helper.make_tensor_value_info(name, DType.from_numpy(array.dtype).value,
                                            list(array.shape)) for name, array in feeds.items()]
    initializers = [numpy_helper.from_array(array, name) for name, array in constants.items()]
    outputs = [f"y{i}" for i in range(sample.outputs)]
    node = helper.make_node(case.op, names, outputs, domain=case.domain)
    node.attribute.extend(_attribute(k, v) for k, v in sorted(sample.attrs.items()))
    graph = helper.make_graph([node], f"{case.op}_{sample.name}", inputs,
                              [helper.make_empty_tensor_value_info(o) for o in outputs],
                              initializers)
    imports = [helper.make_opsetid("", opset if not case.domain else 21)]
    if case.domain:
        imports.append(helper.make_opsetid(case.domain, opset))
    return helper.make_model(graph, opset_imports=imports, ir_version=IR_VERSION), feeds


def judge(case: OpCase, dtype: DType, sample: Sample, peer: str) -> tuple[str, str]:
    """(status, detail): "agree", "DIFF", "peer failed" or "reference failed"."""
    try:
        want = reference_outputs(case.op, case.domain, case.resolved_opset, sample)
    except Exception as exc:  # the suite's error samples live elsewhere
        return "reference failed", f"{type(exc).__name__}: {exc}"[:200]
    model, feeds = one_node_model(case, sample)
    try:
        got = run_peer(model, feeds, peer)
    except Exception as exc:
        return "peer failed", f"{type(exc).__name__}: {exc}"[:200]
    for index, (mine, theirs) in enumerate(zip(want, got, strict=False)):
        if mine is None or isinstance(mine, list):
            continue
        mine, theirs = np.asarray(mine), np.asarray(theirs)
        if mine.shape != theirs.shape:
            return "DIFF", f"output {index}: shape {mine.shape}, peer {theirs.shape}"
        if as_bytes(mine.dtype) and theirs.dtype.kind in "ui" and \
                theirs.dtype.itemsize == mine.dtype.itemsize:
            theirs = theirs.view(mine.dtype)  # float8 and the like come back as their bytes
        if mine.dtype != theirs.dtype and mine.dtype.kind != "V":
            return "DIFF", f"output {index}: dtype {mine.dtype}, peer {theirs.dtype}"
        out_dtype = DType.from_numpy(mine.dtype)
        _, problems = compare(theirs.astype(mine.dtype), mine,
                              tolerance_for(case, out_dtype, sample))
        if problems:
            return "DIFF", f"output {index}: " + "; ".join(problems)[:400]
    return "agree", ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="only these ops (comma-separated, exact names)")
    parser.add_argument("--peer", choices=PEERS,
                        default="onnxruntime", help="the engine to compare with")
    parser.add_argument("--verbose", action="store_true", help="print why the peer failed too")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    wanted = set(args.ops.split(",")) if args.ops else None
    counts: Counter[str] = Counter()
    for case in ALL_CASES:
        if wanted is not None and case.op not in wanted:
            continue
        for dtype in case.dtypes:
            for sample in case.make_samples(dtype):
                status, detail = judge(case, dtype, sample, args.peer)
                known = KNOWN.get((args.peer, case.id, sample.name))
                if status == "DIFF" and known:
                    status, detail = "known", known
                counts[status] += 1
                if status == "DIFF" or (args.verbose and status != "agree"):
                    print(f"{status} {case.id}-{dtype.name}-{sample.name} "
                          f"{sample.describe()}: {detail}", flush=True)
    print(", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr)
    return 1 if counts["DIFF"] else 0


if __name__ == "__main__":
    sys.exit(main())
