"""Control flow: If, Loop, Scan.

Each op runs a subgraph (a refmnn :class:`Graph` attribute) through ``ctx.run_graph``; names a
subgraph reads from enclosing scopes resolve automatically. Values may be tensors, sequences
(Python lists) or optionals (``None`` when empty).

Shape rules use the subgraphs' *declared* output types (their symbolic dims become unknown,
element shapes of sequences are dropped) merged with what the inputs say, so they never claim
more than every iteration or branch guarantees.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refmnn.graph import Graph, TensorType, ValueType
from refmnn.ops._control_util import declared_type, empty_stack, merge_types, scalar_bool
from refmnn.ops._infer import shape_of
from refmnn.ops._schema import Attr, InferContext, OpContext, op

# ---------------------------------------------------------------------------------------- If


def _infer_if(ctx: InferContext, cond: ValueType | None, *, then_branch: Graph,
              else_branch: Graph) -> tuple[ValueType | None, ...]:
    if len(then_branch.outputs) != len(else_branch.outputs):
        ctx.fail(f"then_branch has {len(then_branch.outputs)} outputs, else_branch "
                 f"{len(else_branch.outputs)}")
    thens = [declared_type(v.type) for v in then_branch.outputs]
    elses = [declared_type(v.type) for v in else_branch.outputs]
    known = ctx.value(0)
    if known is not None and np.asarray(known).size == 1:
        return tuple(thens if bool(np.asarray(known).reshape(-1)[0]) else elses)
    return tuple(merge_types(t, e) for t, e in zip(thens, elses, strict=True))


@op("If", since=1, inputs=("cond",), outputs=("outputs...",), infer=_infer_if, value_inputs=(0,),
    attrs=(Attr("then_branch", "graph", doc="graph run when cond is true"),
           Attr("else_branch", "graph", doc="graph run when cond is false")))
def if_(cond: np.ndarray, *, then_branch: Graph, else_branch: Graph, ctx: OpContext) -> tuple:
    """outputs = then_branch() if cond else else_branch().

    cond: a bool tensor with exactly one element. Both branches take no inputs and have the
    same number of outputs; since opset 11 the branches' outputs may differ in shape, since 13
    they may be sequences, since 16 optionals (one definition covers every version: only the
    admissible types grew). Only the chosen branch runs.
    """
    branch = then_branch if scalar_bool(cond, "If's cond") else else_branch
    return tuple(ctx.run_graph(branch, []))


# -------------------------------------------------------------------------------------- Loop


def _carried_type(initial: ValueType | None, body_out: ValueType | None) -> ValueType | None:
    """A loop-carried value is the initial value (zero iterations) or a body output."""
    if isinstance(initial, TensorType) and body_out is None:
        return TensorType(initial.dtype, None)
    if initial is None and isinstance(body_out, TensorType):
        return TensorType(body_out.dtype, None)
    return merge_types(initial, body_out)


def _infer_loop(ctx: InferContext, M: ValueType | None, cond: ValueType | None,
                *v_initial: ValueType | None, body: Graph) -> tuple[ValueType | None, ...]:
    n = len(v_initial)
    if len(body.inputs) != n + 2 or len(body.outputs) < n + 1:
        ctx.fail(f"Loop with {n} carried value(s) needs a body with {n + 2} inputs and at least "
                 f"{n + 1} outputs, got {len(body.inputs)} and {len(body.outputs)}")
    declared = [declared_type(v.type) for v in body.outputs]
    carried = [_carried_type(v_initial[k], declared[1 + k]) for k in range(n)]
    scans: list[ValueType | None] = []
    for t in declared[1 + n:]:
        shape = shape_of(t)
        dtype = t.dtype if isinstance(t, TensorType) else None
        scans.append(TensorType(dtype, None if shape is None else (None, *shape)))
    return tuple(carried + scans)


@op("Loop", since=1, inputs=("M?", "cond?", "v_initial..."),
    outputs=("v_final_and_scan_outputs...",), infer=_infer_loop,
    attrs=(Attr("body", "graph", doc="(iteration_num, cond, carried...) -> "
                "(cond, carried..., scan_outputs...)"),))
def loop(M: np.ndarray | None, cond: np.ndarray | None, *v_initial: Any, body: Graph,
         ctx: OpContext) -> tuple:
    """Run ``body`` repeatedly, threading N loop-carried values and stacking K scan outputs.

    M: optional int64 scalar, the maximum trip count. cond: optional bool scalar, whether to run
    the first iteration. Iteration i calls ``body(i, cond_i, carried...)`` (i an int64 scalar)
    and gets ``(cond_out, carried..., scan_elems...)``. Following the spec's table:

    * (M, cond): for i < M while cond;  (None, cond): while cond;
    * (M, None): for i < M, the body's cond output is ignored (ONNX Runtime does not ignore
      it; the spec does);
    * (None, None): an infinite loop per the spec; refused with an error.

    Outputs: the final carried values (the initial ones after zero iterations), then each scan
    output stacked on a new first axis. After zero iterations a scan output is empty, shaped
    (0, *declared element shape) with unknown dims taken as 0. Carried values may be tensors,
    sequences (opset 13) or optionals (opset 16); their shapes may change between iterations.
    Scan-output elements must have the same shape and dtype in every iteration.
    """
    n = len(v_initial)
    trip = None if M is None else int(np.asarray(M).reshape(-1)[0])
    if trip is None and cond is None:
        raise ValueError("Loop with neither M nor cond never terminates (the body's cond output is "
                         "ignored in that form)")
    keep_going = True if cond is None else scalar_bool(cond, "Loop's cond")
    carried = list(v_initial)
    scans: list[list[Any]] = [[] for _ in body.outputs[1 + n:]]
    i = 0
    while keep_going and (trip is None or i < trip):
        outs = ctx.run_graph(body, [np.array(i, dtype=np.int64), np.array(keep_going), *carried])
        if cond is not None:
            keep_going = scalar_bool(outs[0], "the Loop body's cond output")
        carried = list(outs[1:1 + n])
        for k, value in enumerate(outs[1 + n:]):
            scans[k].append(value)
        i += 1
    stacked = [np.stack(values) if values else empty_stack(body.outputs[1 + n + k].type)
               for k, values in enumerate(scans)]
    return tuple(carried + stacked)


# -------------------------------------------------------------------------------------- Scan

_BODY_DOC = "(states..., scan_elems...) -> (states..., scan_out_elems...)"


def _scan_outputs(values: list[list[np.ndarray]], types: list[ValueType | None],
                  axes: list[int], reverse: list[int]) -> list[np.ndarray]:
    """Stack each scan output's per-iteration elements on its axis (reversed if prepending)."""
    result = []
    for elems, t, axis, rev in zip(values, types, axes, reverse, strict=True):
        if not elems:
            empty = empty_stack(t)
            result.append(np.moveaxis(empty, 0, axis))
            continue
        result.append(np.stack(elems[::-1] if rev else elems, axis=axis))
    return result


