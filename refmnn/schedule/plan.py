"""The Plan: where every node runs, with which scheme, and in which bytes.

:func:`compile_plan` is the pre-inference pipeline, a chain of pure functions over frozen data:

    infer_types -> fold_constants -> lower (only what the chosen backends lack)
      -> place (preference order, reference fallback, copies at backend boundaries)
      -> choose schemes (applies, then cost; the reason recorded)
      -> alias runs (reshapes, Splits, Concats: values laid over each other, nothing to run)
      -> plan memory (per backend arena, liveness, greedy by size, verified)

A Plan is frozen and printable (:meth:`Plan.table`), serialises deterministically
(:meth:`Plan.to_json`) and is cached by the Session per input-shape signature.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refmnn.backends.base import Backend, KernelDef, NodeSpec, Scheme, Storage
from refmnn.graph import Graph, Node, TensorType, ValueType
from refmnn.ops.raster import DOMAIN as RASTER_DOMAIN, contiguous_strides, split_regions
from refmnn.ops.registry import OpRegistry
from refmnn.schedule.lower import CORE_OPS, fold_constants, lower_graph
from refmnn.schedule.memory import (ALIGNMENT, ArenaPlan, Interval, align, plan_arena,
                                    verify_no_overlap)
from refmnn.schedule.shapes import UNFOLDABLE, infer_types

REFERENCE = "reference"
ALIAS = "alias"
"""Scheme of a step whose values the planner lays over each other so that nothing needs to run
(MNN and onnxruntime do the same): a reshape's output is its input's bytes; a Split's (or a
lowered Slice's) outputs are contiguous runs of its input's bytes; a Concat's inputs are
written straight into their runs of its output. Every value of such a group gets the group's
offset plus its own, the live ranges merged into one. Only on backends with ``linear_memory``
(and the reference in arena mode), only within one arena, and only at 64-byte-aligned runs."""
RESHAPES = frozenset(("", op) for op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"))


@dataclass(frozen=True, slots=True)
class RunStep:
    """Run one node on a backend with a scheme; ``inputs``/``outputs`` are storage keys."""

    node: Node
    opset: int
    backend: str
    scheme: str
    reason: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CopyStep:
    """Move a value between backends: ``src`` key on ``src_backend`` to ``dst`` key."""

    value: str
    src: str
    dst: str
    src_backend: str
    dst_backend: str


Step = RunStep | CopyStep


@dataclass(frozen=True, slots=True)
class Slot:
    """Where one stored value lives. ``storage`` None means a host object held outside any
    arena (sequences, optionals, strings, shapes known only after running)."""

    key: str
    backend: str
    type: ValueType | None
    storage: Storage | None
    offset: int = 0
    nbytes: int = 0
    first: int = -1
    last: int = -1


@dataclass(frozen=True, slots=True)
class Plan:
    """A complete, frozen execution plan for one input-shape signature."""

    graph: Graph  # after folding and lowering
    input_types: Mapping[str, ValueType | None]
    steps: tuple[Step, ...]
    slots: Mapping[str, Slot]
    arenas: Mapping[str, ArenaPlan]  # backend -> its activation arena
    outputs: tuple[str, ...]  # storage keys of the graph outputs
    backends: tuple[str, ...]
    folded: tuple[str, ...] = ()  # values computed at plan time
    specs: Mapping[str, NodeSpec] = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description: steps, slots and memory figures (deterministic)."""
        steps = []
        for index, step in enumerate(self.steps):
            if isinstance(step, RunStep):
                steps.append({"step": index, "kind": "run", "node": step.node.name,
                              "op": _qualified(step.node), "opset": step.opset,
                              "backend": step.backend, "scheme": step.scheme, "reason": step.reason,
                              "inputs": list(step.inputs), "outputs": list(step.outputs)})
            else:
                steps.append({"step": index, "kind": "copy", "value": step.value,
                              "from": step.src_backend, "to": step.dst_backend, "dst": step.dst})
        slots = {key: {"backend": s.backend, "type": str(s.type),
                       "storage": s.storage.value if s.storage else "host-object",
                       "offset": s.offset, "bytes": s.nbytes, "live": [s.first, s.last]}
                 for key, s in sorted(self.slots.items())}
        memory = {name: {"peak": a.peak, "total": a.total, "lower_bound": a.lower_bound}
                  for name, a in sorted(self.arenas.items())}
        inputs = {k: str(v) for k, v in sorted(self.input_types.items())}
        return {"backends": list(self.backends), "inputs": inputs, "steps": steps, "slots": slots,
                "memory": memory, "folded": sorted(self.folded), "outputs": list(self.outputs)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True)

    def table(self) -> str:
        """The plan as a table a person can read, then the memory summary."""
        from refmnn.schedule.explain import format_table

        return format_table(self)


