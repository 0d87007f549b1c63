"""A zoo of standard architectures, exported to ONNX the way users export them.

The architectures are written in plain PyTorch (faithful to torchvision / timm / Hugging
Face definitions), given deterministic seeded weights (nothing is downloaded) and exported
at batch size 1 by either of torch's two exporters (``EXPORTERS``):

* ``"torchscript"`` (the default, the zoo's figures): the TorchScript exporter at opset 17,
  as most published ONNX models were made::

      torch.onnx.export(model.eval(), args, f, opset_version=17, dynamo=False,
                        input_names=[...], output_names=["output"], do_constant_folding=True)

* ``"dynamo"``: what ``torch.onnx.export(model, args, f)`` writes with torch's defaults since
  torch 2.9 (``dynamo=True``, its own opset -- 20 with torch 2.13 --, its graph optimiser,
  the weights in an external-data file ``f + ".data"``); it needs ``onnxscript``. The graphs
  differ: Gelu and LayerNormalization as single ops, BatchNormalization folded into the
  convolutions, ReduceMean for global pooling.

``import refmnn.zoo`` does not import torch; only the functions that build models do, and
they ask for ``pip install torch==2.13.0`` (and ``onnxscript``) when it is missing.

Models (MACs counted by :func:`count_flops`: Conv2d, Linear and the attention matmuls
``q @ k^T`` and ``attn @ v``; embeddings, norms, activations, pooling are not counted):

==============  ==================  ============  ==========
name            input               params (M)    GMACs
==============  ==================  ============  ==========
resnet18        1x3x224x224 f32     11.690        1.814
mobilenet_v2    1x3x224x224 f32     3.505         0.301
squeezenet1_1   1x3x224x224 f32     1.235         0.349
vit_tiny        1x3x224x224 f32     5.717         1.254
bert6           1x128 int64         22.565        1.434
mobilenet_v1    1x3x224x224 f32     4.232         0.569
==============  ==================  ============  ==========

Example::

    from refmnn import zoo
    path = zoo.export_onnx("resnet18")          # cached under ~/.cache/refmnn/zoo
    feeds = zoo.make_inputs("resnet18", seed=0)  # {"input": float32 (1, 3, 224, 224)}
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.util
import logging
import os
import shutil
import tempfile
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = [
    "EXPORTERS",
    "OPSET",
    "TORCH_REQUIREMENT",
    "VOCAB_SIZE",
    "ZooModel",
    "count_flops",
    "default_cache_dir",
    "export_onnx",
    "get",
    "label",
    "make_inputs",
    "names",
    "parse",
    "spec_help",
    "torch_module",
]

OPSET: int = 17
"""ONNX opset of the TorchScript exports (the dynamo exporter chooses its own)."""

EXPORTERS: tuple[str, ...] = ("torchscript", "dynamo")
"""The exporters :func:`export_onnx` can use; the first is the default."""

TORCH_REQUIREMENT: str = "torch==2.13.0"
"""The torch version the zoo is written and checked against."""

VOCAB_SIZE: int = 30522
"""Vocabulary size of ``bert6``; integer inputs are drawn from ``[0, VOCAB_SIZE)``."""

_IMAGE: tuple[tuple[str, tuple[int, ...], str], ...] = (("input", (1, 3, 224, 224), "float32"),)
_TOKENS: tuple[tuple[str, tuple[int, ...], str], ...] = (("input_ids", (1, 128), "int64"),)

_ZOO_DIR = Path(__file__).resolve().parent
_SOURCE_FILES: tuple[str, ...] = ("__init__.py", "_init.py", "cnn.py", "transformer.py")
"""Files whose contents define the exported graphs (part of the export cache key)."""


@dataclass(frozen=True)
class ZooModel:
    """Description of one zoo model.

    Attributes:
        name: Public key, e.g. ``"resnet18"``.
        inputs: ``(name, shape, numpy dtype name)`` for each graph input, in order.
        description: One-line human description.
        build: Returns the eval-mode ``torch.nn.Module`` with its seeded weights
            (imports torch lazily).
    """

    name: str
    inputs: tuple[tuple[str, tuple[int, ...], str], ...]
    description: str
    build: Callable[[], torch.nn.Module]


def _import_torch() -> types.ModuleType:
    """Import torch, or explain how to install it.

    Returns:
        The ``torch`` module.

    Raises:
        ImportError: torch is not installed.
    """
    try:
        return importlib.import_module("torch")
    except ImportError as exc:
        raise ImportError(
            "refmnn.zoo needs PyTorch to build and export models; install it with "
            f"`pip install {TORCH_REQUIREMENT}` (or `pip install refmnn[zoo]`)."
        ) from exc


def _build(module: str, factory: str) -> torch.nn.Module:
    """Import ``refmnn.zoo.<module>`` (and torch) and call its ``factory``.

    Args:
        module: Submodule name, e.g. ``"cnn"``.
        factory: Name of the zero-argument build function in it.

    Returns:
        The built module.
    """
    _import_torch()
    return getattr(importlib.import_module(f"refmnn.zoo.{module}"), factory)()


def _entry(
    name: str, inputs: tuple[tuple[str, tuple[int, ...], str], ...], module: str, desc: str
) -> ZooModel:
    """Make the registry entry for ``name`` built by ``refmnn.zoo.<module>.build_<name>``."""
    return ZooModel(name, inputs, desc, functools.partial(_build, module, f"build_{name}"))


_MODELS: Mapping[str, ZooModel] = types.MappingProxyType(
    {
        m.name: m
        for m in (
            _entry(
                "resnet18",
                _IMAGE,
                "cnn",
                "ResNet-18 (torchvision), BasicBlock [2,2,2,2], 1000 classes",
            ),
            _entry(
                "mobilenet_v2", _IMAGE, "cnn", "MobileNetV2 1.0 (torchvision), ReLU6, 1000 classes"
            ),
            _entry("squeezenet1_1", _IMAGE, "cnn", "SqueezeNet 1.1 (torchvision), ceil-mode pools"),
            _entry(
                "vit_tiny",
                _IMAGE,
                "transformer",
                "ViT-Ti/16 (timm layout): dim 192, depth 12, 3 heads, pre-LN, exact GELU",
            ),
            _entry(
                "bert6",
                _TOKENS,
                "transformer",
                "BERT encoder: 6 layers, hidden 384, 12 heads, FFN 1536, post-LN, no pooler",
            ),
            _entry(
                "mobilenet_v1", _IMAGE, "cnn", "MobileNetV1 1.0, depthwise-separable, BN + ReLU"
            ),
        )
    }
)


def names() -> tuple[str, ...]:
    """Return the names of all zoo models, in a stable order.

    Returns:
        ``("resnet18", "mobilenet_v2", "squeezenet1_1", "vit_tiny", "bert6", "mobilenet_v1")``.
    """
    return tuple(_MODELS)


def get(name: str) -> ZooModel:
    """Look up a zoo model by name.

    Args:
        name: Model name (see :func:`names`).

    Returns:
        The model's :class:`ZooModel`.

    Raises:
        ValueError: ``name`` is not a zoo model; the message lists the known names.
    """
    try:
        return _MODELS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown zoo model {name!r}; known models: {', '.join(names())}"
        ) from None


def default_cache_dir() -> Path:
    """Return the default export cache directory.

    Returns:
        ``$XDG_CACHE_HOME/refmnn/zoo`` if that variable is set, else ``~/.cache/refmnn/zoo``.
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "refmnn" / "zoo"


