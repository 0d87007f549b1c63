"""refmnn as an ``onnx.backend`` implementation.

This makes the official ``onnx.backend.test.BackendTest`` run against refmnn unchanged, and lets
anyone with an onnx.backend harness use refmnn as a drop-in::

    import refmnn.backend as backend
    rep = backend.prepare(model_proto, backends=["reference"])
    outputs = rep.run([x])                       # positional, in graph-input order

Keyword options given to :func:`prepare` / :func:`run_model` that the Session understands
(``backends``, ``check``, ``seed``) pass through to it; other keywords (the test runner's
tolerances, for example) are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, namedtupledict

from refmnn.errors import InputError
from refmnn.session import Session

SESSION_OPTIONS = ("backends", "check", "seed", "registry", "optimize", "arena")


def _session_options(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k in SESSION_OPTIONS}


def _normalize(value: Any) -> Any:
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, list | tuple):
        return [_normalize(v) for v in value]
    return value


class RefmnnBackendRep(BackendRep):
    """A prepared model: wraps a :class:`refmnn.Session`."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Run with inputs given as a list (graph-input order), a dict, or a single array."""
        names = [v.name for v in self.session.inputs]
        if isinstance(inputs, Mapping):
            feeds = {k: _normalize(v) for k, v in inputs.items()}
        else:
            if isinstance(inputs, np.ndarray) or not isinstance(inputs, Sequence):
                inputs = [inputs]
            if len(inputs) != len(names):
                raise InputError(f"{len(inputs)} input(s) given, the model takes {len(names)}: {names}")
            feeds = {name: _normalize(value) for name, value in zip(names, inputs, strict=True)}
        outputs = self.session.run(feeds)
        names_out = [v.name for v in self.session.outputs]
        return namedtupledict("Outputs", names_out)(*[outputs[n] for n in names_out])


class RefmnnBackend(Backend):
    """The onnx.backend entry points (class methods, as the interface defines them)."""

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> RefmnnBackendRep:
        if not cls.supports_device(device):
            raise RuntimeError(f"refmnn runs on CPU only, not on {device!r}")
        return RefmnnBackendRep(Session(model, **_session_options(kwargs)))

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(
        cls,
        node: onnx.NodeProto,
        inputs: Any,
        device: str = "CPU",
        outputs_info: Sequence[tuple[int, Sequence[int]]] | None = None,
        **kwargs: Any,
    ) -> tuple[Any, ...]:
        """Run a single node on arrays: the node is wrapped into a one-node model."""
        arrays = [np.asarray(v) for v in inputs]
        names = [n for n in node.input if n]
        if len(arrays) != len(names):
            raise InputError(f"node {node.name or node.op_type!r} takes {len(names)} inputs, got {len(arrays)}")
        graph_inputs = [
            onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in zip(names, arrays, strict=True)
        ]
        graph_outputs = [onnx.helper.make_empty_tensor_value_info(n) for n in node.output if n]
        graph = onnx.helper.make_graph([node], "run_node", graph_inputs, graph_outputs)
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
        kwargs.setdefault("check", False)
        return cls.run_model(model, arrays, device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().startswith("CPU")


is_compatible = RefmnnBackend.is_compatible
prepare = RefmnnBackend.prepare
run_model = RefmnnBackend.run_model
run_node = RefmnnBackend.run_node
supports_device = RefmnnBackend.supports_device
