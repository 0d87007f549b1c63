"""The main job the README's first command runs: convert a model, run it everywhere, compare.

A zoo model (built in code with seeded weights and exported with torch) or an ONNX file is
converted, run on the reference and on every other backend available, and compared with
onnxruntime when it is installed. Prints each output's summary and the agreement figures.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from refmnn.errors import UsageError


def rel_l2(got: np.ndarray, want: np.ndarray) -> float:
    """||got - want||_2 / ||want||_2 in float64 (0 when both are zero)."""
    got64 = np.asarray(got, dtype=np.float64)
    want64 = np.asarray(want, dtype=np.float64)
    denominator = float(np.linalg.norm(want64))
    numerator = float(np.linalg.norm(got64 - want64))
    if denominator == 0.0:
        return 0.0 if numerator == 0.0 else float("inf")
    return numerator / denominator


def _model_and_inputs(model: str, cache_dir: str | None, seed: int) -> tuple[Path, dict[str, Any]]:
    from refmnn import zoo

    try:
        parsed = zoo.parse(model)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if parsed is not None:
        name, exporter = parsed
        return (zoo.export_onnx(name, cache_dir=cache_dir, exporter=exporter),
                zoo.make_inputs(name, seed=seed))
    path = Path(model)
    if not path.exists():
        raise UsageError(f"{model!r} is neither a zoo model ({zoo.spec_help()}) nor a file")
    from refmnn.cli import random_feeds
    from refmnn.session import Session

    return path, random_feeds(Session(path).inputs, {}, seed)


def _onnxruntime(path: Path, feeds: dict[str, Any]) -> dict[str, np.ndarray] | str:
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime is not installed (pip install onnxruntime)"
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds), strict=True))


def available_backends() -> list[str]:
    """Names of the installed backends that can run on this machine, the reference first."""
    from refmnn.backends.registry import BackendRegistry

    names = [info.name for info in BackendRegistry() if info.available]
    return ["reference"] + [n for n in names if n != "reference"]


def run_demo(model: str, *, cache_dir: str | None = None, seed: int = 0) -> int:
    """Run ``model`` on every available backend and onnxruntime; print the comparison.

    Returns 0 when every backend agrees with the reference (relative L2 <= 1e-5) and with
    onnxruntime, 1 otherwise.
    """
    from refmnn.cli import summarize
    from refmnn.session import Session

    path, feeds = _model_and_inputs(model, cache_dir, seed)
    print(f"model {model}: {path}")
    results: dict[str, dict[str, Any]] = {}
    from refmnn.backends.registry import BackendRegistry

    for info in BackendRegistry():
        if not info.available:
            print(f"[{info.name}] not available here: {info.reason}")
    for backend in available_backends():
        start = time.perf_counter()
        session = Session(path, backends=(backend,))
        loaded = time.perf_counter()
        results[backend] = session.run(feeds)
        done = time.perf_counter()
        print(f"[{backend}] load {1e3 * (loaded - start):.0f} ms, first run {1e3 * (done - loaded):.0f} ms "
              "(planning, kernel preparation and compilation included)")
        for name, value in results[backend].items():
            print("  " + summarize(name, value))
    reference = results["reference"]
    ok = True
    peers: dict[str, dict[str, Any] | str] = {"onnxruntime": _onnxruntime(path, feeds)}
    for label, outputs in [*((b, r) for b, r in results.items() if b != "reference"), *peers.items()]:
        if isinstance(outputs, str):
            print(f"{label}: skipped ({outputs})")
            continue
        for name, want in reference.items():
            error = rel_l2(outputs[name], want)
            max_abs = float(np.max(np.abs(np.asarray(outputs[name], np.float64) - want))) if np.size(want) else 0.0
            verdict = "agree" if error <= 1e-5 else "DISAGREE"
            ok &= error <= 1e-5
            print(f"reference vs {label} on {name!r}: relative L2 {error:.2e}, max abs {max_abs:.2e} -> {verdict}")
    return 0 if ok else 1
