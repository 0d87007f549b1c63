"""Tests for :mod:`refmnn.zoo`: ONNX export, ORT-vs-torch agreement, model statistics."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from refmnn import zoo

ALL = ("resnet18", "mobilenet_v2", "squeezenet1_1", "vit_tiny", "bert6", "mobilenet_v1")

# name -> (params in millions, 3 decimals; GMACs, 3 decimals)
EXPECTED: dict[str, tuple[float, float]] = {
    "resnet18": (11.690, 1.814),
    "mobilenet_v2": (3.505, 0.301),
    "squeezenet1_1": (1.235, 0.349),
    "mobilenet_v1": (4.232, 0.569),
    "vit_tiny": (5.717, 1.254),
    "bert6": (22.565, 1.434),
}

OUTPUT_SHAPES: dict[str, tuple[int, ...]] = {n: (1, 1000) for n in ALL} | {"bert6": (1, 128, 384)}

_ONNX_DTYPES = {1: "float32", 7: "int64"}


@pytest.fixture(scope="session")
def zoo_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One export cache per test session, so each model is exported once."""
    return tmp_path_factory.mktemp("zoo_cache")


def _rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    """``||a - b||_2 / ||b||_2`` in float64."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a64 - b64) / np.linalg.norm(b64))


def test_names_stable() -> None:
    assert zoo.names() == ALL
    for name in ALL:
        assert zoo.get(name).name == name


def test_unknown_name_is_clear() -> None:
    with pytest.raises(ValueError, match=r"unknown zoo model 'resnet19'.*resnet18.*bert6"):
        zoo.get("resnet19")
    with pytest.raises(ValueError, match="known models"):
        zoo.make_inputs("nope")
    with pytest.raises(ValueError, match="known models"):
        zoo.export_onnx("nope")


def test_import_does_not_import_torch() -> None:
    code = "import sys, refmnn.zoo; assert 'torch' not in sys.modules, 'torch imported'"
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


@pytest.mark.parametrize("name", ALL)
def test_make_inputs(name: str) -> None:
    feeds = zoo.make_inputs(name, seed=3)
    assert list(feeds) == [n for n, _, _ in zoo.get(name).inputs]
    for inp_name, shape, dtype in zoo.get(name).inputs:
        arr = feeds[inp_name]
        assert arr.shape == shape and arr.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(arr, zoo.make_inputs(name, seed=3)[inp_name])
        if arr.dtype == np.int64:
            assert arr.min() >= 0 and arr.max() < zoo.VOCAB_SIZE


@pytest.mark.parametrize("name", ALL)
def test_export_is_valid_onnx(name: str, zoo_cache: Path) -> None:
    pytest.importorskip("torch")
    import onnx

    path = zoo.export_onnx(name, cache_dir=zoo_cache)
    assert path.is_file() and path.parent == zoo_cache
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    assert {(o.domain, o.version) for o in model.opset_import} == {("", 17)}
    declared = zoo.get(name).inputs
    assert [i.name for i in model.graph.input] == [n for n, _, _ in declared]
    for graph_input, (_, shape, dtype) in zip(model.graph.input, declared):
        ttype = graph_input.type.tensor_type
        assert _ONNX_DTYPES[ttype.elem_type] == dtype
        assert tuple(d.dim_value for d in ttype.shape.dim) == shape
    assert [o.name for o in model.graph.output] == ["output"]


def test_export_is_cached(zoo_cache: Path) -> None:
    pytest.importorskip("torch")
    first = zoo.export_onnx("squeezenet1_1", cache_dir=zoo_cache)
    mtime = first.stat().st_mtime_ns
    again = zoo.export_onnx("squeezenet1_1", cache_dir=zoo_cache)
    assert again == first and again.stat().st_mtime_ns == mtime
    assert "squeezenet1_1" in first.name
    assert not [p for p in zoo_cache.iterdir() if p.name.startswith(".")]  # no staging left


@pytest.mark.parametrize("name", ALL)
def test_onnxruntime_matches_torch(name: str, zoo_cache: Path) -> None:
    torch = pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")

    path = zoo.export_onnx(name, cache_dir=zoo_cache)
    feeds = zoo.make_inputs(name, seed=0)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    (got,) = session.run(["output"], feeds)
    with torch.no_grad():
        args = [torch.from_numpy(feeds[n]) for n, _, _ in zoo.get(name).inputs]
        ref = zoo.torch_module(name)(*args)
    ref_np = ref.numpy()
    assert got.shape == ref_np.shape == OUTPUT_SHAPES[name]
    assert np.isfinite(ref_np).all() and float(np.std(ref_np)) > 0
    assert _rel_l2(got, ref_np) <= 1e-5


@pytest.mark.parametrize("name", ALL)
def test_params_and_macs(name: str) -> None:
    pytest.importorskip("torch")
    stats = zoo.count_flops(name)
    params_m, gmacs = EXPECTED[name]
    assert round(stats["params"] / 1e6, 3) == params_m
    assert round(stats["macs"] / 1e9, 3) == gmacs
    assert stats["flops"] == 2 * stats["macs"]


def test_torch_module_is_deterministic() -> None:
    torch = pytest.importorskip("torch")
    state = torch.random.get_rng_state()
    a = zoo.torch_module("squeezenet1_1").state_dict()
    b = zoo.torch_module("squeezenet1_1").state_dict()
    assert torch.equal(state, torch.random.get_rng_state()), "global torch RNG was disturbed"
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not zoo.torch_module("squeezenet1_1").training


def test_cli_export(tmp_path: Path, zoo_cache: Path) -> None:
    pytest.importorskip("torch")
    from refmnn.zoo.__main__ import main

    argv = ["export", "squeezenet1_1", "--out", str(tmp_path), "--cache-dir", str(zoo_cache)]
    assert main(argv) == 0
    assert (tmp_path / "squeezenet1_1.onnx").is_file()


def test_dynamo_export_keeps_its_weights_apart(zoo_cache: Path) -> None:
    """torch's default exporter: its own opset, the weights in ``<file>.data``; cached apart
    from the TorchScript export."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    import onnx
    from onnx.external_data_helper import uses_external_data

    path = zoo.export_onnx("squeezenet1_1", cache_dir=zoo_cache, exporter="dynamo")
    assert "dynamo" in path.name and path != zoo.export_onnx("squeezenet1_1", cache_dir=zoo_cache)
    assert path.with_name(path.name + ".data").is_file()
    model = onnx.load(str(path), load_external_data=False)
    assert any(uses_external_data(t) for t in model.graph.initializer)
    assert {o.domain: o.version for o in model.opset_import}[""] >= 18
    onnx.checker.check_model(str(path))
    assert [i.name for i in model.graph.input] == ["input"]
    assert [o.name for o in model.graph.output] == ["output"]
    mtime = path.stat().st_mtime_ns
    assert zoo.export_onnx("squeezenet1_1", cache_dir=zoo_cache, exporter="dynamo") == path
    assert path.stat().st_mtime_ns == mtime
    assert not [p for p in zoo_cache.iterdir() if p.name.startswith(".")]


