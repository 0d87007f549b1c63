"""BackendRegistry: backends found through the ``refmnn.backends`` entry-point group.

The built-in backends are registered through the same group a vendor's separately installed
package uses (``[project.entry-points."refmnn.backends"]``), so there is one path for everyone.
Listing reads entry points without importing anything; :meth:`BackendRegistry.load` imports on
demand and validates the class (a :class:`Backend` subclass, ``name`` equal to the entry-point
name, a supported ``contract_version``, unique scheme names). A plugin that fails to import or
validate is reported with its distribution and error and does not affect the others.
"""

from __future__ import annotations

import importlib.metadata as md
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from refmnn.backends.base import CONTRACT_VERSION, Backend, BackendConfig, Probe
from refmnn.errors import BackendError, UsageError

GROUP = "refmnn.backends"


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """What ``refmnn backends`` prints for one entry point."""

    name: str
    value: str  # "package.module:Class"
    distribution: str
    version: str
    available: bool
    reason: str = ""
    cls: type[Backend] | None = None
    devices: tuple[str, ...] = ()


class BackendRegistry:
    """The backends visible in this environment (instance state only; no globals).

    Args:
        blocked: names to ignore, as if they were not installed.
        extra: backend classes to register directly (tests, notebooks), by their ``name``.
    """

    def __init__(self, blocked: Collection[str] = (), extra: Collection[type[Backend]] = ()) -> None:
        self.blocked = frozenset(blocked)
        self._extra = {cls.name: cls for cls in extra}
        self._cache: dict[str, BackendInfo] = {}

    def _entry_points(self) -> dict[str, list[md.EntryPoint]]:
        found: dict[str, list[md.EntryPoint]] = {}
        for ep in md.entry_points(group=GROUP):
            found.setdefault(ep.name, []).append(ep)
        return found

    def names(self) -> tuple[str, ...]:
        """Every backend name, without importing anything (blocked names excluded)."""
        names = set(self._entry_points()) | set(self._extra)
        return tuple(sorted(n for n in names if n not in self.blocked))

    def info(self, name: str) -> BackendInfo:
        """Load (once) and validate one backend; failures are captured, never raised."""
        if name in self._cache:
            return self._cache[name]
        result = self._load(name)
        self._cache[name] = result
        return result

    def __iter__(self) -> Iterator[BackendInfo]:
        for name in self.names():
            yield self.info(name)

    def _load(self, name: str) -> BackendInfo:
        if name in self._extra:
            cls = self._extra[name]
            return _checked(name, f"{cls.__module__}:{cls.__qualname__}", "(registered directly)", "", cls)
        eps = self._entry_points().get(name, [])
        if not eps:
            return BackendInfo(name, "", "", "", False, "no such backend is installed")
        dists = sorted({_dist_name(ep) for ep in eps})
        if len(dists) > 1:
            return BackendInfo(name, eps[0].value, ", ".join(dists), "", False,
                               f"declared by several distributions: {', '.join(dists)}")
        ep = eps[0]
        dist, version = _dist_name(ep), _dist_version(ep)
        try:
            cls = ep.load()
        except Exception as exc:  # a broken plugin must not break the others
            return BackendInfo(name, ep.value, dist, version, False,
                               f"import failed: {type(exc).__name__}: {exc}")
        return _checked(name, ep.value, dist, version, cls)

    def create(self, name: str, config: BackendConfig | None = None) -> Backend:
        """Instantiate an available backend; raises UsageError/BackendError saying why not."""
        if name in self.blocked:
            raise UsageError(f"backend {name!r} is blocked")
        info = self.info(name)
        if info.cls is None:
            known = ", ".join(self.names()) or "none"
            raise UsageError(f"backend {name!r} cannot be used: {info.reason} (installed: {known})")
        if not info.available:
            raise BackendError(f"backend {name!r} is not available here: {info.reason}")
        try:
            return info.cls(config or BackendConfig())
        except Exception as exc:
            raise BackendError(f"backend {name!r} ({info.distribution}) failed to start: "
                               f"{type(exc).__name__}: {exc}") from exc


def _dist_name(ep: md.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return dist.metadata["Name"] if dist is not None else "?"


def _dist_version(ep: md.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return dist.version if dist is not None else ""


def _checked(name: str, value: str, dist: str, version: str, cls: object) -> BackendInfo:
    """Validate a loaded object as a backend class and probe it."""
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        return BackendInfo(name, value, dist, version, False,
                           f"{value} is not a refmnn.backends.Backend subclass")
    if cls.name != name:
        return BackendInfo(name, value, dist, version, False,
                           f"class name attribute {cls.name!r} differs from the entry-point name")
    if cls.contract_version != CONTRACT_VERSION:
        return BackendInfo(name, value, dist, version, False,
                           f"contract version {cls.contract_version}, refmnn supports {CONTRACT_VERSION}")
    try:
        probe = cls.probe()
    except Exception as exc:  # probe must never raise; report it if it does
        probe = Probe(False, f"probe raised {type(exc).__name__}: {exc}")
    return BackendInfo(name, value, dist, version or probe.version, probe.available,
                       probe.reason, cls, tuple(probe.devices))
