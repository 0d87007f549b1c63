"""One adapter per engine: how it is installed, loaded, run and versioned.

An engine is named ``refmnn-<backend>`` (``refmnn-reference``, later ``refmnn-numba``,
``refmnn-opencl``: a :class:`refmnn.Session` with ``backends=(backend,)``) or by the peer's
name: ``onnxruntime``, ``mnn``, ``onnx-reference``, ``torch``, and ``torch-cuda`` (only when
asked for: PyTorch on a CUDA GPU).

Adapters run inside a worker process (:mod:`refmnn.benchmark.worker`) whose thread
environment variables are already set; :meth:`Engine.prepare` builds the session and returns
a ``run(feeds) -> list[np.ndarray]`` closure that returns the outputs in graph order. The
parent only calls the cheap, import-free methods (:meth:`Engine.unavailable`,
:meth:`Engine.version`) and :meth:`Engine.convert` (MNN's ahead-of-time conversion, done once
per model in a subprocess).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

RunFn = Callable[[Mapping[str, np.ndarray]], list[np.ndarray]]

PEERS: tuple[str, ...] = ("onnxruntime", "mnn", "onnx-reference", "torch")
"""Peer engines, in the default order."""

OPTIONAL_PEERS: tuple[str, ...] = ("torch-cuda",)
"""Peers run only when asked for by name (``--peers``): they need hardware most machines lack."""

REFMNN_PREFIX = "refmnn-"


@dataclass(frozen=True)
class ModelSpec:
    """A model to benchmark, as the parent resolved it (picklable, sent to workers).

    Attributes:
        name: zoo name (``NAME@EXPORTER`` for a zoo model exported other than by the zoo's
            default exporter, e.g. ``bert6@dynamo``), or the file's stem.
        path: the ONNX file.
        zoo: whether ``name`` is a zoo model (torch eager is then applicable).
        inputs: ``(name, shape, dtype)`` per graph input, in order.
        outputs: output names, in graph order.
        flops: model FLOPs (2 x MACs) or None when unknown.
        flops_source: where ``flops`` comes from.
    """

    name: str
    path: str
    zoo: bool
    inputs: tuple[tuple[str, tuple[int, ...], str], ...]
    outputs: tuple[str, ...]
    flops: int | None = None
    flops_source: str = ""

    @property
    def zoo_name(self) -> str:
        """The zoo model's name without its exporter (``bert6@dynamo`` -> ``bert6``)."""
        return self.name.partition("@")[0]


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _dist_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass
class Engine:
    """Base adapter. Subclasses set ``name``/``module``/``dist`` and implement :meth:`prepare`."""

    name: str = ""
    module: str = ""
    dist: str = ""
    kind: str = "peer"
    install_hint: str = ""
    slow: bool = False
    """Known to be orders of magnitude slower (may be given fewer repetitions)."""
    notes: list[str] = field(default_factory=list)

    def unavailable(self, model: ModelSpec) -> tuple[str, str] | None:
        """``(status, reason)`` when this engine cannot run ``model``, else None.

        ``status`` is ``"not-installed"`` or ``"not-applicable"``.
        """
        if self.module and not _installed(self.module):
            return "not-installed", f"{self.module} is not installed ({self.install_hint})"
        return None

    def version(self) -> str | None:
        return _dist_version(self.dist) if self.dist else None

    def convert(self, model: ModelSpec, cache_dir: Path) -> tuple[dict[str, Any], float | None]:
        """Ahead-of-time artifacts for ``model`` and the milliseconds spent making them.

        Returns ``({}, None)`` for engines that load ONNX directly.
        """
        return {}, None

    def prepare(self, model: ModelSpec, threads: int, artifacts: Mapping[str, Any]) -> RunFn:
        """Create the session (inside the worker) and return its run function."""
        raise NotImplementedError

    def import_modules(self) -> None:
        """Import the engine's modules (timed apart from session creation)."""
        if self.module:
            importlib.import_module(self.module)


