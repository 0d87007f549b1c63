"""OpRegistry: the table from (domain, op type, opset) to :class:`OpDef`.

A registry is an ordinary object (no global state). :func:`default_registry` builds one from the
built-in families; sessions take a registry argument so a user can add or override ops.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

from refmnn.errors import UnsupportedOpError
from refmnn.ops._schema import OpDef


def _norm(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


class OpRegistry:
    """Op definitions by (domain, name), each with its versions sorted by ``since``."""

    def __init__(self, defs: Iterable[OpDef] = ()) -> None:
        self._table: dict[tuple[str, str], list[OpDef]] = {}
        for opdef in defs:
            self.add(opdef)

    def add(self, opdef: OpDef, *, override: bool = False) -> None:
        """Add a definition; a duplicate (domain, name, since) is an error unless ``override``."""
        key = (_norm(opdef.domain), opdef.name)
        versions = self._table.setdefault(key, [])
        for index, existing in enumerate(versions):
            if existing.since == opdef.since:
                if not override:
                    raise ValueError(
                        f"duplicate definition of {opdef.name}-{opdef.since} in domain "
                        f"{key[0] or 'ai.onnx'!r}: {existing.reference.__module__}."
                        f"{existing.reference.__name__} and {opdef.reference.__module__}."
                        f"{opdef.reference.__name__}"
                    )
                versions[index] = opdef
                return
        sinces = [v.since for v in versions]
        versions.insert(bisect.bisect(sinces, opdef.since), opdef)

    def find(self, domain: str, name: str, opset: int) -> OpDef | None:
        """The definition with the largest ``since`` <= ``opset``, or None."""
        versions = self._table.get((_norm(domain), name), [])
        chosen = None
        for opdef in versions:
            if opdef.since <= opset:
                chosen = opdef
        return chosen

    def resolve(self, domain: str, name: str, opset: int) -> OpDef:
        """Like :meth:`find` but raises UnsupportedOpError naming the available versions."""
        found = self.find(domain, name, opset)
        if found is None:
            available = self.versions(domain, name)
            detail = f"available versions: {list(available)}" if available else ""
            raise UnsupportedOpError([(_norm(domain), name, opset)], detail)
        return found

    def versions(self, domain: str, name: str) -> tuple[int, ...]:
        """The ``since`` values defined for an op, ascending."""
        return tuple(v.since for v in self._table.get((_norm(domain), name), []))

    def __iter__(self) -> Iterator[OpDef]:
        for key in sorted(self._table):
            yield from self._table[key]

    def __contains__(self, key: tuple[str, str]) -> bool:
        return (_norm(key[0]), key[1]) in self._table

    def __len__(self) -> int:
        return len(self._table)
