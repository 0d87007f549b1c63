"""Bind a Plan to backend instances (resize) and run it (execute).

:class:`Prepared` is MNN's resize step: it allocates each backend's arena (one buffer of the
planned peak), makes a device tensor for every planned value at its offset, uploads constants
that non-host backends read into STATIC buffers once, builds each node's kernel with the chosen
scheme and calls ``prepare`` (an ``alias`` step, whose values the planner laid over each other, has
no kernel). :meth:`Prepared.run` is the execute step: it only moves feeds in, calls kernels and
copies in order, and downloads the outputs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn

import numpy as np

from refmnn.backends.base import Backend, Buffer, Kernel, NodeSpec, Storage
from refmnn.backends.reference import ReferenceBackend, Slot
from refmnn.errors import (OpError, RefmnnError, ResourceError, node_context, node_label,
                           node_with_types)
from refmnn.ops._schema import OpContext
from refmnn.runtime.interpreter import Callback, Runner
from refmnn.schedule.memory import format_bytes
from refmnn.schedule.plan import ALIAS, REFERENCE, CopyStep, Plan, RunStep


class _Values(Mapping[str, Any]):
    """The current value of every stored key, as subgraphs see their outer scope: subgraphs run
    on the reference, so a value held in a device backend's memory is downloaded when read
    (each run of a subgraph reads the values it captures, once: ``interpreter._captured``)."""

    def __init__(self, prepared: Prepared) -> None:
        self._p = prepared

    def __getitem__(self, key: str) -> Any:
        slot = self._p.plan.slots.get(key)
        if slot is not None and slot.storage is not None and \
                not getattr(self._p.backends[slot.backend], "host_memory", False):
            return self._p.backends[slot.backend].download(self._p.tensors[key])
        return self._p.value(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._p.tensors)

    def __len__(self) -> int:
        return len(self._p.tensors)


class Prepared:
    """A plan bound to backends: buffers allocated, kernels built and prepared."""

    def __init__(self, plan: Plan, backends: Mapping[str, Backend], runner: Runner) -> None:
        self.plan = plan
        self.backends = backends
        self.runner = runner
        self.buffers = {name: _allocate(backends[name], arena.peak, Storage.ARENA, plan)
                        for name, arena in plan.arenas.items()}
        self.tensors: dict[str, Any] = dict(plan.graph.initializers)
        self._statics = []
        for key, slot in plan.slots.items():
            backend = backends[slot.backend]
            if slot.storage is Storage.ARENA:
                self.tensors[key] = backend.view(self.buffers[slot.backend], slot.offset, slot.type)  # type: ignore[arg-type]
            elif slot.storage is Storage.STATIC:
                source = plan.graph.initializers[key.rsplit("@", 1)[0]]
                buffer = _allocate(backend, int(source.nbytes), Storage.STATIC, plan)
                self._statics.append((backend, buffer))
                tensor = backend.view(buffer, 0, slot.type)  # type: ignore[arg-type]
                backend.upload(source, tensor)
                self.tensors[key] = tensor
            else:
                self.tensors[key] = Slot()
        self.kernels: list[Kernel | None] = []
        self.workspaces: dict[str, Buffer] = {}  # (sized below, once every kernel is prepared)
        outer = _Values(self)
        workspace: dict[str, int] = {}
        for step in plan.steps:
            if not isinstance(step, RunStep) or step.scheme == ALIAS:  # nothing to run
                self.kernels.append(None)
                continue
            spec = plan.specs[step.node.name]
            backend = backends[step.backend]
            try:
                if isinstance(backend, ReferenceBackend):
                    context = OpContext(step.node, step.opset, runner.run_subgraph, runner.rng,
                                        outer, plan.graph)
                    kernel: Kernel = backend.kernel_for(spec, context)
                else:
                    kernel = _scheme(backend, step).build(backend, spec)
                kernel.prepare(spec)
            except Exception as exc:
                self.close()
                _fail_to_prepare(step, spec, exc)
            workspace[step.backend] = max(workspace.get(step.backend, 0), kernel.workspace_bytes)
            self.kernels.append(kernel)
        self.workspaces = {name: _allocate(backends[name], size, Storage.WORKSPACE, plan)
                           for name, size in workspace.items() if size}
        self._program: list[tuple[RunStep | CopyStep, Kernel | None,
                                  Callable[[], None] | None]] | None = None

    def value(self, key: str) -> Any:
        tensor = self.tensors[key]
        return tensor.value if isinstance(tensor, Slot) else tensor

    def _feed(self, name: str, value: Any) -> None:
        target = self.tensors.get(name)
        if isinstance(target, Slot) or target is None:
            self.tensors[name] = Slot() if target is None else target
            self.tensors[name].value = value
            return
        self.backends[REFERENCE].upload(np.asarray(value), target)

    def run(self, feeds: Mapping[str, Any], *, intermediates: bool = False,
            callback: Callback | None = None) -> dict[str, Any]:
        for backend in self.backends.values():
            backend.begin_run()
        try:
            # inf and NaN from overflow or invalid operations are the ops' IEEE answers, not
            # something to warn about (nor, under warnings-as-errors, to fail on): NumPy's
            # floating-point warnings are off for the run (a callback's arithmetic too)
            with np.errstate(all="ignore"):
                seen = self._steps(feeds, intermediates, callback)
        finally:  # a failed run must still restore what begin_run changed (thread settings...)
            for backend in self.backends.values():
                backend.end_run()
        result = {key: self._download(key) for key in self.plan.outputs}
        if intermediates:
            for key in self.plan.folded:
                seen.setdefault(key, np.array(self.plan.graph.initializers[key]))
            result.update({k: v for k, v in seen.items() if k not in result})
        return result

    def _steps(self, feeds: Mapping[str, Any], intermediates: bool,
               callback: Callback | None) -> dict[str, Any]:
        """Feed the inputs and run every step; returns intermediates when asked for."""
        for name, value in feeds.items():
            self._feed(name, value)
        seen: dict[str, Any] = {}
        if not intermediates and callback is None:
            self._run_program()
            return seen
        for step, kernel in zip(self.plan.steps, self.kernels, strict=True):
            if isinstance(step, CopyStep):
                self._copy(step)
                continue
            # the inputs are read before the step runs: its output may take their bytes
            ins = [self._download(key) if key else None for key in step.inputs] \
                if callback is not None else []
            if kernel is not None:  # None: an ALIAS step, its output already holds the values
                self._run_step(step, kernel)
            outs = [self._download(key) if key else None for key in step.outputs]
            if callback is not None:
                callback(step.node.name, step.node.op, ins, outs)
            if intermediates:
                seen.update({k: v for k, v in zip(step.outputs, outs, strict=True) if k})
        return seen

    def _run_program(self) -> None:
        """Run every step, each through the call its kernel bound (:meth:`Kernel.bind`) where
        it did: the steps' tensors are the same objects every run, so their argument lists,
        and the kernels' own per-call work, are made once. On numba, 2 threads, sessions with
        and without alternating in one process, median ms: MobileNetV2 5.24 -> 4.98,
        SqueezeNet 1.1 5.24 -> 5.07, ResNet-18 14.62 -> 14.43, ViT-Tiny 16.12 -> 15.77, BERT-6
        16.77 -> 16.43 (a chain of 50 small convolutions: 6.2 -> 4.0 us a node)."""
        if self._program is None:
            self._program = [self._bind(step, kernel)
                             for step, kernel in zip(self.plan.steps, self.kernels, strict=True)
                             if isinstance(step, CopyStep) or kernel is not None]
        for step, kernel, call in self._program:
            if call is not None:
                try:
                    call()
                except Exception as exc:
                    self._fail(step, self._arguments(step)[0], exc)
            elif isinstance(step, CopyStep):
                self._copy(step)
            else:
                self._run_step(step, kernel)

    def _bind(self, step: RunStep | CopyStep, kernel: Kernel | None
              ) -> tuple[RunStep | CopyStep, Kernel | None, Callable[[], None] | None]:
        """``(step, kernel, call)``: ``call`` is what the kernel bound for the step's tensors,
        None for a copy, for a step that reads or writes a host object (a Slot, whose value is
        a new object every run) and where the kernel binds nothing."""
        if isinstance(step, CopyStep) or kernel is None or \
                any(isinstance(self.tensors[key], Slot) for key in (*step.inputs, *step.outputs)
                    if key):
            return step, kernel, None
        inputs, outputs, workspace = self._arguments(step)
        try:
            return step, kernel, kernel.bind(inputs, outputs, workspace)
        except Exception as exc:
            self._fail(step, inputs, exc)

    def _copy(self, step: CopyStep) -> None:
        """Move a value between backends through host memory (a host object has no device
        tensor: it is handed over as is)."""
        source, target = self.tensors[step.src], self.tensors[step.dst]
        host = source.value if isinstance(source, Slot) else \
            self.backends[step.src_backend].download(source)
        if isinstance(target, Slot):
            target.value = host
        else:
            self.backends[step.dst_backend].upload(host, target)

    def _arguments(self, step: RunStep) -> tuple[list[Any], list[Any], Any | None]:
        """A step's kernel arguments: its input values, output tensors and workspace."""
        inputs = [self.value(key) if key else None for key in step.inputs]
        outputs = [self.tensors[key] if key else None for key in step.outputs]
        return inputs, outputs, self.workspaces.get(step.backend)

    def _run_step(self, step: RunStep, kernel: Kernel) -> None:
        inputs, outputs, workspace = self._arguments(step)
        try:
            kernel.run(inputs, outputs, workspace)
        except Exception as exc:
            self._fail(step, inputs, exc)

    @staticmethod
    def _fail(step: RunStep, inputs: list[Any], exc: Exception) -> NoReturn:
        """Raise a step's failure with the node named: a RefmnnError with a note added, any
        other exception as an OpError that also names the backend and the scheme."""
        where = node_context(step.node, step.opset, inputs)
        if isinstance(exc, RefmnnError):
            exc.add_note(f"while running {where}")
            raise exc
        raise OpError(f"{where} on backend {step.backend!r} (scheme {step.scheme}) failed: "
                      f"{type(exc).__name__}: {exc}") from exc

    def _download(self, key: str) -> Any:
        tensor = self.tensors[key]
        if isinstance(tensor, Slot):
            return tensor.value
        slot = self.plan.slots.get(key)
        backend = self.backends[slot.backend] if slot is not None else self.backends[REFERENCE]
        if isinstance(tensor, np.ndarray) and slot is None:
            return tensor
        return backend.download(tensor)

    def close(self) -> None:
        for name, buffer in self.buffers.items():
            self.backends[name].free(buffer)
        for backend, buffer in self._statics:
            backend.free(buffer)
        for name, buffer in self.workspaces.items():
            self.backends[name].free(buffer)


