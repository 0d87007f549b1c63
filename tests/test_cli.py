"""The refmnn command line: run, info and error reporting."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

from refmnn.cli import main
from tests.helpers import add_relu_model, make_model


@pytest.fixture
def model_path(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(add_relu_model().SerializeToString())
    return path


def test_run_with_seeded_random_inputs_and_output_dir(model_path, tmp_path, capsys):
    out_dir = tmp_path / "out"
    assert main(["run", str(model_path), "--seed", "3", "--output-dir", str(out_dir)]) == 0
    printed = capsys.readouterr().out
    assert "Y: float32[2, 3]" in printed
    saved = np.load(out_dir / "Y.npy")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(saved, np.maximum(a + b, 0))


def test_run_with_given_inputs(model_path, tmp_path, capsys):
    np.save(tmp_path / "a.npy", np.full((2, 3), 2, np.float32))
    np.save(tmp_path / "b.npy", np.full((2, 3), -5, np.float32))
    assert main(["run", str(model_path), "--input", f"A={tmp_path / 'a.npy'}",
                 "--input", f"B={tmp_path / 'b.npy'}", "--output-dir", str(tmp_path)]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "Y.npy"), np.zeros((2, 3)))


def test_symbolic_dim_without_shape_is_an_error_naming_it(tmp_path, capsys):
    path = tmp_path / "sym.onnx"
    path.write_bytes(add_relu_model(("batch", 3)).SerializeToString())
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "symbolic dim(s) ['batch']" in err and "--shape A=" in err
    assert main(["run", str(path), "--shape", "A=4,3", "--shape", "B=4,3"]) == 0
    assert "Y: float32[4, 3]" in capsys.readouterr().out


def test_a_random_input_larger_than_the_machine_is_refused_before_drawing(tmp_path, capsys):
    path = tmp_path / "sym.onnx"
    path.write_bytes(add_relu_model(("batch", 3)).SerializeToString())
    code = main(["run", str(path), "--shape", "A=100000000000,3", "--shape", "B=1,3"])
    err = capsys.readouterr().err
    assert code != 0 and "input 'A': random float32[100000000000, 3] needs 2.18 TiB" in err
    assert "the machine has" in err and "Traceback" not in err


def test_negative_shape_and_unusable_output_dir_are_usage_errors(model_path, tmp_path, capsys):
    assert main(["run", str(model_path), "--shape", "A=-1,3"]) == 2
    assert "--shape 'A=-1,3': dims must be >= 0" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["run", str(model_path), "--output-dir", str(blocker / "out")]) == 2
    err = capsys.readouterr()
    assert f"--output-dir {blocker / 'out'}: cannot create it" in err.err
    assert "Y:" not in err.out  # refused before running, not after the work was done


def test_info_lists_everything(tmp_path, capsys):
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Relu", ["A"], ["B"], name="r"),
             helper.make_node("Mystery", ["B"], ["Y"], name="m", domain="com.acme")]
    model = make_model(nodes, [("A", f, [2])], [("Y", f, [2])], extra_opsets=[("com.acme", 2)],
                       initializers=[helper.make_tensor("unused", f, [4], [1, 2, 3, 4])])
    path = tmp_path / "info.onnx"
    path.write_bytes(model.SerializeToString())
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    for part in ("opsets: ai.onnx=17, com.acme=2", "A: float32[2]", "parameters: 4 in 1",
                 "Relu", "com.acme::Mystery (opset 2)"):
        assert part in out


def test_bad_model_file_prints_one_error_line(tmp_path, capsys):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\x08\x07garbage" * 3)
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err


def test_python_dash_m_entry_point(model_path):
    done = subprocess.run([sys.executable, "-m", "refmnn", "info", str(model_path)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "nodes: 2" in done.stdout


@pytest.mark.parametrize("command", ["info", "run"])
def test_a_reader_that_goes_away_ends_the_command_quietly(model_path, command):
    """``refmnn info m.onnx | head -1``: the pipe closes before refmnn writes; it stops with
    status 141 (as a tool ended by SIGPIPE) and no traceback, where it used to print a
    BrokenPipeError traceback."""
    process = subprocess.Popen([sys.executable, "-m", "refmnn", command, str(model_path)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # before the child has loaded the model and printed anything
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 141, stderr
    assert stderr == ""


def test_demo_names_a_zoo_model_with_an_unknown_exporter_or_a_missing_file(tmp_path, capsys):
    assert main(["demo", "bert6@tflite"]) == 2
    err = capsys.readouterr().err
    assert "unknown exporter 'tflite'" in err and "torchscript, dynamo" in err
    assert main(["demo", str(tmp_path / "nothing.onnx")]) == 2
    err = capsys.readouterr().err
    assert "neither a zoo model" in err and "NAME@EXPORTER" in err and "Traceback" not in err
