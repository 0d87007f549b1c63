"""The backend contract: what a vendor implements to run refmnn graphs on its device.

A backend is one object with four duties, after MNN's Backend/Execution split:

1. **Declare** what it supports, without building anything: :meth:`Backend.kernels` returns
   :class:`KernelDef` records (op, opset range, dtypes) each with one or more :class:`Scheme`\\ s.
   A scheme says when it applies and what it costs; the planner picks one per node by cost and
   records why. "Unsupported" is declarative: no KernelDef, or no scheme that applies. The planner
   then falls back to the next backend and finally to the NumPy reference.
2. **Memory**: :meth:`allocate` / :meth:`free` buffers of a :class:`Storage` kind,
   :meth:`view` a typed tensor at an offset of a buffer, :meth:`upload` / :meth:`download`
   between host NumPy arrays and device tensors. Activations live in one planned ARENA buffer
   per backend; weights and packed constants in STATIC buffers; kernel scratch in WORKSPACE.
3. **Kernels** with a strict split: :meth:`Kernel.prepare` does every shape-dependent thing
   (compile, choose launch sizes, pack weights into STATIC buffers, set ``workspace_bytes``) once
   per input-shape signature; :meth:`Kernel.run` only computes: it allocates nothing, makes no
   shape decisions and never writes its inputs.
4. **Run brackets**: :meth:`begin_run` / :meth:`end_run` around every run, so command-buffer
   devices can record and submit; after ``end_run`` outputs must be ready for ``download``.

Contract rules are checked by the conformance suite and the scheduler tests.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import Node, TensorType
from refmnn.ops._schema import OpDef

CONTRACT_VERSION = 1


class Storage(enum.Enum):
    """Where a buffer's bytes live and how long."""

    STATIC = "static"  # weights and packed constants; live as long as the session
    ARENA = "arena"  # activations; offsets come from the memory plan
    WORKSPACE = "workspace"  # kernel scratch; planned like an activation live during one step


@dataclass(frozen=True, slots=True)
class BackendConfig:
    """Settings a user gives a backend.

    Attributes:
        threads: worker threads (None: the backend's default).
        precision: "high", "normal" or "low", as MNN's PrecisionMode; conformance judges a
            backend with the tolerances of its effective precision.
        device: device name or index, for backends that see several.
        options: backend-specific settings (strings), e.g. ``{"arena": "off"}``.
    """

    threads: int | None = None
    precision: str = "normal"
    device: str | int | None = None
    options: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class Probe:
    """Whether a backend can run here, and if not, why (in words)."""

    available: bool
    reason: str = ""
    version: str = ""
    devices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """Everything a kernel may know about one node at one input-shape signature.

    Attributes:
        node: the node (name, op, inputs, outputs, raw attributes).
        opdef: the op definition it was resolved to; ``opdef.reference`` is its meaning.
        opset: the opset the node was resolved at.
        attrs: attributes with schema defaults applied.
        inputs / outputs: static tensor types (None for an omitted optional input).
        constants: input index -> value, for inputs known when planning (weights, shapes).
    """

    node: Node
    opdef: OpDef
    opset: int
    attrs: Mapping[str, Any]
    inputs: tuple[TensorType | None, ...]
    outputs: tuple[TensorType | None, ...]
    constants: Mapping[int, np.ndarray]

    def flops(self) -> float:
        """A rough cost measure: elements produced times elements read per output element."""
        produced = sum(t.numel() or 0 for t in self.outputs if t is not None)
        return float(produced)


def always(spec: NodeSpec) -> bool:
    """The applicability predicate of a scheme that handles every case of its op."""
    return True


QUANT_CODES = frozenset({DType.int8, DType.uint8})
QUANT_DTYPES = frozenset({DType.float32, *QUANT_CODES})
"""The element types of every input and output of :func:`per_tensor_quantization`'s nodes."""


def per_tensor_quantization(spec: NodeSpec) -> bool:
    """A QuantizeLinear (float32 -> int8/uint8) or DequantizeLinear (int8/uint8 -> float32)
    per tensor: a float32 scale of one element, a zero point of one element of the code's
    type or none, no blocks, QuantizeLinear-23's ``precision`` unset or float32 -- the case
    the backends' kernels compute, bit for bit as the reference (``refmnn/ops/quant.py``)."""
    x, out = spec.inputs[0], spec.outputs[0]
    if x is None or out is None:
        return False
    quantize = spec.node.op == "QuantizeLinear"
    code, real = (out, x) if quantize else (x, out)
    if code.dtype not in QUANT_CODES or real.dtype != DType.float32:
        return False
    if quantize and spec.attrs.get("precision", 0) not in (0, DType.float32.value):
        return False
    scale = spec.inputs[1]
    zero = spec.inputs[2] if len(spec.inputs) > 2 else None
    if scale is None or scale.dtype != DType.float32 or scale.numel() != 1:
        return False
    if zero is not None and (zero.dtype != code.dtype or zero.numel() != 1):
        return False
    return not spec.attrs.get("block_size", 0)


