"""ONNX import: encodings, dtypes, external data, functions, IR versions and bad files."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import refmnn
import refmnn.dtypes
from refmnn import ModelError, UnsupportedOpError
from refmnn.dtypes import DType
from tests.helpers import add_relu_model, make_model

# Every element type the onnx package defines, with sample values that are exact in that type.
DTYPE_SAMPLES = {
    DType.float32: [1.5, -2.0, 0.0], DType.float64: [1.5, -2.0, 1e300],
    DType.float16: [1.5, -2.0, 65504.0], DType.bfloat16: [1.5, -2.0, 3.0e38],
    DType.int8: [-128, 0, 127], DType.int16: [-32768, 5, 32767], DType.int32: [-(2**31), 0, 2**31 - 1],
    DType.int64: [-(2**63), 0, 2**63 - 1], DType.uint8: [0, 1, 255], DType.uint16: [0, 7, 65535],
    DType.uint32: [0, 9, 2**32 - 1], DType.uint64: [0, 11, 2**64 - 1], DType.bool: [True, False, True],
    DType.complex64: [1 + 2j, -3j, 0], DType.complex128: [1 + 2j, -3j, 5],
    DType.float8e4m3fn: [1.5, -448.0, 0.0], DType.float8e4m3fnuz: [1.5, -240.0, 0.0],
    DType.float8e5m2: [1.5, -57344.0, 0.0], DType.float8e5m2fnuz: [1.5, -57344.0, 0.0],
    DType.float8e8m0: [1.0, 2.0, 0.5], DType.float4e2m1: [1.5, -6.0, 0.0],
    DType.float6e2m3: [1.5, -7.5, 0.0], DType.float6e3m2: [1.5, -28.0, 0.0],
    DType.int4: [-8, 0, 7], DType.uint4: [0, 5, 15], DType.int2: [-2, 0, 1], DType.uint2: [0, 2, 3],
}


def _constant_model(tensor: onnx.TensorProto, elem_type: int) -> onnx.ModelProto:
    """A graph whose only output is an initializer: import decodes it, nothing else runs."""
    graph = helper.make_graph([], "g", [], [helper.make_tensor_value_info(tensor.name, elem_type, [3])],
                              initializer=[tensor])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    return model


@pytest.mark.parametrize("dtype", sorted(DTYPE_SAMPLES, key=lambda d: d.value), ids=lambda d: d.name)
@pytest.mark.parametrize("raw", [True, False], ids=["raw_data", "typed_fields"])
def test_every_dtype_imports_in_both_encodings(dtype, raw):
    want = np.array(DTYPE_SAMPLES[dtype], dtype=dtype.numpy)
    if raw:
        tensor = numpy_helper.from_array(want, "c")
        assert tensor.HasField("raw_data") or dtype is DType.string
    else:
        narrow = dtype in (DType.float16, DType.bfloat16) or dtype in refmnn.dtypes.NARROW_FLOATS
        vals = want.astype(np.float32) if narrow else want
        tensor = helper.make_tensor("c", dtype.value, [3], vals.tolist(), raw=False)
    got = refmnn.Session(_constant_model(tensor, dtype.value), check=False).run({})["c"]
    assert got.dtype == dtype.numpy
    np.testing.assert_array_equal(got.astype(np.float64) if got.dtype.kind not in "cb" else got,
                                  want.astype(np.float64) if want.dtype.kind not in "cb" else want)


def test_string_tensor_imports_as_str_objects():
    tensor = helper.make_tensor("c", TensorProto.STRING, [3], [b"a", "b\u00e9".encode(), b""])
    got = refmnn.Session(_constant_model(tensor, TensorProto.STRING)).run({})["c"]
    assert got.dtype == object and list(got) == ["a", "b\u00e9", ""]


def test_external_data_inside_the_folder_loads(tmp_path):
    weight = np.arange(3000, dtype=np.float32).reshape(1000, 3)
    init = numpy_helper.from_array(weight, "W")
    f = TensorProto.FLOAT
    model = make_model([helper.make_node("Add", ["A", "W"], ["Y"], name="add")],
                       [("A", f, [1000, 3])], [("Y", f, [1000, 3])], initializers=[init])
    path = tmp_path / "m.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="weights.bin",
                    size_threshold=0)
    assert (tmp_path / "weights.bin").exists()
    out = refmnn.Session(str(path)).run({"A": np.ones((1000, 3), np.float32)})
    np.testing.assert_array_equal(out["Y"], weight + 1)


@pytest.mark.parametrize("dtype", sorted(set(DTYPE_SAMPLES) - {DType.string},
                                          key=lambda d: d.value), ids=lambda d: d.name)
def test_every_dtype_imports_from_external_data(dtype, tmp_path):
    """Each element type from an external file shared with other tensors (at an offset, with
    and without its ``length``) imports as from raw_data: the types NumPy stores as ONNX does
    are read straight into their arrays, the packed ones decoded through a TensorProto."""
    want = np.array(DTYPE_SAMPLES[dtype], dtype=dtype.numpy)
    before = numpy_helper.from_array(np.arange(5, dtype=np.float32), "before")  # a nonzero offset
    tensor = numpy_helper.from_array(want, "c")
    model = _constant_model(tensor, dtype.value)
    model.graph.initializer.append(before)
    model.graph.initializer.reverse()
    path = tmp_path / "m.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="w.bin",
                    size_threshold=0, all_tensors_to_one_file=True)
    for keep_length in (True, False):
        saved = onnx.load(str(path), load_external_data=False)
        entries = saved.graph.initializer[1].external_data
        assert {e.key for e in entries} >= {"location", "offset", "length"}
        if not keep_length:
            kept = [(e.key, e.value) for e in entries if e.key != "length"]
            del entries[:]
            for key, value in kept:
                entries.add(key=key, value=value)
        path.write_bytes(saved.SerializeToString())
        got = refmnn.Session(str(path), check=False).run({})["c"]
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


def test_external_data_shorter_than_its_tensor_is_a_model_error(tmp_path):
    weight = np.arange(3000, dtype=np.float32)
    model = _constant_model(numpy_helper.from_array(weight, "c"), TensorProto.FLOAT)
    path = tmp_path / "m.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="w.bin",
                    size_threshold=0)
    data = tmp_path / "w.bin"
    data.write_bytes(data.read_bytes()[:-8])
    with pytest.raises(ModelError, match=r"holds 11992 bytes at offset 0, 12000 expected"):
        refmnn.Session(str(path), check=False)


@pytest.mark.parametrize("entry, message", [
    ({"dims": [10**12]}, r"holds 12 bytes at offset 0, 4000000000000 expected"),
    ({"offset": "64"}, r"holds 0 bytes at offset 64, 12 expected"),
    ({"offset": "-4"}, r"offset '-4' / length None .* is not a byte count"),
    ({"length": "twelve"}, r"offset None / length 'twelve' .* is not a byte count")])
def test_external_data_that_cannot_hold_its_tensor_is_a_model_error(tmp_path, entry, message):
    """Dims far beyond the file, an offset past its end, a negative or non-numeric offset or
    length: a ModelError naming the tensor, before any memory is taken for it."""
    (tmp_path / "w.bin").write_bytes(np.zeros(3, np.float32).tobytes())
    tensor = TensorProto(name="c", data_type=TensorProto.FLOAT, dims=entry.get("dims", [3]),
                         data_location=TensorProto.EXTERNAL)
    for key in ("location", "offset", "length"):
        value = {"location": "w.bin"}.get(key, entry.get(key))
        if value is not None:
            tensor.external_data.add(key=key, value=value)
    path = tmp_path / "m.onnx"
    path.write_bytes(_constant_model(tensor, TensorProto.FLOAT).SerializeToString())
    with pytest.raises(ModelError, match=message):
        refmnn.Session(str(path), check=False)


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/passwd", "sub/../../outside.bin"])
def test_external_data_outside_the_folder_is_refused(tmp_path, location):
    (tmp_path / "outside.bin").write_bytes(np.zeros(3, np.float32).tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    tensor = numpy_helper.from_array(np.zeros(3, np.float32), "W")
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", location
    model = _constant_model(tensor, TensorProto.FLOAT)
    path = folder / "m.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ModelError, match="outside the model's folder|absolute path"):
        refmnn.Session(str(path), check=False)


def test_external_data_without_a_folder_explains_itself(tmp_path):
    tensor = numpy_helper.from_array(np.zeros(3, np.float32), "W")
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "w.bin"
    with pytest.raises(ModelError, match="load the model from its file path"):
        refmnn.Session(_constant_model(tensor, TensorProto.FLOAT).SerializeToString(), check=False)


def test_truncated_file_is_a_model_error(tmp_path):
    data = add_relu_model().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="cut.onnx"):
        refmnn.Session(str(path))


@pytest.mark.parametrize("data", [b"", b"\x00\x01garbage\xff" * 10, b"not an onnx model at all"])
def test_corrupted_bytes_are_a_model_error(data):
    with pytest.raises(ModelError):
        refmnn.Session(data)


def test_missing_file_is_a_model_error(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        refmnn.Session(str(tmp_path / "nope.onnx"))


@pytest.mark.parametrize("form", ["proto", "bytes", "path", "path with external data"])
def test_model_failing_validation_is_a_model_error(tmp_path, form):
    """Whatever form the model comes in: a file or bytes are checked as the bytes read (a
    model with external data fails that check, then passes or fails the check by its path)."""
    f = TensorProto.FLOAT
    init = numpy_helper.from_array(np.ones(2, np.float32), "W")
    model = make_model([helper.make_node("Add", ["A", "undefined"], ["Y"], name="add"),
                        helper.make_node("Add", ["Y", "W"], ["Z"], name="add_w")],
                       [("A", f, [2])], [("Z", f, [2])], initializers=[init])
    source: object = model
    if form == "bytes":
        source = model.SerializeToString()
    elif form.startswith("path"):
        source = str(tmp_path / "m.onnx")
        onnx.save_model(model, source, save_as_external_data=form.endswith("data"),
                        location="w.bin", size_threshold=0)
    with pytest.raises(ModelError, match="fails ONNX validation.*undefined"):
        refmnn.Session(source)


def test_unsupported_ops_are_all_listed_before_running():
    f = TensorProto.FLOAT
    nodes = [helper.make_node("FancyOp", ["A"], ["B"], name="n1", domain="com.acme"),
             helper.make_node("OtherOp", ["B"], ["C"], name="n2", domain="com.acme"),
             helper.make_node("FancyOp", ["C"], ["Y"], name="n3", domain="com.acme")]
    model = make_model(nodes, [("A", f, [2])], [("Y", f, [2])], extra_opsets=[("com.acme", 3)])
    with pytest.raises(UnsupportedOpError) as info:
        refmnn.Session(model, check=False)
    assert info.value.missing == (("com.acme", "FancyOp", 3), ("com.acme", "OtherOp", 3))
    assert "com.acme::FancyOp (opset 3)" in str(info.value)


def test_model_local_function_is_inlined_with_attribute_references():
    f = TensorProto.FLOAT
    body = [helper.make_node("Add", ["x", "x"], ["twice"]),
            helper.make_node("LeakyRelu", ["twice"], ["y"])]
    body[1].attribute.append(helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    function = helper.make_function("local", "DoubleLeaky", ["x"], ["y"], body,
                                    [helper.make_opsetid("", 17)], attributes=["alpha"])
    call = helper.make_node("DoubleLeaky", ["A"], ["Y"], name="call", domain="local", alpha=0.5)
    model = make_model([call], [("A", f, [3])], [("Y", f, [3])],
                       extra_opsets=[("local", 1)], functions=[function])
    graph = refmnn.load(model)
    assert [n.op for n in graph.nodes] == ["Add", "LeakyRelu"]
    out = refmnn.Session(graph).run({"A": np.array([-2, 0, 3], np.float32)})
    np.testing.assert_allclose(out["Y"], [-2.0, 0.0, 6.0])


@pytest.mark.parametrize("ir_version,opset", [(3, 7), (7, 13), (onnx.IR_VERSION, onnx.defs.onnx_opset_version())])
def test_ir_versions_and_opsets_from_old_to_newest(ir_version, opset):
    model = add_relu_model()
    model.ir_version = ir_version
    model.opset_import[0].version = opset
    feeds = {"A": np.array([[1, -2, 3]] * 2, np.float32), "B": np.ones((2, 3), np.float32)}
    out = refmnn.Session(model).run(feeds)
    np.testing.assert_array_equal(out["Y"], np.maximum(feeds["A"] + 1, 0))


def test_symbolic_dims_survive_import():
    graph = refmnn.load(add_relu_model(("batch", 3)))
    assert graph.inputs[0].type.shape == ("batch", 3)


def test_initializers_are_read_only():
    init = numpy_helper.from_array(np.ones(3, np.float32), "W")
    graph = refmnn.load(_constant_model(init, TensorProto.FLOAT))
    with pytest.raises(ValueError):
        graph.initializers["W"][0] = 5
    assert ml_dtypes.bfloat16  # ml_dtypes is the narrow-dtype provider
