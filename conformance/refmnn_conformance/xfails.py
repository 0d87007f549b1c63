"""The expected-failure manifest: a TOML file of ``[[xfail]]`` entries, each with a reason.

::

    [[xfail]]
    case = "Softmax@13"          # a case id, or an op name (every case of the op)
    dtype = "float16"            # optional: every dtype when omitted
    sample = "zero_size_axis"    # optional: every sample when omitted
    reason = "the reference crashes on an empty softmax axis (refmnn issue 12)"

An entry becomes an ``xfail`` mark on every test it matches. For built-in backends (those
shipped in the refmnn distribution) and with ``--strict-xfails`` the mark is strict: an expected
failure that starts passing fails the run until its entry is removed.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

KEYS = {"case", "dtype", "sample", "source", "reason", "flaky", "check"}


class ManifestError(ValueError):
    """The manifest is malformed (unknown key, missing case or reason)."""


@dataclass(frozen=True, slots=True)
class Xfail:
    case: str
    reason: str
    dtype: str = ""
    sample: str = ""
    source: str = ""
    check: str = ""  # limit the entry to one kind of check (e.g. "value"), default all
    flaky: bool = False  # the case passes on some runs: never strict (the reason must say why)

    def matches(self, case_id: str, op: str, dtype: str, sample: str, source: str,
                check: str = "") -> bool:
        if self.check and self.check != check:
            return False
        if self.case not in (case_id, op, case_id.split(".")[0]):
            return False
        if self.dtype and self.dtype != dtype:
            return False
        if self.sample and self.sample != sample:
            return False
        return not self.source or self.source == source

    def describe(self) -> str:
        parts = [f"case={self.case!r}"]
        parts += [f"{k}={getattr(self, k)!r}" for k in ("dtype", "sample", "source", "check")
                  if getattr(self, k)]
        return ", ".join(parts)


def load(path: str | Path) -> tuple[Xfail, ...]:
    """Read and validate a manifest; raises ManifestError naming the bad entry."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read the xfail manifest: {exc}") from exc
    unknown_top = sorted(set(data) - {"xfail"})
    if unknown_top:
        raise ManifestError(f"{path}: unknown table(s) {unknown_top}; only [[xfail]] entries are allowed")
    entries = []
    for number, entry in enumerate(data.get("xfail", []), start=1):
        unknown = sorted(set(entry) - KEYS)
        if unknown:
            raise ManifestError(f"{path}: xfail entry #{number} has unknown key(s) {unknown}")
        if not str(entry.get("case", "")).strip():
            raise ManifestError(f"{path}: xfail entry #{number} has no case")
        if not str(entry.get("reason", "")).strip():
            raise ManifestError(f"{path}: xfail entry #{number} ({entry.get('case')!r}) has no "
                                "reason; every expected failure needs a written reason")
        fields = {k: (bool(v) if k == "flaky" else str(v)) for k, v in entry.items()}
        entries.append(Xfail(**fields))
    return tuple(entries)
