"""The second case source: the ONNX backend node tests, run through ``refmnn.Session``.

Every node test that ``onnx.backend.test.loader.load_model_tests(kind="node")`` returns (the
``_expanded`` variants excepted: they check the composition of other ops, each of which has its
own node test) runs on the tested backend. As for refmnn's own cases, the expected value is
the reference's output on the same inputs (a no-reuse reference session), judged with the
suite's tolerance table, and a model whose nodes all fall back to the reference is reported as
"fell back", not judged.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from refmnn.dtypes import DType

SKIPPED_SUFFIXES = ("_expanded", "_expanded_ver18")


@dataclass(frozen=True, slots=True)
class OnnxCase:
    """One data set of one ONNX node test."""

    test: Any  # onnx.backend.test.case.test_case.TestCase
    dataset: int
    op: str
    opset: int
    dtype: str

    @property
    def case_id(self) -> str:
        return f"{self.op}@{self.opset}"

    @property
    def sample(self) -> str:
        name = self.test.name.removeprefix("test_")
        return name if self.dataset == 0 else f"{name}.{self.dataset}"


def _dtype_name(model: Any) -> str:
    outputs = model.graph.output
    if outputs and outputs[0].type.HasField("tensor_type"):
        try:
            return DType(outputs[0].type.tensor_type.elem_type).name
        except ValueError:
            return "other"
    return "other"


@functools.cache
def onnx_node_cases() -> tuple[OnnxCase, ...]:
    """Every ONNX node test data set, in the loader's order (slow: the loader builds them all)."""
    import warnings

    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        tests = load_model_tests(kind="node")
    cases = []
    for test in sorted(tests, key=lambda t: t.name):
        if test.name.endswith(SKIPPED_SUFFIXES) or "_expanded" in test.name or test.model is None:
            continue
        model = test.model
        nodes = [n for n in model.graph.node if n.op_type != "Constant"] or list(model.graph.node)
        op = nodes[0].op_type if nodes else "Identity"
        domain = nodes[0].domain if nodes else ""
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        if domain not in ("", "ai.onnx"):
            op = f"{domain}::{op}"
            opset = next((o.version for o in model.opset_import if o.domain == domain), opset)
        for index in range(len(test.data_sets or [])):
            cases.append(OnnxCase(test, index, op, int(opset), _dtype_name(model)))
    return tuple(cases)


def feeds(case: OnnxCase, input_names: list[str]) -> dict[str, Any]:
    """The feeds of one data set, by the session's input names (graph-input order)."""
    inputs, _ = case.test.data_sets[case.dataset]
    return {name: _value(v) for name, v in zip(input_names, inputs, strict=False)}


def _value(value: Any) -> Any:
    """Data-set values as Session feeds: TensorProtos (narrow types) decoded, lists kept."""
    import onnx

    from refmnn.converter.onnx.tensors import to_array

    if isinstance(value, onnx.TensorProto):
        return to_array(value)
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, list):
        return [_value(v) for v in value]
    return value
