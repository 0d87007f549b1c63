"""The OpenCL backend (entry point ``opencl``); importing this package does not import pyopencl."""

from refmnn.backends.opencl.backend import OpenCLBackend

__all__ = ["OpenCLBackend"]