def _qualified(node: Node) -> str:
    return node.op if not node.domain else f"{node.domain}::{node.op}"


# ---------------------------------------------------------------------------------------------
# placement and scheme choice


def _static_tensor(t: ValueType | None) -> bool:
    return isinstance(t, TensorType) and t.is_static and t.dtype is not None and t.dtype.numpy != object


def _empty(spec: NodeSpec) -> bool:
    """A value of the node has no elements (a batch of 0...): there is nothing for a kernel to
    speed up, so such a node is the reference's, and no backend's kernel has to handle empty
    tensors (numba's blocked 1x1 convolution divided by its zero task count in ``prepare``:
    MobileNetV2 exported with a dynamic batch, run on a batch of 0)."""
    return any(t is not None and t.is_static and t.numel() == 0
               for t in (*spec.inputs, *spec.outputs))


def _find_kernel(backend: Backend, spec: NodeSpec) -> tuple[KernelDef, list[Scheme]] | None:
    if _empty(spec):
        return None
    dtypes = {t.dtype for t in spec.inputs if t is not None} | {t.dtype for t in spec.outputs if t is not None}
    for kdef in backend.kernels():
        if kdef.op != spec.node.op or kdef.domain != spec.node.domain:
            continue
        if spec.opdef.since < kdef.since or not dtypes <= kdef.dtypes:
            continue
        applicable = [s for s in kdef.schemes if s.applies(spec)]
        if applicable:
            return kdef, applicable
    return None


def choose_scheme(schemes: Sequence[Scheme], spec: NodeSpec, all_schemes: Sequence[Scheme]) -> tuple[Scheme, str]:
    """The applicable scheme of lowest cost (declaration order breaks ties and ranks schemes
    without a cost); the reason lists every scheme's verdict."""
    costed = []
    for order, scheme in enumerate(schemes):
        cost = scheme.cost(spec) if scheme.cost is not None else float("inf")
        costed.append((cost, order, scheme))
    costed.sort(key=lambda c: (c[0], c[1]))
    best = costed[0][2]
    parts = []
    for cost, _, scheme in costed:
        parts.append(f"{scheme.name} cost {cost:.3g}" if cost != float("inf") else f"{scheme.name}")
    rejected = [s.name for s in all_schemes if s not in schemes]
    reason = " < ".join(parts) if len(parts) > 1 else f"{best.name}: only applicable scheme"
    if rejected:
        reason += f"; not applicable: {', '.join(rejected)}"
    return best, reason


def make_spec(node: Node, graph: Graph, registry: OpRegistry, types: Mapping[str, ValueType | None],
              constants: Mapping[str, np.ndarray]) -> NodeSpec:
    opset = graph.opset_of(node)
    opdef = registry.resolve(node.domain, node.op, opset)

    def tensor(name: str) -> TensorType | None:
        t = types.get(name) if name else None
        return t if isinstance(t, TensorType) else None

    known = lambda n: constants.get(n) if n in constants else graph.initializers.get(n)  # noqa: E731
    const = {i: known(n) for i, n in enumerate(node.inputs) if n and known(n) is not None}
    return NodeSpec(node=node, opdef=opdef, opset=opset, attrs=opdef.bind_attrs(node.attrs),
                    inputs=tuple(tensor(n) for n in node.inputs),
                    outputs=tuple(tensor(n) for n in node.outputs), constants=const)