def _fail_to_prepare(step: RunStep, spec: NodeSpec, exc: Exception) -> NoReturn:
    """Raise a kernel's failure to build or prepare with the node named (as
    :meth:`Prepared._fail` does for a failure while running)."""
    where = node_with_types(step.node, step.opset, spec.inputs)
    if isinstance(exc, RefmnnError):
        exc.add_note(f"while preparing {where}")
        raise exc
    raise OpError(f"{where}: backend {step.backend!r} could not prepare scheme {step.scheme}: "
                  f"{type(exc).__name__}: {exc}") from exc


def _scheme(backend: Backend, step: RunStep) -> Any:
    for kdef in backend.kernels():
        if kdef.op == step.node.op and kdef.domain == step.node.domain:
            for scheme in kdef.schemes:
                if scheme.name == step.scheme:
                    return scheme
    raise OpError(f"backend {backend.name!r} has no scheme {step.scheme!r} for {step.node.op}")


def physical_memory() -> int | None:
    """The machine's physical memory in bytes, None where the OS does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def _allocate(backend: Backend, nbytes: int, storage: Storage, plan: Plan) -> Buffer:
    """``backend.allocate``, with a :class:`ResourceError` instead of a bare MemoryError, and
    before trying at all when a host buffer would exceed the machine's physical memory (the OS
    may hand out such an allocation lazily, and then kill the process when it is written)."""
    memory = physical_memory() if getattr(backend, "host_memory", False) else None
    failure: BaseException | None = None
    if memory is None or nbytes <= memory:
        try:
            return backend.allocate(nbytes, storage)
        except MemoryError as exc:
            failure = exc
    where = f" (the machine has {format_bytes(memory)})" if memory is not None else ""
    error = ResourceError(f"backend {backend.name!r} cannot allocate {format_bytes(nbytes)} for "
                          f"its {storage.name.lower()} buffer{where}; "
                          f"the largest values: {_largest_values(plan, backend.name)}")
    raise error from failure


def _largest_values(plan: Plan, backend: str, count: int = 3) -> str:
    """The ``count`` largest planned values of a backend, each with the node that makes it."""
    makers = {key: step for step in plan.steps if isinstance(step, RunStep)
              for key in step.outputs if key}
    slots = sorted((s for s in plan.slots.values() if s.backend == backend and s.nbytes),
                   key=lambda s: -s.nbytes)[:count]
    described = []
    for slot in slots:
        step = makers.get(slot.key)
        maker = (f"output of {node_label(step.node, step.opset)}"
                 if step is not None else "a graph input or weight")
        described.append(f"{slot.key} {slot.type} {format_bytes(slot.nbytes)}, {maker}")
    return "; ".join(described) or "none planned"