def _infer_scan(ctx: InferContext, *types: ValueType | None, body: Graph, num_scan_inputs: int,
                scan_input_axes: tuple[int, ...] | None,
                scan_input_directions: tuple[int, ...] | None,
                scan_output_axes: tuple[int, ...] | None,
                scan_output_directions: tuple[int, ...] | None) -> tuple[ValueType | None, ...]:
    n = len(types) - num_scan_inputs
    if n < 0 or len(body.inputs) != len(types) or len(body.outputs) < n:
        ctx.fail(f"Scan: body with {len(body.inputs)} inputs/{len(body.outputs)} outputs does not "
                 f"fit {len(types)} inputs with num_scan_inputs={num_scan_inputs}")
    declared = [declared_type(v.type) for v in body.outputs]
    states = [_carried_type(types[k], declared[k]) for k in range(n)]
    length = None
    first = shape_of(types[n]) if num_scan_inputs else None
    if first is not None and first:
        axis = (scan_input_axes or (0,))[0]
        length = first[axis % len(first)] if -len(first) <= axis < len(first) else None
    scans: list[ValueType | None] = []
    for j, t in enumerate(declared[n:]):
        shape = shape_of(t)
        dtype = t.dtype if isinstance(t, TensorType) else None
        if shape is None:
            scans.append(TensorType(dtype, None))
            continue
        axis = (scan_output_axes or ())[j] if j < len(scan_output_axes or ()) else 0
        axis = axis % (len(shape) + 1) if -len(shape) - 1 <= axis <= len(shape) else 0
        scans.append(TensorType(dtype, (*shape[:axis], length, *shape[axis:])))
    return tuple(states + scans)


