"""The backend contract; the only module vendors need to import.

See :mod:`refmnn.backends.base` for the contract and ``docs/backends.md`` for a guide with a
minimal example backend.
"""

from refmnn.backends.base import (
    CONTRACT_VERSION,
    Backend,
    BackendConfig,
    Buffer,
    Kernel,
    KernelDef,
    NodeSpec,
    Probe,
    Scheme,
    Storage,
    always,
)
from refmnn.backends.registry import BackendInfo, BackendRegistry

__all__ = [
    "CONTRACT_VERSION",
    "Backend",
    "BackendConfig",
    "BackendInfo",
    "BackendRegistry",
    "Buffer",
    "Kernel",
    "KernelDef",
    "NodeSpec",
    "Probe",
    "Scheme",
    "Storage",
    "always",
]
