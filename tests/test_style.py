"""Style rules checked mechanically: module size and the shape of the op family modules.

Modules stay small (soft limit 400 lines, hard limit 800); every op family module under
refmnn/ops/ ends with an ``OPS`` tuple whose op definitions :data:`refmnn.ops.BUILTIN_OPS`
registers.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from refmnn.ops import BUILTIN_OPS, FAMILIES
from refmnn.ops._schema import OpDef

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 800
CHECKED_TREES = ("refmnn", "conformance")
NOT_OP_MODULES = {"registry"}  # refmnn/ops/ modules that hold machinery, not op definitions


def _python_files() -> list[Path]:
    files: list[Path] = []
    for tree in CHECKED_TREES:
        files += sorted(p for p in (ROOT / tree).rglob("*.py") if "__pycache__" not in p.parts)
    return files


def _op_module_names() -> list[str]:
    return sorted(p.stem for p in (ROOT / "refmnn" / "ops").glob("*.py")
                  if not p.stem.startswith("_") and p.stem not in NOT_OP_MODULES)


def _line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8", errors="replace").splitlines())


def test_modules_have_at_most_800_lines() -> None:
    files = _python_files()
    assert files, f"no Python files found under {CHECKED_TREES} of {ROOT}"
    offenders = [(_line_count(p), p.relative_to(ROOT).as_posix()) for p in files]
    offenders = sorted((count, name) for count, name in offenders if count > MAX_LINES)
    report = "\n".join(f"  {name}: {count} lines" for count, name in offenders)
    if offenders:
        print(f"modules over {MAX_LINES} lines:\n{report}")
    assert not offenders, f"split these modules (at most {MAX_LINES} lines each):\n{report}"


@pytest.mark.parametrize("name", _op_module_names())
def test_op_module_defines_registered_ops_tuple(name: str) -> None:
    module = importlib.import_module(f"refmnn.ops.{name}")
    ops = getattr(module, "OPS", None)
    assert isinstance(ops, tuple), f"refmnn/ops/{name}.py must end with an OPS = (...) tuple"
    not_opdefs = [repr(o) for o in ops if not isinstance(o, OpDef)]
    assert not not_opdefs, f"refmnn.ops.{name}.OPS holds non-OpDef members: {not_opdefs}"
    registered = {id(opdef) for opdef in BUILTIN_OPS}
    missing = [f"{o.name}-{o.since}" for o in ops if id(o) not in registered]
    assert not missing, (f"refmnn.ops.{name}.OPS members missing from BUILTIN_OPS (add the module "
                         f"to FAMILIES in refmnn/ops/__init__.py): {missing}")


def test_every_builtin_op_is_listed_once() -> None:
    families = [family.__name__.rsplit(".", 1)[-1] for family in FAMILIES]
    assert len(set(families)) == len(families), f"a family is listed twice: {families}"
    seen: dict[int, int] = {}
    for opdef in BUILTIN_OPS:
        seen[id(opdef)] = seen.get(id(opdef), 0) + 1
    twice = [f"{o.name}-{o.since}" for o in BUILTIN_OPS if seen[id(o)] > 1]
    assert not twice, f"op definitions listed more than once: {sorted(set(twice))}"