def _source_hash() -> str:
    """Return a short SHA-256 over the zoo's model-defining source files."""
    digest = hashlib.sha256()
    for fname in _SOURCE_FILES:
        digest.update(fname.encode())
        digest.update((_ZOO_DIR / fname).read_bytes())
    return digest.hexdigest()[:12]


def make_inputs(name: str, seed: int = 0) -> dict[str, np.ndarray]:
    """Make deterministic example inputs for a zoo model.

    Float inputs are ``standard_normal`` samples, integer inputs are token ids uniform in
    ``[0, VOCAB_SIZE)``, both from ``np.random.default_rng(seed)`` in input order.

    Args:
        name: Model name.
        seed: Seed of the NumPy generator.

    Returns:
        Mapping from input name to array of the declared shape and dtype.
    """
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for inp_name, shape, dtype in get(name).inputs:
        if np.issubdtype(np.dtype(dtype), np.integer):
            feeds[inp_name] = rng.integers(0, VOCAB_SIZE, size=shape, dtype=np.dtype(dtype))
        else:
            feeds[inp_name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def torch_module(name: str) -> torch.nn.Module:
    """Build the eval-mode PyTorch module of a zoo model (same weights as the ONNX export).

    Args:
        name: Model name.

    Returns:
        The module, in eval mode.

    Raises:
        ValueError: Unknown model name.
        ImportError: torch is not installed.
    """
    return get(name).build().eval()


def _torch_inputs(name: str, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Return :func:`make_inputs` as a tuple of torch tensors in input order."""
    torch = _import_torch()
    feeds = make_inputs(name, seed)
    return tuple(torch.from_numpy(feeds[n]) for n, _, _ in get(name).inputs)


@contextlib.contextmanager
def _quiet_export() -> Iterator[None]:
    """Silence the exporters' deprecation / tracer chatter and the dynamo exporter's log lines
    (``torchvision is not installed. Skipping torchvision::nms``) while exporting."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\..*")
        try:
            from torch.jit import TracerWarning
        except ImportError:  # pragma: no cover - torch layout change
            pass
        else:
            warnings.simplefilter("ignore", TracerWarning)
        logger.setLevel(logging.ERROR)
        try:
            yield
        finally:
            logger.setLevel(level)


def parse(spec: str) -> tuple[str, str] | None:
    """``(name, exporter)`` for a zoo model named with an optional exporter, ``NAME`` or
    ``NAME@EXPORTER`` (``"bert6@dynamo"`` -> ``("bert6", "dynamo")``, ``"bert6"`` ->
    ``("bert6", "torchscript")``); None when ``NAME`` is not a zoo model.

    Raises:
        ValueError: a zoo model with an unknown exporter.
    """
    name, at, exporter = spec.partition("@")
    if name not in _MODELS:
        return None
    if at:
        _check_exporter(exporter)
    return name, exporter or EXPORTERS[0]


def label(name: str, exporter: str) -> str:
    """The inverse of :func:`parse`: ``NAME``, or ``NAME@EXPORTER`` for a non-default one."""
    return name if exporter == EXPORTERS[0] else f"{name}@{exporter}"


def spec_help() -> str:
    """What names a zoo model in a MODEL argument, for error messages."""
    return f"{', '.join(names())}; NAME@EXPORTER for exporters {', '.join(EXPORTERS)}"


def _check_exporter(exporter: str) -> None:
    """Raise ValueError for an unknown exporter."""
    if exporter not in EXPORTERS:
        raise ValueError(f"unknown exporter {exporter!r}; known exporters: {', '.join(EXPORTERS)}")


def export_onnx(name: str, cache_dir: str | os.PathLike[str] | None = None, *,
                exporter: str = "torchscript") -> Path:
    """Export a zoo model to ONNX (batch 1), or return the cached export.

    The file name contains the model name, the exporter (``-dynamo`` for dynamo), the torch
    version and a hash of the zoo sources, so editing a model definition or changing torch
    re-exports. The export is written in a temporary folder of the cache directory and moved
    into place with :func:`os.replace` (a dynamo export's weights file first, then the model
    that names it), so concurrent callers never observe a partial file.

    Args:
        name: Model name.
        cache_dir: Directory for exported models; defaults to :func:`default_cache_dir`.
        exporter: ``"torchscript"`` (opset 17) or ``"dynamo"`` (torch's default exporter; the
            weights go to an external-data file next to the model, named ``<file>.data``);
            see the module docstring.

    Returns:
        Path of the ``.onnx`` file.

    Raises:
        ValueError: Unknown model name or exporter.
        ImportError: torch is not installed (message says ``pip install torch==2.13.0``), or
            onnxscript for the dynamo exporter.
    """
    model = get(name)
    _check_exporter(exporter)
    if exporter == "dynamo" and importlib.util.find_spec("onnxscript") is None:
        raise ImportError("the dynamo exporter needs onnxscript: `pip install onnxscript` "
                          "(or `pip install refmnn[zoo]`)")
    torch = _import_torch()
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    version = torch.__version__.replace("+", "_")
    flavour = f"opset{OPSET}" if exporter == "torchscript" else "dynamo"
    target = directory / f"{name}-{flavour}-torch{version}-{_source_hash()}.onnx"
    if target.is_file():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    module = model.build().eval()
    args = _torch_inputs(name)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=directory))
    try:
        staged = staging / target.name
        with torch.no_grad(), _quiet_export():
            if exporter == "torchscript":
                torch.onnx.export(module, args, str(staged), opset_version=OPSET, dynamo=False,
                                  input_names=[n for n, _, _ in model.inputs],
                                  output_names=["output"], do_constant_folding=True)
            else:
                torch.onnx.export(module, args, str(staged), dynamo=True, verbose=False,
                                  input_names=[n for n, _, _ in model.inputs],
                                  output_names=["output"])
        # the weights file before the model that names it; 0644: mkdtemp's files may be 0600
        # and the cache may be shared
        for part in sorted(staging.iterdir(), key=lambda f: f.suffix == ".onnx"):
            os.chmod(part, 0o644)
            os.replace(part, directory / part.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def count_flops(name: str) -> dict[str, int]:
    """Count multiply-accumulates and parameters of a zoo model at its declared input shape.

    MACs come from forward hooks on ``Conv2d`` (``out.numel() * in_ch / groups * kh * kw``),
    ``Linear`` (``out.numel() * in_features``) and the attention ``MatMul`` modules
    (``out.numel() * a.shape[-1]``); nothing else is counted.

    Args:
        name: Model name.

    Returns:
        ``{"macs": ..., "flops": 2 * macs, "params": ...}``.

    Raises:
        ValueError: Unknown model name.
        ImportError: torch is not installed.
    """
    torch = _import_torch()
    from refmnn.zoo.transformer import MatMul

    module = torch_module(name)
    macs: list[int] = []

    def hook(mod: torch.nn.Module, args: tuple[Any, ...], out: torch.Tensor) -> None:
        """Record the MACs of one Conv2d / Linear / MatMul call."""
        if isinstance(mod, torch.nn.Conv2d):
            kh, kw = mod.kernel_size
            macs.append(out.numel() * (mod.in_channels // mod.groups) * kh * kw)
        elif isinstance(mod, torch.nn.Linear):
            macs.append(out.numel() * mod.in_features)
        else:
            macs.append(out.numel() * args[0].shape[-1])

    handles = [
        m.register_forward_hook(hook)
        for m in module.modules()
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear, MatMul))
    ]
    try:
        with torch.no_grad():
            module(*_torch_inputs(name))
    finally:
        for h in handles:
            h.remove()
    total = sum(macs)
    params = sum(p.numel() for p in module.parameters())
    return {"macs": total, "flops": 2 * total, "params": params}