def place_node(spec: NodeSpec, backends: Sequence[Backend], types: Mapping[str, ValueType | None]
               ) -> tuple[str, str, str]:
    """(backend, scheme, reason) for one node: first backend in preference order that supports
    it, else the reference."""
    node = spec.node
    names = [n for n in (*node.inputs, *node.outputs) if n]
    plannable = all(_static_tensor(types.get(n)) for n in names) and not any(node.subgraphs())
    skipped = []
    for backend in backends:
        if backend.name == REFERENCE:
            break
        if not plannable:
            skipped.append(f"{backend.name}: values not statically shaped tensors")
            continue
        if _empty(spec):
            skipped.append(f"{backend.name}: an empty tensor, nothing to compute")
            continue
        found = _find_kernel(backend, spec)
        if found is None:
            skipped.append(f"{backend.name}: no kernel")
            continue
        scheme, reason = choose_scheme(found[1], spec, found[0].schemes)
        return backend.name, scheme.name, reason
    why = "; ".join(skipped) if skipped else "first choice"
    return REFERENCE, "reference", f"NumPy reference ({why})"


def _runs(spec: NodeSpec) -> tuple[str, list[int]] | None:
    """How a node's values lie in one another when it only moves whole contiguous runs of
    elements (C order, one dtype): ``("view", offsets)`` when output j is the run of input 0 that
    starts at element ``offsets[j]`` (reshapes: 0; Split with unit dims before its axis; a Raster
    of one region reading one run, a lowered Reshape or Slice), ``("concat", offsets)`` when
    input k is the run of the single output at ``offsets[k]`` and the runs tile it (Concat with
    unit dims before its axis; a Raster whose regions copy whole, distinct sources so); else None.
    """
    node = spec.node
    gathers = (node.domain, node.op) in (("", "Concat"), (RASTER_DOMAIN, "Raster"))
    values = (*(spec.inputs if gathers else spec.inputs[:1]), *spec.outputs)
    if not node.inputs or any(t is None or not _static_tensor(t) for t in values) or \
            len({t.dtype for t in values}) != 1:  # type: ignore[union-attr]
        return None
    first = spec.inputs[0]
    if (node.domain, node.op) in RESHAPES:
        return ("view", [0]) if len(node.outputs) == 1 else None
    if (node.domain, node.op) in (("", "Split"), ("", "Concat")):
        shape = [int(d) for d in first.shape]  # type: ignore[union-attr]
        axis = (spec.attrs["axis"] or 0) % max(len(shape), 1)  # Split-1's may be absent: 0
        if int(np.prod(shape[:axis], dtype=np.int64)) != 1:
            return None
        parts = spec.outputs if node.op == "Split" else spec.inputs
        offsets = list(np.cumsum([0] + [t.numel() for t in parts[:-1]]))  # type: ignore[union-attr]
        return ("view" if node.op == "Split" else "concat"), [int(o) for o in offsets]
    if (node.domain, node.op) != (RASTER_DOMAIN, "Raster") or len(node.outputs) != 1:
        return None
    regions = split_regions(spec.attrs["regions"], spec.attrs["rank"])
    runs = {}  # source index -> (source offset, output offset, length) of its region's run
    for src, src_offset, dst_offset, sizes, src_strides, dst_strides in regions:
        contiguous = contiguous_strides(sizes)
        if src in runs or any(not (src_strides[i] == dst_strides[i] == contiguous[i])
                              for i, n in enumerate(sizes) if n > 1):
            return None
        runs[src] = (src_offset, dst_offset, int(np.prod(sizes, dtype=np.int64)))
    out_size = spec.outputs[0].numel()  # type: ignore[union-attr]
    if len(node.inputs) == 1 and len(runs) == 1:
        src_offset, dst_offset, size = runs[0]
        return ("view", [src_offset]) if dst_offset == 0 and size == out_size else None
    if sorted(runs) != list(range(len(node.inputs))) or \
            any(src_offset != 0 or size != spec.inputs[k].numel()  # type: ignore[union-attr]
                for k, (src_offset, _, size) in runs.items()):
        return None
    order = sorted(range(len(runs)), key=lambda k: runs[k][1])
    position = 0
    for k in order:  # the runs tile the output
        if runs[k][1] != position:
            return None
        position += runs[k][2]
    return ("concat", [runs[k][1] for k in range(len(runs))]) if position == out_size else None


# ---------------------------------------------------------------------------------------------
# the pipeline


