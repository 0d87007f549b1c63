"""A long-lived worker process: one engine at one thread count.

The parent (:class:`WorkerHandle`) starts ``python -m refmnn.benchmark.worker FD`` with
``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS`` (and friends) set to the
thread count, so every BLAS and OpenMP runtime sees it before numpy is imported. Requests come
on stdin, replies go to the pipe ``FD``; both are length-prefixed pickles. The worker's own
stdout/stderr (engine chatter such as MNN's banner) go to a log file, never into the protocol.

Requests and replies::

    ("load", engine, model_spec, threads, feeds, artifacts)
        -> ("ok", {"import_ms", "create_ms", "first_infer_ms", "outputs", "version"})
    ("time", n) -> ("ok", [ms, ...])   # n timed runs of the loaded feeds
    ("gemm", size, n) -> ("ok", [ms, ...])  # n timed float32 numpy GEMMs, size^3 (no engine)
    ("quit",)
    any failure -> ("error", "ExceptionType: message", traceback_text)

Timing is taken inside the worker, so the pipe and pickling never enter a measurement.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "BLIS_NUM_THREADS",
                    "NUMBA_NUM_THREADS", "POCL_MAX_PTHREAD_COUNT", "POCL_CPU_MAX_CU_NUM")
"""Environment variables set to the worker's thread count. PoCL has used two names for its
thread limit: the build that ``pyopencl[pocl]`` installs here reads ``POCL_MAX_PTHREAD_COUNT``
and ignores ``POCL_CPU_MAX_CU_NUM`` (measured: a ResNet-18 run used 1.9 cores with the latter
set to 1, 1.1 with the former), newer ones read ``POCL_CPU_MAX_CU_NUM``."""

_HEADER = struct.Struct("<Q")


class WorkerError(RuntimeError):
    """The worker reported an error, died, or did not answer in time."""


def _write(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes:
    chunks = []
    while size:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError("no answer in time")
        chunk = os.read(fd, min(size, 1 << 22))
        if not chunk:
            raise EOFError("pipe closed")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _read(fd: int, deadline: float | None = None) -> Any:
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    return pickle.loads(_read_exact(fd, size, deadline))


def thread_environment(threads: int, base: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default: os.environ) with every thread variable set to ``threads``."""
    env = dict(os.environ if base is None else base)
    for var in THREAD_VARIABLES:
        env[var] = str(threads)
    # the worker imports the same refmnn as the parent, installed or not
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


class WorkerHandle:
    """The parent's side of one worker process."""

    def __init__(self, engine: str, threads: int, log_path: Path) -> None:
        self.engine = engine
        self.threads = threads
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")  # noqa: SIM115 - lives as long as the worker
        read_fd, write_fd = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "refmnn.benchmark.worker", str(write_fd)],
                stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT,
                env=thread_environment(threads), pass_fds=(write_fd,), close_fds=True)
        finally:
            os.close(write_fd)
        self._fd = read_fd

    def request(self, message: tuple[Any, ...], timeout: float | None = None) -> Any:
        """Send one request and return the reply's payload; raise WorkerError on failure."""
        assert self.proc.stdin is not None
        try:
            data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
            self.proc.stdin.write(_HEADER.pack(len(data)) + data)
            self.proc.stdin.flush()
            deadline = None if timeout is None else time.monotonic() + timeout
            reply = _read(self._fd, deadline)
        except TimeoutError:
            self.kill()
            raise WorkerError(f"no answer within {timeout:.0f} s (worker killed)") from None
        except (EOFError, BrokenPipeError, OSError):
            code = self.proc.wait(timeout=10)
            raise WorkerError(f"worker died (exit code {code}); log tail: {self.log_tail()}"
                              ) from None
        if reply[0] == "ok":
            return reply[1]
        raise WorkerError(reply[1])

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                data = pickle.dumps(("quit",))
                self.proc.stdin.write(_HEADER.pack(len(data)) + data)
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        self._cleanup()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._cleanup()

    def _cleanup(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._log.close()


def _time_gemm(size: int, count: int) -> list[float]:
    """``count`` timed ``a @ b`` of seeded float32 ``size x size`` matrices (two untimed first):
    numpy's BLAS at the worker's thread count, the yardstick of :mod:`refmnn.benchmark.ceiling`."""
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((size, size), dtype=np.float32) for _ in range(2))
    out = np.empty((size, size), np.float32)
    times = []
    for i in range(count + 2):
        start = time.perf_counter()
        np.matmul(a, b, out=out)
        if i >= 2:
            times.append((time.perf_counter() - start) * 1e3)
    return times


def _serve(reply_fd: int) -> None:
    """The worker's loop: answer requests from stdin until ``quit`` or EOF."""
    from refmnn.benchmark import engines

    stdin = sys.stdin.buffer.fileno()
    run = None
    feeds = None
    while True:
        try:
            message = _read(stdin)
        except EOFError:
            return
        try:
            if message[0] == "quit":
                return
            if message[0] == "load":
                _, engine_name, model, threads, feeds, artifacts = message
                engine = engines.get(engine_name)
                t0 = time.perf_counter()
                engine.import_modules()
                t1 = time.perf_counter()
                run = engine.prepare(model, threads, artifacts)
                t2 = time.perf_counter()
                outputs = run(feeds)
                t3 = time.perf_counter()
                payload = {"import_ms": (t1 - t0) * 1e3, "create_ms": (t2 - t1) * 1e3,
                           "first_infer_ms": (t3 - t2) * 1e3, "outputs": outputs,
                           "version": engine.version()}
                _write(reply_fd, ("ok", payload))
            elif message[0] == "gemm":
                _, size, count = message
                _write(reply_fd, ("ok", _time_gemm(size, count)))
            elif message[0] == "time":
                _, count = message
                if run is None:
                    raise RuntimeError("'time' before a successful 'load'")
                times = []
                for _ in range(count):
                    start = time.perf_counter()
                    run(feeds)
                    times.append((time.perf_counter() - start) * 1e3)
                _write(reply_fd, ("ok", times))
            else:
                raise ValueError(f"unknown request {message[0]!r}")
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the parent
            text = str(exc).strip().splitlines()
            _write(reply_fd, ("error", f"{type(exc).__name__}: {' '.join(text)[:2000]}",
                              traceback.format_exc()))
            sys.stderr.write(traceback.format_exc())
            sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    _serve(int(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