@op("Scan", since=9, inputs=("initial_state_and_scan_inputs...",),
    outputs=("final_state_and_scan_outputs...",), infer=_infer_scan,
    attrs=(Attr("body", "graph", doc=_BODY_DOC),
           Attr("num_scan_inputs", "int", doc="number M of scan inputs (the trailing inputs)"),
           Attr("scan_input_axes", "ints", None, "per scan input: the axis scanned (default 0)"),
           Attr("scan_input_directions", "ints", None, "per scan input: 0 forward, 1 reverse"),
           Attr("scan_output_axes", "ints", None, "per scan output: the axis stacked on"),
           Attr("scan_output_directions", "ints", None, "per scan output: 0 append, 1 prepend")))
def scan(*initial_state_and_scan_inputs: np.ndarray, body: Graph, num_scan_inputs: int,
         scan_input_axes: tuple[int, ...] | None, scan_input_directions: tuple[int, ...] | None,
         scan_output_axes: tuple[int, ...] | None, scan_output_directions: tuple[int, ...] | None,
         ctx: OpContext) -> tuple:
    """Iterate ``body`` over slices of M scan inputs, threading N state values.

    With T = size of the scanned axis (equal for every scan input), for t in 0..T-1:
    ``states, elems = body(states, x_1<axis_1>[t'], ..., x_M<axis_M>[t'])`` where t' = t, or
    T-1-t for a reversed input. Outputs: the final states, then each scan output: the T
    elements stacked along its output axis (in reverse order when prepending). Axes may be
    negative (opset 11 documents it; accepted for every version): an input axis counts within
    the input's rank r, an output axis within r+1. T = 0 gives the initial states and empty scan
    outputs shaped from the body's declared element type (unknown dims as 0).
    Versions 11-25 only added element types.
    """
    m = num_scan_inputs
    values = list(initial_state_and_scan_inputs)
    n = len(values) - m
    if n < 0 or m < 1:
        raise ValueError(f"Scan needs num_scan_inputs >= 1 and <= {len(values)}, got {m}")
    states, xs = values[:n], [np.asarray(x) for x in values[n:]]
    in_axes = list(scan_input_axes or [0] * m)
    in_dirs = list(scan_input_directions or [0] * m)
    k = len(body.outputs) - n
    out_axes = list(scan_output_axes or [0] * k)
    out_dirs = list(scan_output_directions or [0] * k)
    sliced = []
    for x, axis, rev in zip(xs, in_axes, in_dirs, strict=True):
        moved = np.moveaxis(x, axis, 0)
        sliced.append(moved[::-1] if rev else moved)
    steps = {s.shape[0] for s in sliced}
    if len(steps) != 1:
        raise ValueError(f"scan inputs differ in length along their scan axes: {sorted(steps)}")
    collected: list[list[np.ndarray]] = [[] for _ in range(k)]
    for t in range(steps.pop()):
        outs = ctx.run_graph(body, [*states, *(s[t] for s in sliced)])
        states = list(outs[:n])
        for j, value in enumerate(outs[n:]):
            collected[j].append(np.asarray(value))
    types = [v.type for v in body.outputs[n:]]
    return tuple(states + _scan_outputs(collected, types, out_axes, out_dirs))