def _liveness(steps: Sequence[Step], captured: Mapping[int, Sequence[str]], outputs: Sequence[str]
              ) -> tuple[dict[str, int], dict[str, int]]:
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for index, step in enumerate(steps):
        if isinstance(step, RunStep):
            reads, writes = [*step.inputs, *captured.get(index, ())], step.outputs
        else:
            reads, writes = [step.src], (step.dst,)
        for key in reads:
            if key:
                last[key] = index
        for key in writes:
            if key:
                first.setdefault(key, index)
                last.setdefault(key, index)
    for key in outputs:
        last[key] = len(steps)
    return first, last


def compile_plan(
    graph: Graph,
    input_types: Mapping[str, ValueType | None],
    registry: OpRegistry,
    backends: Sequence[Backend],
    *,
    reuse: bool = True,
    optimize: bool | None = None,
    reference_arena: bool = True,
) -> Plan:
    """Plan ``graph`` for concrete input types on ``backends`` (in preference order).

    ``optimize``: run the graph passes of :mod:`refmnn.schedule.optimize` -- None (default):
    only when an accelerated backend is chosen, fusing only into ops it has kernels for;
    True: always, every fusion; False: never.
    """
    inferred = infer_types(graph, input_types, registry)
    original = set(graph.initializers)
    keep = lambda node: node.op in UNFOLDABLE or any(node.subgraphs())  # noqa: E731
    graph = fold_constants(graph, inferred.constants, keep)
    folded = tuple(sorted(set(graph.initializers) - original))
    accelerated = [b for b in backends if b.name != REFERENCE]
    # Graph optimisation (Dropout/Identity removal, BN folding, fusions): never on a
    # reference-only plan unless asked, so the golden reference runs the model's own ops.
    if optimize or (optimize is None and accelerated):
        from refmnn.schedule.optimize import optimize as optimize_graph, run_by, supported_by

        supports = None if optimize else supported_by(accelerated)
        runs = None if optimize else run_by(accelerated)
        graph = optimize_graph(graph, registry, input_types, supports=supports, runs=runs)
        inferred = infer_types(graph, input_types, registry)
    if accelerated:
        types, constants = inferred.types, inferred.constants

        def wants(node: Node, opset: int) -> bool:
            if (node.domain, node.op) in CORE_OPS:
                return False
            try:
                spec = make_spec(node, graph, registry, types, constants)
            except Exception:
                return False
            if _empty(spec):  # the reference's whatever its op: lowering would change nothing
                return False
            return place_node(spec, accelerated, types)[0] == REFERENCE

        graph = lower_graph(graph, registry, types, constants, wants)
        inferred = infer_types(graph, input_types, registry)
        # Lowering can leave nodes whose inputs are all small constants (a Gemm's alpha times
        # a constant C): fold them too, so they are computed once here and not on every run
        # (a Gemm weight's transpose is made by lower_gemm itself, whatever its size).
        before = set(graph.initializers)
        graph = fold_constants(graph, inferred.constants, keep)
        if set(graph.initializers) != before:
            folded = tuple(sorted(set(folded) | (set(graph.initializers) - before)))
            inferred = infer_types(graph, input_types, registry)
    # the passes may have dropped folded values nothing reads any more (fused away)
    folded = tuple(key for key in folded if key in graph.initializers)
    return _assemble(graph, input_types, registry, backends, inferred.types, inferred.constants,
                     folded, reuse, reference_arena)


def _aliases(steps: Sequence[Step], specs: Mapping[str, NodeSpec], slots: Mapping[str, Slot],
             by_name: Mapping[str, Backend]) -> tuple[dict[str, tuple[str, int]], set[int]]:
    """``({key: (parent key, byte offset in the parent)}, indices of the steps left with nothing
    to run)`` for the steps of :func:`_runs` whose values all live in the same arena of a
    backend with linear memory (the reference: in arena mode). A value gets one parent at most:
    a step whose values would need a second one keeps running."""
    alias_of: dict[str, tuple[str, int]] = {}
    idle: set[int] = set()
    for index, step in enumerate(steps):
        if not isinstance(step, RunStep) or not step.inputs or not step.inputs[0]:
            continue
        backend = by_name.get(step.backend)
        if step.backend != REFERENCE and (backend is None or not backend.linear_memory):
            continue
        found = _runs(specs[step.node.name])
        if found is None:
            continue
        kind, offsets = found
        whole, parts = (step.inputs[0], step.outputs) if kind == "view" else \
            (step.outputs[0], step.inputs)
        keys = [whole, *parts]
        chosen = [slots.get(k) if k else None for k in keys]
        itemsize = specs[step.node.name].inputs[0].dtype.itemsize  # type: ignore[union-attr]
        links = {part: (whole, offset * itemsize)
                 for part, offset in zip(parts, offsets, strict=True)}
        if any(s is None or s.storage is not Storage.ARENA or s.backend != step.backend
               for s in chosen) or len(set(keys)) != len(keys) or \
                any(part in alias_of or delta % ALIGNMENT for part, (_, delta) in links.items()):
            continue
        alias_of.update(links)
        idle.add(index)
    return alias_of, idle


