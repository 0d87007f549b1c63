"""Smoke tests of the benchmark harness (refmnn.benchmark). Timings are never asserted."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from refmnn.benchmark import cli, engines, placement, report
from refmnn.benchmark.models import onnx_flops
from refmnn.benchmark.runner import _spread, compare


def _tiny_model(path: Path) -> Path:
    """y = Relu(x + b), x: (1, 8, 16, 16): ops every refmnn build has."""
    bias = numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((1, 8, 1, 1)).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])],
        [bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_cli_smoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("matplotlib")
    model = _tiny_model(tmp_path / "tiny.onnx")
    out = tmp_path / "out"
    real_installed = engines._installed
    # pretend MNN is missing: it must be reported, not dropped
    monkeypatch.setattr(engines, "_installed", lambda m: m != "MNN" and real_installed(m))
    code = cli.main([str(model), "--repeat", "2", "--warmup", "1", "--threads", "1",
                     "--processes", "2",
                     "--peers", "onnxruntime,mnn", "--out", str(out), "--no-progress",
                     "--cache-dir", str(tmp_path / "cache")])
    assert code == 0
    for name in ("results.jsonl", "results.md", "machine.json", "latency_vs_onnxruntime.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["engine"], r["threads"]) for r in records] == [
        ("refmnn-reference", 1), ("onnxruntime", 1), ("mnn", 1)]
    for r in records:
        assert set(report.RECORD_FIELDS) <= set(r), r.keys()
    by_engine = {r["engine"]: r for r in records}
    assert by_engine["mnn"]["status"] == "not-installed"
    for name in ("refmnn-reference", "onnxruntime"):
        r = by_engine[name]
        assert r["status"] == "ok", r["error"]
        assert r["repeat"] == 2 and len(r["times_ms"]) == 2
        # two worker processes, one timed run each (a block per worker)
        assert r["processes"] == 2
        assert sorted(r["process_medians_ms"]) == pytest.approx(sorted(r["times_ms"]), abs=1e-4)
        assert r["min_ms"] <= r["median_ms"] <= r["max_ms"]
        assert r["accuracy"]["baseline"] == "refmnn-reference"
        assert r["accuracy"]["rel_l2"] <= 1e-6
        assert r["ratio_to_onnxruntime"] is not None
    assert by_engine["onnxruntime"]["ratio_to_onnxruntime"] == 1.0
    markdown = (out / "results.md").read_text()
    assert "| tiny | onnxruntime | 1 |" in markdown and "not-installed" in markdown
    assert "Medians of each worker process" in markdown
    assert sorted(p.name for p in (out / "logs").glob("tiny-onnxruntime-t1*.log")) == [
        "tiny-onnxruntime-t1-p1.log", "tiny-onnxruntime-t1.log"]
    machine = json.loads((out / "machine.json").read_text())
    assert machine["threads"] == [1] and machine["versions"]["numpy"]
    # numpy's GEMM ceiling, timed before and after the models in this same run
    gemm = machine["gemm_ceiling"]
    assert gemm["before"]["1"]["gflops"] > 0 and gemm["after"]["1"]["gflops"] > 0
    top = max(gemm["before"]["1"]["gflops"], gemm["after"]["1"]["gflops"])
    for r in records[:2]:
        assert r["gemm_ceiling_gflops"] == top
        assert r["fraction_of_gemm_ceiling"] is None  # the tiny model has no counted FLOPs
    assert "numpy float32 GEMM 1024^3" in markdown and "% GEMM" in markdown
    # the core probe: one round trip per timed run (its block's), grouped in the report
    probe = machine["core_probe"]
    assert "## Core placement" in markdown
    if placement.unavailable():
        assert probe == {"unavailable": placement.unavailable()}
        return
    assert len(probe["cpus"]) == 2 and probe["near_runs"] + probe["split_runs"] == 4
    assert 0 < probe["fastest_ns"] <= probe["slowest_ns"]
    for r in records[:2]:
        assert len(r["core_round_trips_ns"]) == len(r["times_ms"]) == 2
        assert all(rt > 0 for rt in r["core_round_trips_ns"])
        assert sum(side["runs"] for side in r["placement"].values()) == 2


def test_gemm_fraction_uses_the_better_sample_per_thread_count() -> None:
    samples = [{"1": {"gflops": 80.0}, "2": {"gflops": None, "error": "died"}},
               {"1": {"gflops": 100.0}, "2": {"gflops": 150.0}}]
    records = [{"threads": 1, "gflops_per_s": 50.0}, {"threads": 2, "gflops_per_s": 75.0},
               {"threads": 2, "gflops_per_s": None}, {"threads": 4, "gflops_per_s": 10.0}]
    report.add_gemm_fractions(records, samples)
    assert [r["gemm_ceiling_gflops"] for r in records] == [100.0, 150.0, 150.0, None]
    assert [r["fraction_of_gemm_ceiling"] for r in records] == [0.5, 0.5, None, None]


def test_placement_groups_each_run_by_its_block_s_probe() -> None:
    # the fastest probe is 100 ns, so the line is at SPLIT_FACTOR * 100 ns
    line = placement.SPLIT_FACTOR * 100
    records = [
        {"times_ms": [10.0, 11.0, 20.0, 21.0, 22.0], "model": "m", "engine": "a", "threads": 2,
         "median_ms": 20.0, "core_round_trips_ns": [100.0, line, line + 1, 400.0, 400.0]},
        {"times_ms": [5.0, 6.0], "model": "m", "engine": "b", "threads": 2, "median_ms": 5.5,
         "core_round_trips_ns": [120.0, None]},  # a failed probe: the run is in neither group
    ]
    summary = report.add_placement(records)
    assert summary == {"fastest_ns": 100.0, "slowest_ns": 400.0, "threshold_ns": line,
                       "near_runs": 3, "split_runs": 3}
    assert records[0]["placement"] == {"near": {"median_ms": 10.5, "runs": 2},
                                       "split": {"median_ms": 21.0, "runs": 3}}
    assert records[1]["placement"] == {"near": {"median_ms": 5.0, "runs": 1},
                                       "split": {"median_ms": None, "runs": 0}}
    lines = report.placement_lines(records, summary)
    assert "| m | a | 2 | 20.00 | 10.50 (2) | 21.00 (3) |" in lines
    assert "| m | b | 2 | 5.50 | 5.00 (1) | - (0) |" in lines
    assert "3 runs split, 3 near." in lines[2]
    failed = report.placement_lines(records, {**summary, "error": "TimeoutError: no answer"})
    assert "failed part-way (TimeoutError: no answer)" in failed[2]
    # one placement throughout: not called near, since the line is relative to the fastest
    steady = [{"times_ms": [1.0, 2.0], "core_round_trips_ns": [340.0, 350.0]}]
    summary = report.add_placement(steady)
    assert summary is not None and summary["split_runs"] == 0
    (text,) = report.placement_lines(steady, summary)[2:3]
    assert "all 2 runs in one placement" in text and "near." not in text
    # nothing probed: no groups, and the report says why
    bare = [{"times_ms": [1.0], "core_round_trips_ns": [None]}]
    assert report.add_placement(bare) is None
    assert report.placement_lines(bare, {"unavailable": "fewer than two usable CPUs"}) == [
        "## Core placement", "", "Not probed: fewer than two usable CPUs.", ""]


def test_core_probe_times_round_trips_and_fails_cleanly() -> None:
    reason = placement.unavailable()
    if reason:
        pytest.skip(f"no core probe here: {reason}")
    with placement.CoreProbe.start() as probe:
        assert probe.cpus[0] != probe.cpus[1]
        assert set(probe.cpus) <= os.sched_getaffinity(0)
        trips = [probe.measure() for _ in range(3)]
        # a cache line between two cores and a Python loop: ~200 ns here; under a parallel
        # test run a helper may wait for its CPU, hence the loose upper bound
        assert all(trip is not None and 10 < trip < 1e7 for trip in trips), trips
        helpers = list(probe._helpers)
    assert not any(h.is_alive() for h in helpers) and probe.measure() is None
    # Ctrl-C is the parent's to handle; a parent that is gone (its pipes closed) ends them
    with placement.CoreProbe.start() as probe:
        assert probe.measure() is not None
        for helper in probe._helpers:
            os.kill(helper.pid, signal.SIGINT)
        assert probe.measure() is not None
        for conn in probe._conns:
            conn.close()
        for helper in probe._helpers:
            helper.join(timeout=10)
            assert helper.exitcode == 0
        probe._conns = []
    # a helper that dies: the next probe reports it, within the timeout, and closes
    with placement.CoreProbe.start() as probe:
        assert probe.measure() is not None
        probe._helpers[1].kill()
        probe._helpers[1].join()
        assert probe.measure() is None
        assert probe.error and not probe._helpers


def test_compare_and_spread() -> None:
    ref = [np.ones((2, 3), np.float32)]
    assert compare([np.ones((2, 3), np.float32)], ref) == {"rel_l2": 0.0, "max_abs": 0.0}
    off = compare([np.full((2, 3), 1.5, np.float32)], ref)
    assert off["rel_l2"] == pytest.approx(0.5) and off["max_abs"] == pytest.approx(0.5)
    assert compare([], ref)["rel_l2"] is None
    assert _spread(3, 3) == [0, 1, 2]
    spread = _spread(4, 20)
    assert len(set(spread)) == 4 and spread[0] == 0 and max(spread) < 20


def test_onnx_flops_counts_matmul_and_conv() -> None:
    w = numpy_helper.from_array(np.zeros((4, 3, 3, 3), np.float32), "w")
    m = numpy_helper.from_array(np.zeros((4 * 6 * 6, 5), np.float32), "m")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]),
         helper.make_node("Reshape", ["c", "shape"], ["r"]),
         helper.make_node("MatMul", ["r", "m"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w, m, numpy_helper.from_array(np.array([1, -1], np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    conv_macs = 4 * 6 * 6 * 3 * 3 * 3
    matmul_macs = 5 * 144
    assert onnx_flops(model) == 2 * (conv_macs + matmul_macs)


def test_worker_thread_environment_limits_every_runtime_incl_pocl():
    """Each runtime reads its own variable; PoCL's pthread driver here reads
    POCL_MAX_PTHREAD_COUNT (POCL_CPU_MAX_CU_NUM alone left an opencl "1 thread" run on 2 cores)."""
    from refmnn.benchmark.worker import thread_environment

    env = thread_environment(1, {"PATH": "/bin"})
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
                "POCL_MAX_PTHREAD_COUNT", "POCL_CPU_MAX_CU_NUM"):
        assert env[var] == "1", var
    assert env["PATH"] == "/bin"


def test_torch_cuda_peer_is_known_but_only_run_when_asked(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch-cuda`` is accepted by --peers (not among the defaults) and is reported, not
    dropped, where there is no GPU; a file model is not applicable to it (no nn.Module)."""
    assert "torch-cuda" not in engines.PEERS and "torch-cuda" in engines.OPTIONAL_PEERS
    peer = engines.get("torch-cuda")
    assert peer.name == "torch-cuda"
    spec = engines.ModelSpec("tiny", "tiny.onnx", zoo=False, inputs=(), outputs=())
    monkeypatch.setattr(engines, "_installed", lambda m: True)
    assert peer.unavailable(spec)[0] == "not-applicable"
    zoo_spec = engines.ModelSpec("resnet18", "r.onnx", zoo=True, inputs=(), outputs=())
    monkeypatch.setattr(engines.Path, "glob", lambda self, pattern: iter(()))
    assert peer.unavailable(zoo_spec) == ("not-applicable",
                                          "no NVIDIA GPU device (/dev/nvidia*) on this machine")
    monkeypatch.setattr(engines.Path, "glob", lambda self, pattern: iter([self / "nvidia0"]))
    assert peer.unavailable(zoo_spec) is None
    code = cli.main([str(_tiny_model(tmp_path / "tiny.onnx")), "--peers", "torch-cuda,gpu-x",
                     "--out", str(tmp_path / "out"), "--no-progress"])
    assert code == 2  # an unknown peer is refused before anything runs