def test_exporter_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"unknown exporter 'tflite'.*torchscript, dynamo"):
        zoo.export_onnx("squeezenet1_1", exporter="tflite")
    real = zoo.importlib.util.find_spec
    monkeypatch.setattr(zoo.importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxscript" else real(name, *a))
    with pytest.raises(ImportError, match="pip install onnxscript"):
        zoo.export_onnx("squeezenet1_1", exporter="dynamo")


def test_cli_export_dynamo(tmp_path: Path, zoo_cache: Path) -> None:
    """The copy names its own weights file, and runs as the cached export does."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    import refmnn
    from refmnn.zoo.__main__ import main

    argv = ["export", "squeezenet1_1", "--exporter", "dynamo", "--out", str(tmp_path),
            "--cache-dir", str(zoo_cache)]
    assert main(argv) == 0
    assert main(argv) == 0  # again over the first copy: its weights file is rewritten whole
    copy = tmp_path / "squeezenet1_1.onnx"
    assert sorted(p.name for p in tmp_path.iterdir()) == [copy.name, copy.name + ".data"]
    feeds = zoo.make_inputs("squeezenet1_1")
    cached = zoo.export_onnx("squeezenet1_1", cache_dir=zoo_cache, exporter="dynamo")
    np.testing.assert_array_equal(refmnn.Session(copy).run(feeds)["output"],
                                  refmnn.Session(cached).run(feeds)["output"])