def _in_place(steps: Sequence[Step], specs: Mapping[str, NodeSpec], slots: Mapping[str, Slot],
              alias_of: dict[str, tuple[str, int]]) -> dict[int, str]:
    """Give a reference step's output the bytes of an input that is dead after the step:
    ``alias_of`` gains ``output -> (input, 0)``; returns {step index: that input}.

    Only for ops that declare it (:attr:`OpDef.in_place`) and an input of exactly the output's
    type (dtype and shape, so both views cover the same bytes element for element), planned in
    the same arena; the input is computed by a step (not a graph input) and no value sharing its
    bytes -- a reshape of it, the Concat it is a run of -- is read after this step or by another
    input of this step, and the output does not already share another value's bytes. An
    elementwise chain then works in the same bytes, which stay in cache, and the arena shrinks:
    BERT-6's reference 28.99 -> 28.18 ms, ViT-Tiny's 33.36 -> 32.50 (A/B in one process, 2
    threads, medians of 15 rounds; outputs bit-equal)."""
    members: dict[str, list[str]] = {}  # root -> the values in its bytes
    for key, slot in slots.items():
        if slot.storage is Storage.ARENA:
            members.setdefault(_root(key, alias_of)[0], []).append(key)
    taken: dict[int, str] = {}
    for index, step in enumerate(steps):
        if not isinstance(step, RunStep) or step.backend != REFERENCE or not step.outputs:
            continue
        claimed = specs[step.node.name].opdef.in_place
        out = slots.get(step.outputs[0])
        if not claimed or out is None or out.storage is not Storage.ARENA or \
                out.key in alias_of:
            continue
        roots = [_root(k, alias_of)[0] for k in step.inputs]
        for k in claimed:
            key = step.inputs[k] if k < len(step.inputs) else ""
            slot = slots.get(key)
            if slot is None or slot.storage is not Storage.ARENA or slot.first < 0 or \
                    slot.backend != out.backend or slot.type != out.type or \
                    slot.nbytes != out.nbytes or roots.count(roots[k]) != 1 or \
                    max(slots[m].last for m in members[roots[k]]) != index:
                continue
            alias_of[out.key] = (key, 0)
            members[roots[k]] += members.pop(out.key)
            taken[index] = key
            break
    return taken


def _root(key: str, alias_of: Mapping[str, tuple[str, int]]) -> tuple[str, int]:
    """The value whose bytes hold ``key`` (itself when it has no parent) and ``key``'s byte
    offset in it."""
    delta, seen = 0, {key}
    while key in alias_of:
        key, step = alias_of[key]
        delta += step
        if key in seen:
            raise AssertionError(f"memory plan: alias cycle through {key!r}")
        seen.add(key)
    return key, delta


def _host(by_name: Mapping[str, Backend], name: str) -> bool:
    """True when the backend's tensors are host NumPy arrays (no copies needed between them)."""
    return name == REFERENCE or (name in by_name and by_name[name].host_memory)