def _infer_scan_8(ctx: InferContext, sequence_lens: ValueType | None, *types: ValueType | None,
                  body: Graph, num_scan_inputs: int,
                  directions: tuple[int, ...] | None) -> tuple[ValueType | None, ...]:
    n = len(types) - num_scan_inputs
    if n < 0 or len(body.inputs) != len(types) or len(body.outputs) < n:
        ctx.fail(f"Scan-8: body with {len(body.inputs)} inputs/{len(body.outputs)} outputs does "
                 f"not fit {len(types)} inputs with num_scan_inputs={num_scan_inputs}")
    batch = length = None
    first = shape_of(types[n]) if num_scan_inputs else None
    if first is not None and len(first) >= 2:
        batch, length = first[0], first[1]
    result: list[ValueType | None] = []
    for j, v in enumerate(body.outputs):
        t = declared_type(v.type)
        shape = shape_of(t)
        dtype = t.dtype if isinstance(t, TensorType) else None
        if j < n and isinstance(types[j], TensorType) and dtype is None:
            dtype = types[j].dtype  # type: ignore[union-attr]
        lead = (batch,) if j < n else (batch, length)
        result.append(TensorType(dtype, None if shape is None else (*lead, *shape)))
    return tuple(result)


@op("Scan", since=8, inputs=("sequence_lens?", "initial_state_and_scan_inputs..."),
    outputs=("final_state_and_scan_outputs...",), infer=_infer_scan_8,
    attrs=(Attr("body", "graph", doc=_BODY_DOC),
           Attr("num_scan_inputs", "int", doc="number M of scan inputs (the trailing inputs)"),
           Attr("directions", "ints", None, "per scan input: 0 forward, 1 reverse")))
def scan_8(sequence_lens: np.ndarray | None, *initial_state_and_scan_inputs: np.ndarray,
           body: Graph, num_scan_inputs: int, directions: tuple[int, ...] | None,
           ctx: OpContext) -> tuple:
    """Scan-8: like Scan-9 but every input has a leading batch axis, scanned per batch entry.

    States are [batch, ...]; scan inputs [batch, seq, ...] scanned along axis 1.
    sequence_lens: optional int64 [batch], the number of steps for each batch entry (default:
    the full seq length). For batch entry b the body runs sequence_lens[b] times (a reversed
    input is read from position sequence_lens[b]-1 down to 0); scan outputs are
    [batch, seq, ...] in iteration order, zero-filled past sequence_lens[b].
    """
    m = num_scan_inputs
    values = [np.asarray(v) for v in initial_state_and_scan_inputs]
    n = len(values) - m
    if n < 0 or m < 1:
        raise ValueError(f"Scan needs num_scan_inputs >= 1 and <= {len(values)}, got {m}")
    states, xs = values[:n], values[n:]
    dirs = list(directions or [0] * m)
    batch, max_len = xs[0].shape[0], xs[0].shape[1]
    lens = np.full(batch, max_len) if sequence_lens is None else np.ravel(sequence_lens)
    k = len(body.outputs) - n
    final: list[list[np.ndarray]] = [[] for _ in range(n)]
    scanned: list[list[np.ndarray]] = [[] for _ in range(k)]
    for b in range(batch):
        st = [s[b] for s in states]
        steps: list[list[np.ndarray]] = [[] for _ in range(k)]
        length = int(lens[b])
        for t in range(length):
            elems = [x[b, length - 1 - t if rev else t] for x, rev in zip(xs, dirs, strict=True)]
            outs = ctx.run_graph(body, [*st, *elems])
            st = list(outs[:n])
            for j, value in enumerate(outs[n:]):
                steps[j].append(np.asarray(value))
        for j in range(n):
            final[j].append(np.asarray(st[j]))
        for j in range(k):
            stacked = _scan_outputs([steps[j]], [body.outputs[n + j].type], [0], [0])[0]
            pad = [(0, max_len - stacked.shape[0])] + [(0, 0)] * (stacked.ndim - 1)
            scanned[j].append(np.pad(stacked, pad) if length < max_len else stacked)
    out_states = [np.stack(f) if f else s[:0] for f, s in zip(final, states, strict=True)]
    out_scans = []
    for s, v in zip(scanned, body.outputs[n:], strict=True):
        empty = empty_stack(v.type)  # batch of 0: shape (0, seq, *element)
        none = np.empty((0, max_len, *empty.shape[1:]), empty.dtype)
        out_scans.append(np.stack(s) if s else none)
    return tuple(out_states + out_scans)


OPS = (if_, loop, scan_8, scan)
