"""What a conformance case is: an op, the dtypes it is checked in, and how to make its samples.

Written in the style of PyTorch's OpInfo: one frozen :class:`OpCase` per op (and per old opset
whose meaning differs), whose ``samples`` function yields :class:`Sample` objects made from a
:class:`SampleContext`. The context is seeded from the case's id, never from the global random
state, so a sample is the same on every machine, in every process and in every order of tests.

::

    OpCase("Add", dtypes=FLOATS, samples=binary_samples,
           tolerance={DType.float16: Tol(2e-3, 1e-5, "the half-precision add of two roundings")})
"""

from __future__ import annotations

import enum
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

import ml_dtypes
import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import RefmnnError


@dataclass(frozen=True, slots=True)
class Tol:
    """A tolerance: ``|got - want| <= atol + rtol * |want|``, with the reason for its size."""

    rtol: float
    atol: float
    why: str

    def __post_init__(self) -> None:
        if not self.why or not self.why.strip():
            raise ValueError(f"Tol(rtol={self.rtol}, atol={self.atol}) needs a written reason (why)")
        if self.rtol < 0 or self.atol < 0:
            raise ValueError(f"Tol: rtol and atol must be >= 0, got {self.rtol}, {self.atol}")

    @property
    def exact(self) -> bool:
        return self.rtol == 0 and self.atol == 0

    def widened(self, factor: float, why: str) -> Tol:
        """This tolerance scaled by ``factor`` (both terms), with the reason appended."""
        if factor <= 1:
            return self
        return Tol(self.rtol * factor, self.atol * factor, f"{self.why}; {why}")


@dataclass(frozen=True, slots=True)
class Sample:
    """One set of inputs and attributes for an op.

    Attributes:
        inputs: one array per input port, in order; ``None`` for an omitted optional input.
        attrs: the node's attributes (schema defaults apply to the others).
        name: short, unique within its case and dtype; part of the test id.
        outputs: how many outputs the node lists (2 for MaxPool with Indices; default 1).
    """

    inputs: tuple[np.ndarray | None, ...]
    attrs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    name: str = "sample"
    outputs: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        if not isinstance(self.attrs, MappingProxyType):
            object.__setattr__(self, "attrs", MappingProxyType(dict(self.attrs)))
        if not self.name or any(c in self.name for c in " []@"):
            raise ValueError(f"sample name {self.name!r}: non-empty, no spaces, brackets or '@'")

    def describe(self) -> str:
        """Input specs and attributes, one line (for failure messages and reports)."""
        specs = ", ".join("None" if a is None else f"{a.dtype}{list(a.shape)}" for a in self.inputs)
        attrs = ", ".join(f"{k}={_short(v)}" for k, v in sorted(self.attrs.items()))
        return f"inputs ({specs})" + (f" attrs {{{attrs}}}" if attrs else "")


def _short(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array{list(value.shape)}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True, slots=True)
class ErrorSample:
    """A sample the op must refuse: running it raises ``error`` with a message matching ``match``."""

    sample: Sample
    error: type[RefmnnError]
    match: str = ""

    def __post_init__(self) -> None:
        if not (isinstance(self.error, type) and issubclass(self.error, RefmnnError)):
            raise TypeError(f"ErrorSample {self.sample.name}: error must be a RefmnnError subclass")


class Domain(enum.Enum):
    """Where the values of a generated array come from."""

    ANY = "any"  # standard normal floats; integers in [-10, 10) (unsigned [0, 20)); fair bools
    POSITIVE = "positive"  # uniform in [0.1, 4)
    NONZERO = "nonzero"  # |x| >= 0.1, either sign
    UNIT = "unit"  # uniform in [-1, 1]
    SMALL_INT = "small_int"  # integers in [-4, 4] (floats hold them exactly)
    EXTREMAL = "extremal"  # -0.0, +-inf, NaN, subnormals, max/min finite, integer extremes, ...


ANY, POSITIVE, NONZERO, UNIT, SMALL_INT, EXTREMAL = (
    Domain.ANY, Domain.POSITIVE, Domain.NONZERO, Domain.UNIT, Domain.SMALL_INT, Domain.EXTREMAL)


def _finfo(dtype: np.dtype) -> Any:
    return ml_dtypes.finfo(dtype) if dtype.kind == "V" or dtype not in (
        np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)) else np.finfo(dtype)


def _is_float(dtype: np.dtype) -> bool:
    try:
        return DType.from_numpy(dtype).is_float
    except KeyError:
        return False


