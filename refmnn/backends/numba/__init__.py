"""The Numba CPU backend (entry point ``numba``); importing this package does not import Numba."""

from refmnn.backends.numba.backend import NumbaBackend

__all__ = ["NumbaBackend"]