def test_zoo_models_by_exporter(monkeypatch: pytest.MonkeyPatch) -> None:
    """``NAME@EXPORTER`` and ``zoo@EXPORTER`` name a zoo model as another of torch's exporters
    writes it; the default exporter keeps the bare name, duplicates are dropped."""
    from refmnn import zoo
    from refmnn.benchmark import models

    made = []

    def fake_spec(name, exporter, label, cache_dir):  # no export: only the resolution
        made.append((name, exporter))
        return engines.ModelSpec(name=label, path=f"/x/{label}.onnx", zoo=True,
                                 inputs=zoo.get(name).inputs, outputs=("output",))

    monkeypatch.setattr(models, "_zoo_spec", fake_spec)
    specs = models.resolve(["bert6@dynamo", "bert6", "bert6@torchscript", "bert6@dynamo"])
    assert [s.name for s in specs] == ["bert6@dynamo", "bert6"]
    assert made == [("bert6", "dynamo"), ("bert6", "torchscript")]
    assert specs[0].zoo_name == "bert6"
    np.testing.assert_array_equal(models.make_feeds(specs[0])["input_ids"],
                                  zoo.make_inputs("bert6")["input_ids"])
    assert [s.name for s in models.resolve(["zoo@dynamo"])] == [f"{n}@dynamo" for n in zoo.names()]
    with pytest.raises(ValueError, match=r"unknown exporter 'tflite'"):
        models.resolve(["bert6@tflite"])
    with pytest.raises(ValueError, match="neither a zoo model"):
        models.resolve(["nothing@dynamo"])
