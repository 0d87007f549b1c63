"""The refmnn exception hierarchy.

Every error refmnn raises on purpose is a :class:`RefmnnError`. Errors raised while a node runs
name the node, its op, the opset the op was resolved at and the shapes and dtypes of its inputs,
so a user can act on the message without reading refmnn's code.

::

    RefmnnError
    ├── ModelError            the model file or object cannot be read or fails validation
    │   └── UnsupportedOpError  one or more (domain, op, opset) have no definition; lists them all
    ├── InputError            feeds do not match the model's declared inputs
    ├── ShapeError            a shape or dtype contradiction found by inference or at run time
    ├── OpError               an op failed while running (wraps the underlying exception)
    ├── BackendError          a backend failed to load, prepare or run a kernel
    ├── ResourceError         a plan needs more memory than the machine or device has
    └── UsageError            an API or command line was called incorrectly
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np


class RefmnnError(Exception):
    """Base class of every error refmnn raises on purpose."""


class ModelError(RefmnnError):
    """The model cannot be read: truncated or corrupted file, failed validation, bad structure."""


class UnsupportedOpError(ModelError):
    """Some ops have no definition in the registry.

    Attributes:
        missing: every missing ``(domain, op, opset)`` triple, each listed once.
    """

    def __init__(self, missing: Sequence[tuple[str, str, int]], detail: str = "") -> None:
        self.missing = tuple(sorted(set(missing)))
        lines = [f"  {domain or 'ai.onnx'}::{op} (opset {opset})" for domain, op, opset in self.missing]
        message = f"{len(self.missing)} unsupported op(s):\n" + "\n".join(lines)
        if detail:
            message += "\n" + detail
        super().__init__(message)


class InputError(RefmnnError):
    """The feeds given to a run do not match the model's declared inputs."""


class ShapeError(RefmnnError):
    """A shape or dtype contradiction, found by shape inference or at run time."""


class OpError(RefmnnError):
    """An op failed while it ran; the message names the node, op, opset and input specs."""


class BackendError(RefmnnError):
    """A backend failed to load, prepare or run a kernel."""


class ResourceError(RefmnnError, MemoryError):
    """A plan needs more memory than the machine or device can give: the message names the
    arena's size and the largest values in it with the nodes that make them. Also a
    :class:`MemoryError`, so code that catches that keeps working."""


class UsageError(RefmnnError):
    """An API function or a command was called with arguments that make no sense."""


def describe_value(value: Any) -> str:
    """Return a short ``dtype[shape]`` description of a runtime value for error messages."""
    if value is None:
        return "None"
    if isinstance(value, np.ndarray | np.generic):
        arr = np.asarray(value)
        return f"{arr.dtype}{list(arr.shape)}"
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:  # a TensorType or a device tensor
        return f"{getattr(dtype, 'numpy', dtype)}{list(shape)}"
    if isinstance(value, list):
        inner = ", ".join(describe_value(v) for v in value[:3])
        more = ", ..." if len(value) > 3 else ""
        return f"seq[{inner}{more}]"
    return type(value).__name__


class NamedNode(Protocol):
    """What a message needs of a node (:class:`refmnn.graph.Node` has it)."""

    name: str
    op: str
    domain: str


def node_label(node: NamedNode, opset: int) -> str:
    """How every message names a node: ``node 'name' (Op, opset k)``, the op qualified by its
    domain outside the default one (``com.microsoft::Attention``)."""
    qualified = node.op if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op}"
    return f"node {node.name!r} ({qualified}, opset {opset})"


def node_with_types(node: NamedNode, opset: int, types: Sequence[Any]) -> str:
    """The context line of an error found while planning: the node's label and its input
    types as declared or inferred (``str`` of each, "None" where unknown)."""
    specs = ", ".join(str(t) if t is not None else "None" for t in types)
    return f"{node_label(node, opset)} with inputs ({specs})"


def node_context(node: NamedNode, opset: int, inputs: Sequence[Any]) -> str:
    """The standard context line of an error while a node runs: its label and input specs."""
    specs = ", ".join(describe_value(v) for v in inputs)
    return f"{node_label(node, opset)} with inputs ({specs})"