class RefmnnEngine(Engine):
    """A refmnn backend: ``refmnn.Session(path, backends=(backend,))``."""

    def __init__(self, backend: str) -> None:
        super().__init__(name=REFMNN_PREFIX + backend, module="refmnn", dist="refmnn",
                         kind="refmnn", install_hint="pip install refmnn")
        self.backend = backend

    def version(self) -> str | None:
        import refmnn

        return getattr(refmnn, "__version__", None)

    def prepare(self, model: ModelSpec, threads: int, artifacts: Mapping[str, Any]) -> RunFn:
        import refmnn

        from refmnn.backends import BackendConfig

        # The thread count goes to the backend too (numba's pool, OpenCL's CPU device), not
        # only to BLAS through the worker's environment.
        config = BackendConfig(threads=threads)
        session = refmnn.Session(model.path, backends=(self.backend,), configs={self.backend: config})
        names = list(model.outputs)

        def run(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
            out = session.run(feeds)
            return [out[n] for n in names] if set(names) <= set(out) else list(out.values())

        return run


class OnnxRuntimeEngine(Engine):
    """onnxruntime, CPUExecutionProvider, sequential, ORT_ENABLE_ALL, inter_op=1."""

    def __init__(self) -> None:
        super().__init__(name="onnxruntime", module="onnxruntime", dist="onnxruntime",
                         install_hint="pip install onnxruntime")

    def prepare(self, model: ModelSpec, threads: int, artifacts: Mapping[str, Any]) -> RunFn:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(model.path, so, providers=["CPUExecutionProvider"])

        def run(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
            return list(sess.run(None, dict(feeds)))

        return run


def _file_digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


_MNN_DTYPES = {"float32": "float", "float64": "double", "int32": "int", "uint8": "uint8"}
"""numpy dtype -> ``MNN.expr`` dtype attribute (int64 token ids are cast to int32 first)."""


class MnnEngine(Engine):
    """MNN's Python package: ONNX converted to .mnn, run with the Module API on the CPU.

    The conversion runs ``_tools.mnnconvert`` in a subprocess (never the ``mnnconvert``
    console script or ``MNN.tools.mnnconvert``: those pip-install packages and send
    telemetry). Token ids (int64) are fed as int32, which is what MNN computes in.
    """

    def __init__(self) -> None:
        super().__init__(name="mnn", module="MNN", dist="MNN", install_hint="pip install mnn")

    def convert(self, model: ModelSpec, cache_dir: Path) -> tuple[dict[str, Any], float | None]:
        target_dir = cache_dir / "mnn"
        target_dir.mkdir(parents=True, exist_ok=True)
        version = (self.version() or "unknown").replace("/", "_")
        target = target_dir / f"{Path(model.path).stem}-{_file_digest(model.path)}-mnn{version}.mnn"
        if target.is_file():
            return {"mnn_path": str(target), "converted": "cached"}, None
        tmp = target.with_suffix(f".tmp{os.getpid()}.mnn")
        code = ("import _tools, sys; _tools.mnnconvert(['mnnconvert', '-f', 'ONNX', '--modelFile', "
                "sys.argv[1], '--MNNModel', sys.argv[2], '--bizCode', 'MNN'])")
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", code, model.path, str(tmp)],
                              capture_output=True, text=True, timeout=1800, check=False)
        elapsed = (time.perf_counter() - start) * 1e3
        if proc.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
            tmp.unlink(missing_ok=True)
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
            raise RuntimeError(f"MNN conversion failed (rc={proc.returncode}): " + " | ".join(tail))
        os.replace(tmp, target)
        return {"mnn_path": str(target), "converted": "now"}, elapsed

    def prepare(self, model: ModelSpec, threads: int, artifacts: Mapping[str, Any]) -> RunFn:
        import MNN

        expr = MNN.expr
        rt = MNN.nn.create_runtime_manager(
            ({"backend": "CPU", "numThread": threads, "precision": "normal"},))
        in_names = [n for n, _, _ in model.inputs]
        module = MNN.nn.load_module_from_file(artifacts["mnn_path"], in_names,
                                              list(model.outputs), runtime_manager=rt)

        def run(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
            args = []
            for name in in_names:
                x = np.asarray(feeds[name])
                if x.dtype == np.int64:
                    x = x.astype(np.int32)
                dtype = _MNN_DTYPES.get(x.dtype.name)
                if dtype is None:
                    raise TypeError(f"input {name!r}: MNN adapter has no dtype for {x.dtype}")
                args.append(expr.const(x, list(x.shape), expr.NCHW, getattr(expr, dtype)))
            outs = module.forward(args)
            if not isinstance(outs, (list, tuple)):
                outs = [outs]
            result = []
            for var in outs:
                if var.data_format == expr.NC4HW4:
                    var = expr.convert(var, expr.NCHW)
                result.append(np.array(var.read()))
            return result

        return run


class OnnxReferenceEngine(Engine):
    """onnx's own Python evaluator, ``onnx.reference.ReferenceEvaluator`` (slow: NumPy)."""

    def __init__(self) -> None:
        super().__init__(name="onnx-reference", module="onnx", dist="onnx",
                         install_hint="pip install onnx", slow=True)

    def prepare(self, model: ModelSpec, threads: int, artifacts: Mapping[str, Any]) -> RunFn:
        from onnx.reference import ReferenceEvaluator

        sess = ReferenceEvaluator(model.path)

        def run(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
            return [np.asarray(o) for o in sess.run(None, dict(feeds))]

        return run


class TorchEngine(Engine):
    """PyTorch eager on the zoo's own ``nn.Module`` (``inference_mode``, set_num_threads), on
    the CPU (``device``; :class:`TorchCudaEngine` runs it on a GPU)."""

    device = "cpu"

    def __init__(self) -> None:
        super().__init__(name="torch", module="torch", dist="torch",
                         install_hint="pip install torch==2.13.0")

    def unavailable(self, model: ModelSpec) -> tuple[str, str] | None:
        missing = super().unavailable(model)
        if missing:
            return missing
        if not model.zoo:
            return "not-applicable", "torch eager needs the zoo's nn.Module; MODEL is an .onnx file"
        return None

    def prepare(self, model: ModelSpec, threads: int, artifacts: Mapping[str, Any]) -> RunFn:
        import torch

        from refmnn import zoo

        torch.set_num_threads(threads)
        self.configure(torch)
        device = self.device
        module = zoo.torch_module(model.zoo_name).to(device)
        in_names = [n for n, _, _ in model.inputs]

        def run(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
            with torch.inference_mode():
                out = module(*(torch.from_numpy(np.asarray(feeds[n])).to(device)
                               for n in in_names))
            if isinstance(out, torch.Tensor):
                out = (out,)
            elif isinstance(out, Mapping):
                out = tuple(out.values())
            return [t.detach().cpu().numpy() for t in out]  # .cpu() waits for a GPU

        return run

    def configure(self, torch: Any) -> None:
        """Device settings made in the worker before the module is built (none on the CPU)."""

    def import_modules(self) -> None:
        import torch

        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # already set (parallel work started)
            pass


class TorchCudaEngine(TorchEngine):
    """PyTorch eager on a CUDA GPU, the peer of refmnn's device backends on a GPU machine: the
    zoo's module lives on the device; each run moves its inputs there and copies its outputs
    back (the copy waits for the GPU), so a run is timed whole, as a refmnn Session's is
    (upload, kernels, one synchronisation at the download). TF32 is turned off for matrix
    products and cuDNN convolutions (cuDNN's default is on), so that it computes in float32 as
    refmnn's backends do."""

    device = "cuda"

    def __init__(self) -> None:
        super().__init__()
        self.name = "torch-cuda"

    def unavailable(self, model: ModelSpec) -> tuple[str, str] | None:
        missing = super().unavailable(model)
        if missing:
            return missing
        if not any(Path("/dev").glob("nvidia[0-9]*")):  # import-free: torch loads in the worker
            return "not-applicable", "no NVIDIA GPU device (/dev/nvidia*) on this machine"
        return None

    def configure(self, torch: Any) -> None:
        if not torch.cuda.is_available():
            raise RuntimeError(f"torch {torch.__version__} sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


_PEER_FACTORIES: dict[str, Callable[[], Engine]] = {
    "onnxruntime": OnnxRuntimeEngine,
    "mnn": MnnEngine,
    "onnx-reference": OnnxReferenceEngine,
    "torch": TorchEngine,
    "torch-cuda": TorchCudaEngine,
}


def get(name: str) -> Engine:
    """The adapter for an engine name (``refmnn-<backend>`` or a peer name)."""
    if name.startswith(REFMNN_PREFIX):
        return RefmnnEngine(name[len(REFMNN_PREFIX):])
    try:
        return _PEER_FACTORIES[name]()
    except KeyError:
        known = ", ".join([REFMNN_PREFIX + "<backend>", *_PEER_FACTORIES])
        raise ValueError(f"unknown engine {name!r}; known: {known}") from None


def refmnn_backends() -> tuple[str, ...]:
    """refmnn backends this install offers (``reference`` always; others when refmnn lists them)."""
    try:
        import refmnn.backends as _backends
    except ImportError:
        return ("reference",)
    available = getattr(_backends, "available", None)
    if callable(available):
        try:
            names = tuple(available())
        except Exception:  # noqa: BLE001 - a broken optional backend must not stop benchmarks
            names = ()
        return ("reference", *(n for n in names if n != "reference"))
    return ("reference",)
