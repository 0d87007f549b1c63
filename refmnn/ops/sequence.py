"""Sequence and optional ops: SequenceConstruct ... SequenceMap, Optional, OptionalGetElement.

Runtime representation: a tensor sequence is a Python ``list`` of arrays (possibly empty); an
optional is its element when it holds one and ``None`` when it is empty, so an optional holding
a tensor and the tensor itself are the same value at run time. Positions are int32/int64
scalars (or one-element tensors); negative positions count from the back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import Graph, OptionalType, SequenceType, TensorType, ValueType
from refmnn.ops._control_util import declared_type, merge_all, merge_types
from refmnn.ops._infer import normalize_axis, shape_of
from refmnn.ops._schema import Attr, InferContext, OpContext, flag, op


def _elem(t: ValueType | None) -> ValueType | None:
    """The element type of a sequence type (None when unknown)."""
    return t.elem if isinstance(t, SequenceType) else None


def _position(position: np.ndarray | None, length: int, default: int, *,
              insert: bool = False) -> int:
    """Normalise a position to [0, length) ([0, length] for insert); ``default`` when omitted."""
    if position is None:
        return default
    pos = int(np.asarray(position).reshape(-1)[0])
    high = length if insert else length - 1
    if not -length <= pos <= high:
        accepted = f"[{-length}, {high}]"
        raise IndexError(f"position {pos} is out of range {accepted} for a sequence of {length}")
    return pos + length if pos < 0 else pos


def _check_sequence(value: Any, what: str = "input_sequence") -> list:
    if not isinstance(value, list | tuple):
        raise TypeError(f"{what} must be a sequence (list of tensors), got {type(value).__name__}")
    return list(value)


# ----------------------------------------------------------------------------------- sequences

def _infer_construct(ctx: InferContext, *types: ValueType | None) -> SequenceType:
    return SequenceType(merge_all(list(types)) if types else None)


@op("SequenceConstruct", since=11, inputs=("inputs...",), outputs=("output_sequence",),
    infer=_infer_construct)
def sequence_construct(*inputs: np.ndarray) -> list[np.ndarray]:
    """output_sequence = [inputs[0], inputs[1], ...]; at least one input, all of one dtype.

    Tensors may have different shapes.
    """
    if not inputs:
        raise ValueError("SequenceConstruct needs at least one input")
    dtypes = {np.asarray(x).dtype for x in inputs}
    if len(dtypes) > 1:
        raise TypeError(f"SequenceConstruct inputs differ in dtype: {sorted(map(str, dtypes))}")
    return [np.asarray(x) for x in inputs]


def _infer_empty(ctx: InferContext, *, dtype: int) -> SequenceType:
    return SequenceType(TensorType(DType.from_onnx(dtype), None))


@op("SequenceEmpty", since=11, inputs=(), outputs=("output",), infer=_infer_empty,
    attrs=(Attr("dtype", "int", int(DType.float32.value), "element type code (default float)"),))
def sequence_empty(*, dtype: int) -> list[np.ndarray]:
    """output = [] : an empty sequence whose (future) elements have element type ``dtype``.

    At run time an empty sequence is an empty list; the dtype lives in the type rule only.
    """
    DType.from_onnx(dtype)  # validates the code
    return []


def _infer_at(ctx: InferContext, seq: ValueType | None, position: ValueType | None) -> ValueType:
    elem = _elem(seq)
    return elem if elem is not None else TensorType(None, None)


@op("SequenceAt", since=11, inputs=("input_sequence", "position"), outputs=("tensor",),
    infer=_infer_at)
def sequence_at(input_sequence: list, position: np.ndarray) -> np.ndarray:
    """tensor = input_sequence[position]; position int32/int64 scalar in [-n, n-1]."""
    seq = _check_sequence(input_sequence)
    return seq[_position(position, len(seq), 0)]


def _infer_insert(ctx: InferContext, seq: ValueType | None, tensor: ValueType | None,
                  position: ValueType | None = None) -> SequenceType:
    return SequenceType(merge_types(_elem(seq), tensor))


@op("SequenceInsert", since=11, inputs=("input_sequence", "tensor", "position?"),
    outputs=("output_sequence",), infer=_infer_insert)
def sequence_insert(input_sequence: list, tensor: np.ndarray,
                    position: np.ndarray | None = None) -> list[np.ndarray]:
    """output_sequence = input_sequence with ``tensor`` inserted before index ``position``.

    position: int32/int64 scalar in [-n, n]; omitted means append at the back. The input
    sequence is not modified (a new list is returned). ``tensor`` must have the sequence's dtype
    (checked against the existing elements).
    """
    seq = _check_sequence(input_sequence)
    if seq and np.asarray(seq[0]).dtype != np.asarray(tensor).dtype:
        raise TypeError(f"cannot insert a {np.asarray(tensor).dtype} tensor into a sequence of "
                        f"{np.asarray(seq[0]).dtype}")
    index = _position(position, len(seq), len(seq), insert=True)
    return seq[:index] + [np.asarray(tensor)] + seq[index:]


def _infer_erase(ctx: InferContext, seq: ValueType | None,
                 position: ValueType | None = None) -> SequenceType:
    return seq if isinstance(seq, SequenceType) else SequenceType(None)


@op("SequenceErase", since=11, inputs=("input_sequence", "position?"),
    outputs=("output_sequence",), infer=_infer_erase)
def sequence_erase(input_sequence: list, position: np.ndarray | None = None) -> list[np.ndarray]:
    """output_sequence = input_sequence without the element at ``position`` (default: last).

    position: int32/int64 scalar in [-n, n-1]; erasing from an empty sequence is an error.
    """
    seq = _check_sequence(input_sequence)
    if not seq:
        raise IndexError("cannot erase from an empty sequence")
    index = _position(position, len(seq), len(seq) - 1)
    return seq[:index] + seq[index + 1:]


@op("SequenceLength", since=11, inputs=("input_sequence",), outputs=("length",),
    infer=lambda ctx, seq: TensorType(DType.int64, ()))
def sequence_length(input_sequence: list) -> np.ndarray:
    """length = number of tensors in the sequence, an int64 scalar."""
    return np.array(len(_check_sequence(input_sequence)), dtype=np.int64)


# ---------------------------------------------------------------------------- split / concat

def _infer_split(ctx: InferContext, x: ValueType | None, split: ValueType | None = None, *,
                 axis: int, keepdims: int) -> SequenceType:
    shape = shape_of(x)
    dtype = x.dtype if isinstance(x, TensorType) else None
    if shape is None:
        return SequenceType(TensorType(dtype, None))
    a = normalize_axis(ctx, axis, len(shape))
    if split is None and not keepdims:
        return SequenceType(TensorType(dtype, shape[:a] + shape[a + 1:]))
    return SequenceType(TensorType(dtype, shape[:a] + (None,) + shape[a + 1:]))


def _split_to_sequence(input: np.ndarray, split: np.ndarray | None, axis: int,
                       keepdims: int) -> list[np.ndarray]:
    x = np.asarray(input)
    if not -x.ndim <= axis < max(x.ndim, 1):
        raise ValueError(f"axis {axis} is out of range for rank {x.ndim}")
    axis = axis % x.ndim
    length = x.shape[axis]
    if split is None:
        parts = [np.take(x, i, axis=axis) for i in range(length)]
        if keepdims:
            parts = [np.expand_dims(p, axis) for p in parts]
        return parts
    split = np.asarray(split).astype(np.int64)
    if split.ndim == 0:
        size = int(split)
        if size <= 0:
            raise ValueError(f"split must be positive, got {size}")
        sizes = [size] * (length // size) + ([length % size] if length % size else [])
    else:
        sizes = [int(s) for s in split]
        if any(s < 0 for s in sizes) or sum(sizes) != length:
            raise ValueError(f"split {sizes} must be >= 0 and sum to the axis size {length}")
    bounds = np.cumsum([0, *sizes])
    return [np.take(x, np.arange(bounds[i], bounds[i + 1]), axis=axis) for i in range(len(sizes))]


@op("SplitToSequence", since=11, inputs=("input", "split?"), outputs=("output_sequence",),
    infer=_infer_split,
    attrs=(Attr("axis", "int", 0, "axis to split on, negative counts from the back"),
           flag("keepdims", 1, "keep the split axis when split is omitted")))
def split_to_sequence(input: np.ndarray, split: np.ndarray | None = None, *, axis: int,
                      keepdims: int) -> list[np.ndarray]:
    """Split ``input`` along ``axis`` into a sequence of tensors.

    split omitted: chunks of size 1; with keepdims=0 the split axis is removed from each chunk.
    split scalar s (> 0): chunks of size s, the last one smaller when the axis size is not a
    multiple of s (an axis of size 0 gives an empty sequence). split 1-D: chunk sizes, summing to
    the axis size. keepdims is ignored when split is given. Element dtype = input dtype.
    Opset 24 only added bfloat16 (same definition).
    """
    return _split_to_sequence(input, split, axis, keepdims)


def _infer_concat(ctx: InferContext, seq: ValueType | None, *, axis: int,
                  new_axis: int) -> TensorType:
    elem = _elem(seq)
    shape = shape_of(elem)
    dtype = elem.dtype if isinstance(elem, TensorType) else None
    if shape is None:
        return TensorType(dtype, None)
    rank = len(shape) + (1 if new_axis else 0)
    a = normalize_axis(ctx, axis, rank)
    if new_axis:
        return TensorType(dtype, shape[:a] + (None,) + shape[a:])
    return TensorType(dtype, shape[:a] + (None,) + shape[a + 1:])


@op("ConcatFromSequence", since=11, inputs=("input_sequence",), outputs=("concat_result",),
    infer=_infer_concat,
    attrs=(Attr("axis", "int", doc="concat axis; [-r, r-1], or [-r-1, r] with new_axis"),
           flag("new_axis", 0, "1: stack on a new axis (np.stack), 0: np.concatenate")))
def concat_from_sequence(input_sequence: list, *, axis: int, new_axis: int) -> np.ndarray:
    """concat_result = concatenate(input_sequence, axis) or stack(input_sequence, axis).

    All tensors share dtype and shape except (for concatenation) along ``axis``. An empty
    sequence is an error: its output shape and dtype are not defined at run time.
    """
    seq = _check_sequence(input_sequence)
    if not seq:
        raise ValueError("ConcatFromSequence of an empty sequence is not defined")
    if new_axis:
        return np.stack(seq, axis=axis)
    return np.concatenate(seq, axis=axis)


# ------------------------------------------------------------------------------- SequenceMap

def _infer_map(ctx: InferContext, *types: ValueType | None, body: Graph) -> tuple:
    return tuple(SequenceType(declared_type(v.type, shapes=False) if v.type else None)
                 for v in body.outputs)


@op("SequenceMap", since=17, inputs=("input_sequence", "additional_inputs..."),
    outputs=("out_sequence...",), infer=_infer_map,
    attrs=(Attr("body", "graph", doc="graph applied to each element (the op's inputs/outputs)"),))
def sequence_map(input_sequence: list, *additional_inputs: Any, body: Graph,
                 ctx: OpContext) -> tuple[list, ...]:
    """out_sequence[k][i] = body(input_sequence[i], a_1[i] or a_1, ...)[k].

    The first input is a sequence whose length n sets the number of applications; each other
    input is a sequence of length n (its i-th element is passed) or a tensor (passed whole
    every time). Each body output becomes a sequence of n tensors; n = 0 gives empty sequences.
    """
    seq = _check_sequence(input_sequence)
    n = len(seq)
    for extra in additional_inputs:
        if isinstance(extra, list) and len(extra) != n:
            raise ValueError(f"SequenceMap: sequence inputs have lengths {n} and {len(extra)}")
    outputs: list[list] = [[] for _ in body.outputs]
    for i in range(n):
        args = [seq[i]] + [e[i] if isinstance(e, list) else e for e in additional_inputs]
        for k, value in enumerate(ctx.run_graph(body, args)):
            outputs[k].append(value)
    return tuple(outputs)


# --------------------------------------------------------------------------------- optionals

def _infer_optional(ctx: InferContext, x: ValueType | None = None, *,
                    type: ValueType | None) -> OptionalType:
    if ctx.node.inputs and ctx.node.inputs[0]:
        return OptionalType(x)
    if type is None:
        ctx.fail("Optional without an input needs the 'type' attribute")
    return OptionalType(declared_type(type))


@op("Optional", since=15, inputs=("input?",), outputs=("output",), infer=_infer_optional,
    attrs=(Attr("type", "type", None, "element type; required when the input is omitted"),))
def optional(input: Any = None, *, type: ValueType | None) -> Any:
    """output = optional holding ``input``, or an empty optional (None) of type ``type``.

    The input may be a tensor or a sequence. Opset 28 only added element types.
    """
    return input


def _infer_has(ctx: InferContext, x: ValueType | None = None) -> TensorType:
    return TensorType(DType.bool, ())


@op("OptionalHasElement", since=15, inputs=("input",), outputs=("output",), infer=_infer_has)
def optional_has_element_15(input: Any) -> np.ndarray:
    """output = true iff the optional ``input`` holds an element (bool scalar).

    Opset 15: the input is required and must be optional-typed.
    """
    return np.array(input is not None)


@op("OptionalHasElement", since=18, inputs=("input?",), outputs=("output",), infer=_infer_has)
def optional_has_element(input: Any = None) -> np.ndarray:
    """output = false when the input is omitted or an empty optional, else true (bool scalar).

    Opset 18: the input is optional and may also be a plain tensor or sequence (always true).
    Opset 28 only added element types.
    """
    return np.array(input is not None)


def _infer_get(ctx: InferContext, x: ValueType | None) -> ValueType | None:
    if isinstance(x, OptionalType):
        return x.elem
    return x


def _get_element(input: Any) -> Any:
    if input is None:
        raise ValueError("OptionalGetElement of an empty optional (the spec leaves this undefined)")
    return input


@op("OptionalGetElement", since=15, inputs=("input",), outputs=("output",), infer=_infer_get)
def optional_get_element_15(input: Any) -> Any:
    """output = the element of the optional ``input``; an empty optional is an error.

    Opset 15: the input must be optional-typed.
    """
    return _get_element(input)


@op("OptionalGetElement", since=18, inputs=("input",), outputs=("output",), infer=_infer_get)
def optional_get_element(input: Any) -> Any:
    """output = the element of an optional input, or the input itself when it is a tensor or
    sequence; an empty optional is an error. Opset 28 only added element types."""
    return _get_element(input)


OPS = (
    sequence_construct,
    sequence_empty,
    sequence_at,
    sequence_insert,
    sequence_erase,
    sequence_length,
    split_to_sequence,
    concat_from_sequence,
    sequence_map,
    optional,
    optional_has_element_15,
    optional_has_element,
    optional_get_element_15,
    optional_get_element,
)
