"""Resolve ``MODEL`` arguments to ONNX files, their inputs and their FLOPs.

A MODEL is a zoo name (``resnet18``, ...), ``zoo`` (every zoo model), either followed by
``@EXPORTER`` for another of torch's exporters than the zoo's default (``bert6@dynamo``,
``zoo@dynamo``; :data:`refmnn.zoo.EXPORTERS`), or a path to an ``.onnx`` file. Zoo models use
the zoo's own inputs (:func:`refmnn.zoo.make_inputs`) and FLOPs
(:func:`refmnn.zoo.count_flops`); a file gets seeded random inputs of its declared
shapes (symbolic dimensions become 1; floats standard normal, integers uniform in [0, 2),
booleans fair coin flips) and FLOPs counted from the graph (Conv, ConvTranspose, Gemm and
MatMul multiply-accumulates x 2, shapes from ONNX shape inference).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from refmnn.benchmark.engines import ModelSpec

INT_HIGH = 2
"""Integer inputs of a file model are drawn from [0, INT_HIGH): valid as indices of any axis."""


def _graph_io(model: Any) -> tuple[tuple[tuple[str, tuple[int, ...], str], ...], tuple[str, ...]]:
    """Declared (non-initializer) inputs with concrete shapes, and output names."""
    from onnx import helper

    initializers = {t.name for t in model.graph.initializer}
    inputs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in tensor.shape.dim)
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type)).name
        inputs.append((value.name, shape, dtype))
    return tuple(inputs), tuple(o.name for o in model.graph.output)


def onnx_flops(model: Any) -> int | None:
    """2 x the MACs of Conv / ConvTranspose / Gemm / MatMul nodes, from inferred shapes.

    Returns None when a needed shape is unknown. Nodes inside subgraphs are not counted.
    """
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - FLOPs are optional information
        return None
    shapes: dict[str, tuple[int, ...] | None] = {}
    for value in (*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output):
        dims = value.type.tensor_type.shape.dim
        if value.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            shapes[value.name] = tuple(d.dim_value for d in dims)
        else:
            shapes.setdefault(value.name, None)
    for init in inferred.graph.initializer:
        shapes[init.name] = tuple(init.dims)
    macs = 0
    for node in inferred.graph.node:
        if node.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul"):
            continue
        a = shapes.get(node.input[0])
        b = shapes.get(node.input[1])
        y = shapes.get(node.output[0])
        if a is None or b is None or y is None:
            return None
        if node.op_type == "Conv":
            macs += math.prod(y) * math.prod(b[1:])
        elif node.op_type == "ConvTranspose":
            macs += math.prod(a) * math.prod(b[1:])
        elif node.op_type == "Gemm":
            trans_a = next((at.i for at in node.attribute if at.name == "transA"), 0)
            macs += math.prod(y) * (a[0] if trans_a else a[-1])
        else:
            macs += math.prod(y) * a[-1]
    return 2 * macs


def resolve(args: list[str], cache_dir: Path | None = None) -> list[ModelSpec]:
    """ModelSpecs for the MODEL arguments, in order, ``zoo`` expanded, duplicates dropped.

    Raises:
        ValueError: an argument is neither a zoo name nor ``zoo`` (either with or without a
            known ``@EXPORTER``), nor an existing file.
    """
    from refmnn import zoo

    names: list[str] = []
    for arg in args:
        base, at, exporter = arg.partition("@")
        names.extend([f"{n}{at}{exporter}" for n in zoo.names()] if base == "zoo" else [arg])
    specs: list[ModelSpec] = []
    seen: set[str] = set()
    for arg in names:
        parsed = zoo.parse(arg)
        if parsed is not None:
            key = zoo.label(*parsed)
            if key not in seen:
                specs.append(_zoo_spec(*parsed, key, cache_dir))
        elif Path(arg).is_file():
            key = str(Path(arg).resolve())
            if key not in seen:
                specs.append(_file_spec(Path(arg)))
        else:
            raise ValueError(f"{arg!r} is neither a zoo model ({zoo.spec_help()}), 'zoo', "
                             "nor an .onnx file")
        seen.add(key)
    return specs


def _zoo_spec(name: str, exporter: str, label: str, cache_dir: Path | None) -> ModelSpec:
    import onnx

    from refmnn import zoo

    path = zoo.export_onnx(name, cache_dir, exporter=exporter)
    model = onnx.load(str(path), load_external_data=False)
    _, outputs = _graph_io(model)
    try:
        flops, source = zoo.count_flops(name)["flops"], "refmnn.zoo.count_flops"
    except ImportError:
        flops, source = onnx_flops(model), "onnx graph (Conv/Gemm/MatMul)"
    return ModelSpec(name=label, path=str(path), zoo=True, inputs=zoo.get(name).inputs,
                     outputs=outputs, flops=flops, flops_source=source)


def _file_spec(path: Path) -> ModelSpec:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    inputs, outputs = _graph_io(model)
    return ModelSpec(name=path.stem, path=str(path.resolve()), zoo=False, inputs=inputs,
                     outputs=outputs, flops=onnx_flops(model),
                     flops_source="onnx graph (Conv/Gemm/MatMul)")


def make_feeds(spec: ModelSpec, seed: int = 0) -> dict[str, np.ndarray]:
    """The inputs every engine gets: the zoo's for zoo models, seeded random otherwise."""
    if spec.zoo:
        from refmnn import zoo

        return zoo.make_inputs(spec.zoo_name, seed)
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for name, shape, dtype_name in spec.inputs:
        dtype = np.dtype(dtype_name)
        if dtype == np.bool_:
            feeds[name] = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(dtype, np.integer):
            feeds[name] = rng.integers(0, INT_HIGH, size=shape).astype(dtype)
        else:
            feeds[name] = rng.standard_normal(shape).astype(dtype)
    return feeds
