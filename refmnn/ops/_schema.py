"""How an op is defined: :class:`OpDef`, its attribute schema, and the contexts it receives.

An op is one readable NumPy function plus frozen metadata::

    @op("LeakyRelu", since=6, inputs=("X",), outputs=("Y",),
        attrs=(Attr("alpha", "float", 0.01),), infer=same_as(0))
    def leaky_relu(X, *, alpha):
        \"\"\"Y = X if X >= 0 else alpha * X, elementwise.\"\"\"
        return np.where(X >= 0, X, X * X.dtype.type(alpha))

The decorator builds a value and registers nothing; each family module lists its ops in an
``OPS`` tuple and :mod:`refmnn.ops` concatenates those tuples.

Conventions:
    * inputs are named as in the ONNX spec; ``"B?"`` marks an optional input (the function
      receives ``None`` when it is omitted), ``"inputs..."`` a variadic tail (the function takes
      ``*inputs``);
    * attributes are keyword-only parameters; the schema's defaults are applied before the call,
      so a function never sees a missing attribute unless the schema default is ``None``;
    * a function that needs more than its inputs and attributes (control flow, ops whose result
      depends on how many outputs the node lists, random ops) declares a keyword-only ``ctx``
      parameter and receives an :class:`OpContext`;
    * the result is one array, or a tuple with one entry per output.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from refmnn.errors import ShapeError, node_with_types
from refmnn.graph import Dim, Graph, Node, TensorType, ValueType

REQUIRED = object()
"""Sentinel default: the attribute must be present on the node."""

ATTR_KINDS = frozenset(
    {"int", "float", "string", "ints", "floats", "strings", "tensor", "tensors", "graph",
     "graphs", "type", "types", "sparse_tensor", "sparse_tensors"}
)


@dataclass(frozen=True, slots=True)
class Attr:
    """One attribute of an op: its name, ONNX kind, default (or REQUIRED) and meaning."""

    name: str
    kind: str
    default: Any = REQUIRED
    doc: str = ""
    choices: tuple[Any, ...] = ()  # the only values the spec allows; empty: any of the kind

    def __post_init__(self) -> None:
        if self.kind not in ATTR_KINDS:
            raise ValueError(f"attribute {self.name!r}: unknown kind {self.kind!r}")

    def check(self, value: Any) -> str | None:
        """Why ``value`` cannot be this attribute's (wrong kind, not one of the choices), or
        None when it can. None itself passes (an attribute whose default is None)."""
        if value is None:
            return None
        if not _KIND_CHECKS.get(self.kind, _anything)(value):
            return f"must be of kind {self.kind}, got {type(value).__name__} {_short(value)}"
        if self.choices and value not in self.choices:
            return f"must be one of {list(self.choices)}, got {_short(value)}"
        return None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


def flag(name: str, default: int, doc: str = "") -> Attr:
    """An int attribute the spec allows only 0 and 1 for (keepdims, align_corners, ...): any
    other value is refused rather than read as true, since engines disagree on it (``if
    flag`` against ``flag == 1``)."""
    return Attr(name, "int", default, doc, choices=(0, 1))


def _anything(value: Any) -> bool:
    return True


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer)


def _is_real(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating)


def _list_of(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        return isinstance(value, tuple | list | np.ndarray) and all(test(v) for v in value)
    return check


def _is_array(value: Any) -> bool:
    return isinstance(value, np.ndarray | np.generic)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_KIND_CHECKS: dict[str, Callable[[Any], bool]] = {
    "int": _is_int, "float": _is_real, "string": lambda v: isinstance(v, str),
    "ints": _list_of(_is_int), "floats": _list_of(_is_real),
    "strings": _list_of(lambda v: isinstance(v, str)),
    "tensor": _is_array, "tensors": _list_of(_is_array),
    "sparse_tensor": _is_array, "sparse_tensors": _list_of(_is_array),
    "graph": lambda v: isinstance(v, Graph), "graphs": _list_of(lambda v: isinstance(v, Graph)),
}


@dataclass(frozen=True, slots=True)
class Port:
    """An input or output slot parsed from ``"X"``, ``"B?"`` (optional) or ``"xs..."``."""

    name: str
    optional: bool = False
    variadic: bool = False

    @classmethod
    def parse(cls, text: str) -> Port:
        if text.endswith("..."):
            return cls(text[:-3], variadic=True)
        if text.endswith("?"):
            return cls(text[:-1], optional=True)
        return cls(text)


class OpContext:
    """What a reference function may know beyond its inputs and attributes.

    Attributes:
        node: the node being run (name, op, domain, inputs, outputs).
        opset: the opset version the op was resolved at.
        num_outputs: how many outputs the node lists (trailing omitted ones excluded).
        graph: the graph the node belongs to, when known (the interpreter sets it; ops that
            read their own graph, like training's Gradient, need it).
    """

    __slots__ = ("node", "opset", "num_outputs", "graph", "_run_graph", "_rng", "_outer")

    def __init__(
        self,
        node: Node,
        opset: int,
        run_graph: Callable[[Graph, Sequence[Any], Mapping[str, Any]], list[Any]] | None = None,
        rng: np.random.Generator | None = None,
        outer: Mapping[str, Any] | None = None,
        graph: Graph | None = None,
    ) -> None:
        self.node = node
        self.opset = opset
        outputs = list(node.outputs)
        while outputs and not outputs[-1]:
            outputs.pop()
        self.num_outputs = len(outputs)
        self.graph = graph
        self._run_graph = run_graph
        self._rng = rng
        self._outer = outer

    def output_wanted(self, index: int) -> bool:
        """True when the node lists a (non-empty) output at ``index``."""
        return index < len(self.node.outputs) and bool(self.node.outputs[index])

    def run_graph(self, graph: Graph, inputs: Sequence[Any]) -> list[Any]:
        """Run a subgraph (If branch, Loop or Scan body) with positional inputs.

        Names the subgraph reads from enclosing scopes are resolved against the values visible
        to this node.
        """
        if self._run_graph is None:
            raise RuntimeError("this context cannot run subgraphs")
        return self._run_graph(graph, inputs, self._outer or {})

    @property
    def rng(self) -> np.random.Generator:
        """The session's random generator, for random ops without a ``seed`` attribute."""
        if self._rng is None:
            self._rng = np.random.default_rng(0)
        return self._rng


class InferContext:
    """Passed to every shape rule: constant input values, output count and a way to fail."""

    __slots__ = ("node", "opset", "num_outputs", "_values", "_fresh", "_types")

    def __init__(
        self,
        node: Node,
        opset: int,
        values: Sequence[np.ndarray | None] = (),
        types: Sequence[ValueType | None] = (),
    ) -> None:
        self.node = node
        self.opset = opset
        self._types = tuple(types)
        outputs = list(node.outputs)
        while outputs and not outputs[-1]:
            outputs.pop()
        self.num_outputs = len(outputs)
        self._values = tuple(values)
        self._fresh = 0

    def value(self, index: int) -> np.ndarray | None:
        """The constant value of input ``index`` when it is known before running, else None."""
        if index < len(self._values):
            return self._values[index]
        return None

    def fresh_dim(self, what: str = "") -> str:
        """A new symbolic dimension for a data-dependent size (NonZero, Unique, ...)."""
        self._fresh += 1
        label = f"_{what}" if what else ""
        return f"{self.node.name or self.node.op}{label}_{self._fresh}"

    def fail(self, message: str) -> NoReturn:
        """Raise a ShapeError naming this node, its op and opset and its input types."""
        raise ShapeError(f"{node_with_types(self.node, self.opset, self._types)}: {message}")


InferFn = Callable[..., "ValueType | tuple[ValueType | None, ...] | None"]


@dataclass(frozen=True, slots=True)
class OpDef:
    """The definition of one op at one range of opset versions.

    Attributes:
        name: the op type (``"Conv"``).
        domain: ``""`` for the default ONNX domain, else the domain name.
        since: the first opset version this definition is valid for; the registry picks the
            largest ``since`` that is <= the model's opset.
        inputs / outputs: the ports, parsed from the decorator's strings.
        attrs: the attribute schema with defaults.
        reference: the NumPy function that is the op's meaning.
        infer: the shape/dtype rule ``infer(ctx, *input_types, **attrs)``; returns one type or a
            tuple with one type (or None when unknown) per output.
        value_inputs: indices of inputs whose *values* the shape rule needs (Reshape's shape).
        takes_context: the reference function declares a ``ctx`` keyword parameter.
        writes_out: the reference function declares an ``out`` keyword parameter: the
            reference backend hands it the planned buffer of the first output, and the function
            may write its result there and return it (saving the copy into the arena). It must
            return a new array instead when ``out`` is None or does not have exactly the
            result's shape and dtype (see :func:`into`).
        in_place: inputs whose bytes the first output may take (an op with ``out``): the
            function reads every element of such an input that it needs before it writes the
            output element stored in that element's bytes, so it computes the same values when
            ``out`` *is* that input (a NumPy ufunc does, whatever the overlap; a function that
            first reduces the input, then writes elementwise does). The planner lets the
            reference's output take an input's bytes where that input is dead after the node
            (``refmnn.schedule.plan._in_place``); ``tests/test_in_place.py`` checks the
            claim on every conformance sample of every op that makes it.
        doc: the reference function's docstring.
    """

    name: str
    domain: str
    since: int
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    attrs: tuple[Attr, ...]
    reference: Callable[..., Any]
    infer: InferFn | None = None
    value_inputs: tuple[int, ...] = ()
    takes_context: bool = False
    writes_out: bool = False
    in_place: tuple[int, ...] = ()
    doc: str = ""
    attr_index: Mapping[str, Attr] = field(default_factory=dict, compare=False, repr=False)

    def bind_attrs(self, given: Mapping[str, Any], where: str = "") -> dict[str, Any]:
        """Check ``given`` against the schema and fill in defaults.

        Raises:
            ValueError: an unknown attribute, a required one missing, or a value of the wrong
                kind or outside the attribute's choices (the caller wraps it with node
                context).
        """
        unknown = sorted(set(given) - set(self.attr_index))
        if unknown:
            known = ", ".join(a.name for a in self.attrs) or "none"
            raise ValueError(f"{where}unknown attribute(s) {unknown} for {self.name}-{self.since} "
                             f"(known: {known})")
        bound: dict[str, Any] = {}
        for attr in self.attrs:
            if attr.name in given:
                problem = attr.check(given[attr.name])
                if problem is not None:
                    raise ValueError(f"{where}attribute {attr.name!r} of {self.name}-{self.since} "
                                     f"{problem}")
                bound[attr.name] = given[attr.name]
            elif attr.required:
                raise ValueError(f"{where}required attribute {attr.name!r} of {self.name} missing")
            else:
                bound[attr.name] = attr.default
        return bound

    def __call__(self, *inputs: Any, ctx: OpContext | None = None, **attrs: Any) -> Any:
        """Run the reference directly, as a NumPy library call: defaults are applied first."""
        bound = self.bind_attrs(attrs)
        if self.takes_context:
            if ctx is None:
                node = Node(name=self.name, op=self.name, domain=self.domain,
                            inputs=tuple(f"in{i}" for i in range(len(inputs))),
                            outputs=tuple(p.name for p in self.outputs))
                ctx = OpContext(node, self.since)
            return self.reference(*inputs, ctx=ctx, **bound)
        return self.reference(*inputs, **bound)

    def pad_inputs(self, inputs: list[Any]) -> list[Any]:
        """Append None for trailing optional inputs the node omits (non-variadic ops), so the
        function sees every declared optional input, as None when absent."""
        if any(p.variadic for p in self.inputs) or len(inputs) >= len(self.inputs):
            return inputs
        return inputs + [None] * (len(self.inputs) - len(inputs))

    @property
    def min_inputs(self) -> int:
        count = 0
        for index, port in enumerate(self.inputs):
            if not port.optional and not port.variadic:
                count = index + 1
        return count

    @property
    def max_inputs(self) -> int | None:
        if any(p.variadic for p in self.inputs):
            return None
        return len(self.inputs)


def op(
    name: str,
    *,
    since: int,
    inputs: Sequence[str],
    outputs: Sequence[str],
    attrs: Sequence[Attr] = (),
    infer: InferFn | None = None,
    value_inputs: Sequence[int] = (),
    domain: str = "",
    in_place: Sequence[int] = (),
) -> Callable[[Callable[..., Any]], OpDef]:
    """Build an :class:`OpDef` from a reference function; registers nothing.

    The function's keyword-only parameters must be exactly the declared attributes (plus an
    optional ``ctx`` and an optional ``out``), so the signature you read is the schema.
    ``in_place`` (see :attr:`OpDef.in_place`) needs the ``out`` parameter.
    """

    def build(fn: Callable[..., Any]) -> OpDef:
        signature = inspect.signature(fn)
        keyword_only = [p.name for p in signature.parameters.values()
                        if p.kind is inspect.Parameter.KEYWORD_ONLY]
        takes_context = "ctx" in keyword_only
        declared = {a.name for a in attrs}
        params = set(keyword_only) - {"ctx", "out"}
        if params != declared:
            raise TypeError(
                f"{name}-{since}: keyword parameters {sorted(params)} do not match the attribute "
                f"schema {sorted(declared)}"
            )
        if in_place and "out" not in keyword_only:
            raise TypeError(f"{name}-{since}: in_place needs an ``out`` parameter")
        return OpDef(
            name=name,
            domain="" if domain == "ai.onnx" else domain,
            since=since,
            inputs=tuple(Port.parse(s) for s in inputs),
            outputs=tuple(Port.parse(s) for s in outputs),
            attrs=tuple(attrs),
            reference=fn,
            infer=infer,
            value_inputs=tuple(value_inputs),
            takes_context=takes_context,
            writes_out="out" in keyword_only,
            in_place=tuple(in_place),
            doc=inspect.getdoc(fn) or "",
            attr_index={a.name: a for a in attrs},
        )

    return build


def into(out: np.ndarray | None, shape: tuple[int, ...], dtype: Any) -> np.ndarray | None:
    """``out`` when it is an array of exactly ``shape`` and ``dtype``, else None.

    For reference functions with an ``out`` parameter (:attr:`OpDef.writes_out`): they write
    into ``into(out, result_shape, result_dtype)``, so a planned buffer that does not match the
    result (a shape-inference bug) is never written through NumPy's broadcasting or casting;
    the function returns a new array and the reference backend reports the mismatch.
    """
    if out is None or out.shape != tuple(shape) or out.dtype != np.dtype(dtype):
        return None
    return out


def version(opdef: OpDef, since: int, **changes: Any) -> OpDef:
    """A copy of ``opdef`` valid from opset ``since`` (for versions whose meaning is unchanged
    but whose schema changed, e.g. a new dtype); ``changes`` may replace other fields."""
    from dataclasses import replace as _replace

    return _replace(opdef, since=since, **changes)


def dims_equal(a: Dim, b: Dim) -> bool:
    """True when two dims are known to be equal (both ints and equal, or the same symbol)."""
    return a is not None and a == b


def tensor(dtype: Any, shape: Sequence[Dim] | None) -> TensorType:
    """Shorthand for a TensorType from a DType/NumPy dtype and a shape."""
    from refmnn.dtypes import DType

    if dtype is not None and not isinstance(dtype, DType):
        dtype = DType.from_numpy(np.dtype(dtype))
    return TensorType(dtype, None if shape is None else tuple(shape))