def _assemble(graph: Graph, input_types: Mapping[str, ValueType | None], registry: OpRegistry,
              backends: Sequence[Backend], types: Mapping[str, ValueType | None],
              constants: Mapping[str, np.ndarray], folded: tuple[str, ...], reuse: bool,
              reference_arena: bool = True) -> Plan:
    by_name = {b.name: b for b in backends}
    home: dict[str, str] = {v.name: REFERENCE for v in graph.inputs}
    slots: dict[str, Slot] = {}
    steps: list[Step] = []
    captured: dict[int, list[str]] = {}
    specs: dict[str, NodeSpec] = {}
    copied: set[str] = set()  # device copies already made (one per value and backend)
    for node in graph.nodes:
        spec = make_spec(node, graph, registry, types, constants)
        specs[node.name] = spec
        backend, scheme, reason = place_node(spec, backends, types)
        keys = []
        for name in node.inputs:
            source = home.get(name, REFERENCE)
            shared = _host(by_name, backend) and _host(by_name, source)
            if not name or source == backend or shared and name not in graph.initializers:
                keys.append(name)
            elif name in graph.initializers and _host(by_name, backend):
                keys.append(name)
            elif name in graph.initializers:
                keys.append(f"{name}@{backend}")
                slots[keys[-1]] = Slot(keys[-1], backend, types.get(name), Storage.STATIC,
                                       nbytes=int(graph.initializers[name].nbytes))
            else:
                key = f"{name}@{backend}"
                if key not in copied:
                    copied.add(key)
                    steps.append(CopyStep(name, name, key, home.get(name, REFERENCE), backend))
                keys.append(key)
        if any(node.subgraphs()):
            outer = set()
            for sub in node.subgraphs():
                outer |= sub.outer_names()
            captured[len(steps)] = sorted(outer)
        steps.append(RunStep(node, spec.opset, backend, scheme, reason, tuple(keys), node.outputs))
        for name in node.outputs:
            if name:
                home[name] = backend
    outputs = []
    for value in graph.outputs:
        outputs.append(value.name)
    first, last = _liveness(steps, captured, outputs)
    for value in graph.inputs:
        first[value.name] = -1
        last.setdefault(value.name, -1)
    for key in list(first):
        if key in slots:
            continue
        base = key.split("@")[0] if key not in types else key
        owner = key.split("@")[1] if "@" in key and key not in types else home.get(key, REFERENCE)
        t = types.get(base)
        direct = owner == REFERENCE and not reference_arena  # the reference without its arena
        storage = Storage.ARENA if _static_tensor(t) and not direct else None
        nbytes = int(t.numel() * t.dtype.itemsize) if storage else 0  # type: ignore[union-attr, operator]
        slots[key] = Slot(key, owner, t, storage, 0, nbytes, first[key], last[key])
    alias_of, idle = _aliases(steps, specs, slots, by_name) if reuse else ({}, set())
    in_place = _in_place(steps, specs, slots, alias_of) if reuse else {}
    arenas: dict[str, ArenaPlan] = {}
    for backend in sorted({s.backend for s in slots.values()}):
        members: dict[str, list[tuple[Slot, int]]] = {}  # root -> (value, byte offset in it)
        for s in slots.values():
            if s.backend == backend and s.storage is Storage.ARENA:
                root, delta = _root(s.key, alias_of)
                members.setdefault(root, []).append((s, delta))
        intervals = [Interval(root, slots[root].nbytes, min(s.first for s, _ in group),
                              max(s.last for s, _ in group)) for root, group in members.items()]
        arena = plan_arena(intervals, reuse=reuse)
        verify_no_overlap(intervals, arena)
        offsets = {s.key: arena.offsets[root] + delta for root, group in members.items()
                   for s, delta in group}
        arenas[backend] = dataclasses.replace(arena, offsets=offsets, sizes={
            s.key: align(s.nbytes) for group in members.values() for s, _ in group})
        for key, offset in offsets.items():
            slots[key] = dataclasses.replace(slots[key], offset=offset)
    for index, key in in_place.items():
        step = steps[index]
        steps[index] = dataclasses.replace(  # type: ignore[arg-type]
            step, reason=f"{step.reason}; in place of {key}")  # type: ignore[union-attr]
    for index in idle:
        step = steps[index]
        steps[index] = dataclasses.replace(  # type: ignore[arg-type]
            step, scheme=ALIAS, reason=f"{step.reason}; run as an alias: its values share bytes "  # type: ignore[union-attr]
            f"at planned offsets, nothing runs (else {step.scheme})")  # type: ignore[union-attr]
    return Plan(graph=graph, input_types=dict(input_types), steps=tuple(steps), slots=slots,
                arenas=arenas, outputs=tuple(outputs), backends=tuple(b.name for b in backends),
                folded=folded, specs=specs)
