"""What the results were measured on: CPU, SIMD flags, cores, BLAS, engine versions.

Everything here is read without importing the engines (versions come from the installed
package metadata) and without threadpoolctl: the CPU from ``/proc/cpuinfo``, the BLAS from
``numpy.show_config(mode="dicts")``.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

SIMD_PREFIXES = ("sse", "ssse", "avx", "fma", "f16c", "amx", "asimd", "neon", "sve", "sme2",
                 "vnni", "bf16", "i8mm", "fp16", "dotprod")
"""CPU flags worth recording (x86 SSE/AVX/AMX families, Arm NEON/SVE)."""

SUMMARY_SIMD = frozenset({"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni",
                          "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
                          "asimd", "asimddp", "sve", "sve2", "sme"})
"""The flags the one-line summary shows (the records keep them all)."""

DISTRIBUTIONS = {
    "refmnn": "refmnn",
    "numpy": "numpy",
    "onnx": "onnx",
    "onnxruntime": "onnxruntime",
    "mnn": "MNN",
    "torch": "torch",
    "matplotlib": "matplotlib",
}
"""Key in the versions table -> installed distribution name."""


def _cpuinfo() -> dict[str, str]:
    """The first processor block of /proc/cpuinfo as a dict ({} where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    info: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if info:
                break
            continue
        key, _, value = line.partition(":")
        info.setdefault(key.strip(), value.strip())
    return info


def cpu_info() -> dict[str, Any]:
    """CPU model, SIMD flags, logical cores, cores this process may use, memory."""
    info = _cpuinfo()
    flags = (info.get("flags") or info.get("Features") or "").split()
    simd = sorted(f for f in flags if f.startswith(SIMD_PREFIXES) or f == "sme")
    model = info.get("model name") or info.get("Model name") or platform.processor() or "unknown"
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count() or 1
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 2**20, 1)
                break
    except OSError:
        pass
    return {
        "model": model,
        "arch": platform.machine(),
        "simd": simd,
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gib": mem_gib,
    }


def blas_info() -> dict[str, Any]:
    """The BLAS/LAPACK numpy was built against, from ``numpy.show_config(mode="dicts")``."""
    import numpy as np

    try:
        config = np.show_config(mode="dicts")
    except TypeError:  # numpy < 1.25 has no mode argument
        return {"name": "unknown (numpy < 1.25)"}
    deps = (config or {}).get("Build Dependencies", {})
    blas = deps.get("blas", {})
    simd = (config or {}).get("SIMD Extensions", {})
    from refmnn.backends.numba._blas import openblas  # ctypes only: imports no numba

    return {
        "name": blas.get("name", "unknown"),
        "version": blas.get("version"),
        "openblas_configuration": blas.get("openblas configuration"),
        # the kernels OpenBLAS picked for this CPU at run time (its DYNAMIC_ARCH core)
        "openblas_core": openblas().core or None,
        "lapack": deps.get("lapack", {}).get("name"),
        "numpy_simd_baseline": simd.get("baseline"),
        "numpy_simd_found": simd.get("found"),
    }


def versions() -> dict[str, str | None]:
    """Installed versions of refmnn, numpy and every engine (None: not installed)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for key, dist in DISTRIBUTIONS.items():
        try:
            found[key] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[key] = None
    if found["refmnn"] is None:  # running from a source tree that is not installed
        try:
            import refmnn

            found["refmnn"] = f"{refmnn.__version__} (source)"
        except ImportError:
            pass
    return found


def _git_commit() -> str | None:
    """The commit of the refmnn source tree, when it is a git checkout (read-only query)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def load_average() -> list[float] | None:
    """1/5/15-minute load average (drift on a shared machine shows here)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_info(threads: list[int] | None = None) -> dict[str, Any]:
    """Everything above in one JSON-able dict, plus host, OS and the thread counts used."""
    return {
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "cpu": cpu_info(),
        "blas": blas_info(),
        "versions": versions(),
        "refmnn_commit": _git_commit(),
        "threads": threads,
        "load_average_start": load_average(),
    }


def summary_line(info: dict[str, Any]) -> str:
    """One line for the terminal / Markdown header."""
    cpu = info["cpu"]
    simd = [f for f in cpu["simd"] if f in SUMMARY_SIMD]
    return (f"{cpu['model']} ({cpu['arch']}, {cpu['usable_cores']}/{cpu['logical_cores']} cores "
            f"usable, SIMD: {' '.join(simd) or 'none listed'}); BLAS: {info['blas'].get('name')}"
            f" {info['blas'].get('version') or ''}".rstrip()
            + (f" ({core} kernels)" if (core := info["blas"].get("openblas_core")) else ""))