def extremal_values(dtype: np.dtype) -> np.ndarray:
    """The special values of ``dtype``: what EXTREMAL samples mix into their data."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.array([False, True])
    if _is_float(dtype):
        info = _finfo(dtype)
        values = [0.0, -0.0, 1.0, -1.0, float(info.max), float(-info.max), float(info.tiny),
                  float(-info.tiny)]
        smallest = float(getattr(info, "smallest_subnormal", 0.0) or 0.0)
        if smallest and smallest < float(info.tiny):
            values += [smallest, -smallest]
        with np.errstate(over="ignore", invalid="ignore"):
            for special in (np.inf, -np.inf, np.nan):
                cast = np.array(special, dtype=np.float32).astype(dtype)
                if np.isnan(special) and np.isnan(cast.astype(np.float32)):
                    values.append(special)
                elif np.isinf(cast.astype(np.float32)):
                    values.append(special)
        with np.errstate(over="ignore", invalid="ignore"):
            return np.array(values, dtype=np.float64).astype(dtype)
    info = ml_dtypes.iinfo(dtype) if dtype.kind == "V" else np.iinfo(dtype)
    values = sorted({int(info.min), int(info.max), 0, 1, int(info.max) - 1,
                     *([-1, int(info.min) + 1] if int(info.min) < 0 else [])})
    return np.array(values, dtype=object).astype(dtype)  # object: exact for uint64 extremes


class SampleContext:
    """Makes the arrays of one case at one dtype, reproducibly.

    Attributes:
        case_id: ``Op@opset`` (plus the variant); with the dtype it names the seed.
        dtype: the NumPy dtype being tested.
        seed: ``zlib.crc32`` of ``"<case id>-<dtype name>"``.
        rng: ``np.random.default_rng(seed)``; use it for any other random choice.
    """

    def __init__(self, case_id: str, dtype: DType) -> None:
        self.case_id = case_id
        self.dtype_name = dtype.name
        self.dtype = dtype.numpy
        self.seed = zlib.crc32(f"{case_id}-{dtype.name}".encode())
        self.rng = np.random.default_rng(self.seed)

    @property
    def is_float(self) -> bool:
        return _is_float(self.dtype)

    def make(self, shape: Iterable[int] | int, domain: Domain = Domain.ANY,
             dtype: Any = None) -> np.ndarray:
        """A new array of ``shape`` and ``dtype`` (the context's by default) from ``domain``."""
        shape = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
        dtype = self.dtype if dtype is None else (dtype.numpy if isinstance(dtype, DType) else np.dtype(dtype))
        rng = self.rng
        if dtype == np.bool_:
            return rng.integers(0, 2, shape).astype(np.bool_)
        if _is_float(dtype):
            if domain is Domain.POSITIVE:
                data = rng.uniform(0.1, 4.0, shape)
            elif domain is Domain.NONZERO:
                data = rng.standard_normal(shape)
                data = np.where(data < 0, -1.0, 1.0) * (0.1 + np.abs(data))
            elif domain is Domain.UNIT:
                data = rng.uniform(-1.0, 1.0, shape)
            elif domain is Domain.SMALL_INT:
                data = rng.integers(-4, 5, shape).astype(np.float64)
            else:
                data = rng.standard_normal(shape)
            with np.errstate(over="ignore", invalid="ignore"):
                data = data.astype(np.float32).astype(dtype)
        else:
            info = ml_dtypes.iinfo(dtype) if dtype.kind == "V" else np.iinfo(dtype)
            low, high = (-10, 10) if int(info.min) < 0 else (0, 20)
            if domain is Domain.POSITIVE or domain is Domain.NONZERO and int(info.min) >= 0:
                low, high = 1, 10
            elif domain is Domain.SMALL_INT or domain is Domain.UNIT:
                low, high = (-4, 5) if int(info.min) < 0 else (0, 5)
            low, high = max(low, int(info.min)), min(high, int(info.max) + 1)
            data = rng.integers(low, high, shape)
            if domain is Domain.NONZERO:
                data = np.where(data == 0, 1, data)
            data = data.astype(dtype)
        if domain is Domain.EXTREMAL and data.size:
            special = extremal_values(dtype)
            count = max(1, data.size // 2)
            where = rng.choice(data.size, size=min(count, data.size), replace=False)
            flat = data.reshape(-1)
            flat[where] = special[rng.integers(0, len(special), len(where))]
            # every special value appears at least once when there is room
            if data.size >= 2 * len(special):
                flat[where[:len(special)]] = special[: len(where[:len(special)])]
        return data

    def noncontiguous(self, array: np.ndarray) -> np.ndarray:
        """A strided (non-C-contiguous) view holding the same values as ``array``."""
        array = np.asarray(array)
        if array.ndim == 0 or array.size == 0:
            return array
        shape = (*array.shape[:-1], array.shape[-1] * 2)
        base = np.zeros(shape, dtype=array.dtype)
        view = base[..., ::2]
        view[...] = array
        return view

    def scalar(self, value: Any, dtype: Any = None) -> np.ndarray:
        """A 0-d array of the context's dtype (or ``dtype``)."""
        dtype = self.dtype if dtype is None else (dtype.numpy if isinstance(dtype, DType) else np.dtype(dtype))
        return np.array(value).astype(dtype)

    def array(self, values: Any, dtype: Any = None) -> np.ndarray:
        """Fixed values as an array of the context's dtype (or ``dtype``)."""
        dtype = self.dtype if dtype is None else (dtype.numpy if isinstance(dtype, DType) else np.dtype(dtype))
        with np.errstate(over="ignore", invalid="ignore"):
            return np.array(values, dtype=np.float64 if _is_float(dtype) else None).astype(dtype)


SampleFn = Callable[[SampleContext], Iterable[Sample]]
ErrorFn = Callable[[SampleContext], Iterable[ErrorSample]]


@dataclass(frozen=True)
class OpCase:
    """Everything the suite checks for one op at one opset.

    Attributes:
        op, domain: the op (``""`` is the default ONNX domain).
        opset: the opset the one-node graph imports; None means the op's newest ONNX version.
        dtypes: the element types to check (the sample context makes data in each).
        samples: ``samples(ctx) -> Iterable[Sample]``; called once per dtype.
        errors: ``errors(ctx) -> Iterable[ErrorSample]`` for inputs the op must refuse.
        tolerance: per-dtype overrides of the default table, each with its reason.
        accumulates: ``accumulates(sample) -> K``, the length of the longest sum behind one
            output element; float tolerances widen by sqrt(K).
        tags: free-form labels ("slow", "reduction", ...), selectable with ``-k``.
        variant: distinguishes two cases of one op at one opset (part of the id).
        constants: indices of inputs given as initializers instead of fed, as a model's
            weights are: a backend may keep schemes for constant operands only (weights
            packed once, when planning), and only such a case checks them.
    """

    op: str
    dtypes: tuple[DType, ...]
    samples: SampleFn
    domain: str = ""
    opset: int | None = None
    errors: ErrorFn | None = None
    tolerance: Mapping[DType, Tol] = field(default_factory=lambda: MappingProxyType({}))
    accumulates: Callable[[Sample], int] | None = None
    tags: tuple[str, ...] = ()
    variant: str = ""
    constants: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtypes", tuple(self.dtypes))
        object.__setattr__(self, "constants", tuple(self.constants))
        object.__setattr__(self, "tags", tuple(self.tags))
        if not isinstance(self.tolerance, MappingProxyType):
            object.__setattr__(self, "tolerance", MappingProxyType(dict(self.tolerance)))
        for dtype, tol in self.tolerance.items():
            if not isinstance(tol, Tol):
                raise TypeError(f"{self.op}: tolerance for {dtype} must be a Tol, got {tol!r}")
            if not tol.why.strip():  # Tol validates too; kept for objects built around it
                raise ValueError(f"{self.op}: tolerance override for {dtype} needs a reason")
        if not self.dtypes:
            raise ValueError(f"{self.op}: needs at least one dtype")

    @cached_property
    def resolved_opset(self) -> int:
        """The opset the case runs at: ``opset`` or the op's newest version in onnx."""
        if self.opset is not None:
            return self.opset
        import onnx.defs

        return int(onnx.defs.get_schema(self.op, onnx.defs.onnx_opset_version(),
                                        self.domain).since_version)

    @property
    def id(self) -> str:
        """``Op@opset`` (``domain::Op@opset`` outside the default domain), plus ``.variant``."""
        name = self.op if not self.domain else f"{self.domain}::{self.op}"
        return f"{name}@{self.resolved_opset}" + (f".{self.variant}" if self.variant else "")

    def context(self, dtype: DType) -> SampleContext:
        return SampleContext(self.id, dtype)

    def make_samples(self, dtype: DType) -> list[Sample]:
        """The samples for ``dtype``; names must be unique."""
        samples = list(self.samples(self.context(dtype)))
        _unique(self.id, dtype, [s.name for s in samples])
        return samples

    def make_errors(self, dtype: DType) -> list[ErrorSample]:
        if self.errors is None:
            return []
        errors = list(self.errors(self.context(dtype)))
        _unique(self.id, dtype, [e.sample.name for e in errors])
        return errors


def _unique(case_id: str, dtype: DType, names: list[str]) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{case_id} ({dtype.name}): duplicate sample name {name!r}")
        seen.add(name)