@dataclass(frozen=True, slots=True)
class Scheme:
    """One way of computing an op.

    Attributes:
        name: short name shown by explain ("direct", "im2col_gemm", "winograd_f23").
        build: makes the kernel for one node: ``build(backend, spec) -> Kernel``.
        applies: whether this scheme can compute the node (shapes, attributes, dtypes).
        cost: estimated cost, lower is better; None ranks the scheme by declaration order.
        doc: one line on how it works.
    """

    name: str
    build: Callable[[Backend, NodeSpec], Kernel]
    applies: Callable[[NodeSpec], bool] = always
    cost: Callable[[NodeSpec], float] | None = None
    doc: str = ""


@dataclass(frozen=True, slots=True)
class KernelDef:
    """What a backend supports for one op.

    Attributes:
        op, domain: the op (domain "" is ONNX's default domain).
        since: the kernel implements the op's definitions whose ``since`` is at least this
            (a kernel written for Softmax-13 must not run Softmax-11, whose meaning differs).
        dtypes: element types the kernel accepts (of its first input, unless ``dtype_of`` says).
        schemes: first = the simplest, most general scheme.
    """

    op: str
    schemes: tuple[Scheme, ...]
    domain: str = ""
    since: int = 1
    dtypes: frozenset[DType] = frozenset({DType.float32})

    def __post_init__(self) -> None:
        names = [s.name for s in self.schemes]
        if len(set(names)) != len(names):
            raise ValueError(f"KernelDef {self.op}: scheme names must be unique, got {names}")
        if not self.schemes:
            raise ValueError(f"KernelDef {self.op}: needs at least one scheme")


@dataclass(slots=True)
class Buffer:
    """A block of backend memory. ``handle`` is whatever the backend uses (an ndarray, a
    cl.Buffer, a VkDeviceMemory...)."""

    nbytes: int
    storage: Storage
    handle: Any = None


class Kernel(abc.ABC):
    """One node's executable, built by a Scheme."""

    workspace_bytes: int = 0

    def prepare(self, spec: NodeSpec) -> None:  # noqa: B027 - an optional hook
        """Shape-dependent preparation, once per input-shape signature. May be slow and may
        allocate STATIC memory; sets ``workspace_bytes`` if the kernel needs scratch."""

    @abc.abstractmethod
    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], workspace: Any | None) -> None:
        """Compute: write every element of every output; allocate nothing; never write inputs.

        ``inputs`` and ``outputs`` are the backend's device tensors (from :meth:`Backend.view`);
        an omitted optional input is None.
        """

    def bind(self, inputs: Sequence[Any], outputs: Sequence[Any],
             workspace: Any | None) -> Callable[[], None] | None:
        """Optional: a callable that does exactly what ``run(inputs, outputs, workspace)`` does,
        for these very tensors, on every later run -- or None (the default): call ``run``.

        The executor asks once per plan, for steps whose tensors stay the same objects from run
        to run (arena views, constants), and then calls what it got instead of ``run``: a run
        is then the kernels' own calls with no per-node argument handling. So the callable may
        depend on the tensors' identity, shapes and what ``prepare`` worked out, never on their
        values, which change between runs.
        """
        return None


class Backend(abc.ABC):
    """Base class of every backend. Subclasses set ``name`` equal to their entry-point name."""

    name: ClassVar[str] = ""
    contract_version: ClassVar[int] = CONTRACT_VERSION
    host_memory: ClassVar[bool] = False
    """True when device tensors are NumPy arrays in host memory (no copies to the reference)."""
    linear_memory: ClassVar[bool] = False
    """True when :meth:`view` lays a tensor out as its C-order elements from the offset, whatever
    its shape, so two views of the same bytes hold the same values (a buffer and an offset, not an
    image or a blocked layout). The planner then runs steps that only move whole runs of bytes
    (reshapes, Split, Concat) on this backend as aliases: their values get offsets inside one
    another and nothing runs (:data:`refmnn.schedule.plan.ALIAS`)."""

    def __init__(self, config: BackendConfig | None = None) -> None:
        self.config = config or BackendConfig()

    @classmethod
    @abc.abstractmethod
    def probe(cls) -> Probe:
        """Cheap check that the runtime is usable here; never raises; imports its SDK lazily."""

    @abc.abstractmethod
    def kernels(self) -> Sequence[KernelDef]:
        """The declarative support table."""

    @abc.abstractmethod
    def allocate(self, nbytes: int, storage: Storage) -> Buffer:
        """A new buffer of at least ``nbytes`` bytes."""

    def free(self, buffer: Buffer) -> None:
        """Release a buffer (default: drop the handle)."""
        buffer.handle = None

    @abc.abstractmethod
    def view(self, buffer: Buffer, offset: int, type: TensorType) -> Any:
        """A device tensor of static ``type`` at byte ``offset`` of ``buffer``."""

    @abc.abstractmethod
    def upload(self, src: np.ndarray, dst: Any) -> None:
        """Copy a host array into a device tensor of the same shape and dtype."""

    @abc.abstractmethod
    def download(self, src: Any) -> np.ndarray:
        """A new host array with a device tensor's contents (valid after ``end_run``)."""

    def begin_run(self) -> None:  # noqa: B027 - optional hook
        """Called before the first step of every run."""

    def end_run(self) -> None:  # noqa: B027 - optional hook
        """Called after the last step of every run; outputs must then be downloadable."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release device resources; the backend is not used afterwards."""

    def describe(self) -> str:
        """One line naming the device, for reports."""
        return self.name
