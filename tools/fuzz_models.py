"""Mutate the official ONNX node cases and check that refmnn fails cleanly (or agrees).

    .venv/bin/python tools/fuzz_models.py                      # every case, 3 mutations each
    .venv/bin/python tools/fuzz_models.py --stop 300 --seeds 1 --diff
    .venv/bin/python tools/fuzz_models.py --bytes              # corrupt the serialized bytes
    .venv/bin/python tools/fuzz_models.py --backend numba      # and check a backend against it
    .venv/bin/python tools/fuzz_models.py --opsets --diff --peer onnxruntime  # other opsets

Each of the installed onnx package's node cases (a one-node model with its inputs; the
expanded ones and control flow have more, subgraphs included) is copied and mutated by a
seeded random edit, sometimes two: an attribute set to an odd value (negative,
zero, huge, NaN, another mode string), an attribute or input dropped or added, the op type
swapped, the opset changed, a declared input dim or dtype changed, an initializer's dims
changed, an output renamed or two inputs swapped. With ``--bytes`` the serialized model is
truncated or has one to four bytes overwritten instead; with ``--values`` the model is kept
and the first input, when it is a float tensor, is redrawn from NaN, infinities, signed zeros,
subnormals and a few ordinary values (most useful with ``--backend``; ``--all-inputs`` redraws
every float input: weights, scales, biases too); with ``--opsets`` the model and inputs are
kept and the default-domain opset is set to each other version (7 and up) where one of its
ops has another definition and the model still passes onnx's checker (best with ``--diff``:
each version's semantics against a peer's; with ``--values`` too, on special values). The
mutated model is then loaded and run on the reference with the case's inputs (redrawn ones
with ``--values``).
The outcome of each is one of:

* ``ok``: it ran (with ``--diff``, and onnx.reference also ran it, the outputs agree);
* ``refused``: a :class:`refmnn.RefmnnError` (the contract for bad input);
* ``BUG``: any other exception -- refmnn let bad input through to a raw NumPy or Python
  error (the tool prints the exception and the innermost frames);
* ``HANG``: no answer within ``--timeout`` seconds;
* ``DIFF`` (``--diff`` only): refmnn and onnx.reference (or ``--peer onnxruntime``) both ran
  and disagree beyond rtol 1e-3, atol 1e-4. Neither is always right, so a DIFF is a lead to
  read, not a verdict (tests/test_reference_oracles.py holds the ones read);
* ``BACKEND-DIFF`` / ``BACKEND-REFUSED`` (``--backend NAME``): the reference ran, and the same
  model placed on that backend (falling back to the reference where it has no kernel) gave
  different outputs (same tolerance), or raised a RefmnnError. The reference is the spec, so
  both are the backend's to fix (or to decline in its ``applies``).

The process caps its address space (``--memory-limit``, GiB) so that a mutation asking for an
absurd tensor fails fast instead of swapping. One JSON line per mutation goes to ``--out``
(default: stdout) and a summary with every finding goes to stderr; the exit status is 1 when
there was any finding other than a DIFF. The same seed gives the same mutations, so a finding is
reproduced with ``--start I --stop I+1 --first-seed S --seeds 1``.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import signal
import sys
import traceback
import warnings
from collections import Counter
from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto

from peers import PEERS, run_peer  # tools/, this script's folder

INTS = (-(2**31), -100, -5, -2, -1, 0, 1, 2, 3, 5, 7, 64, 2**31 - 1, 2**40)
FLOATS = (float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 1e30, -1e-30, 2.5)
STRINGS = (b"", b"bogus", b"NOTSET", b"SAME_UPPER", b"VALID", b"constant", b"reflect",
           b"linear", b"cubic", b"nearest", b"half_pixel", b"CRD", b"DCR", b"tanh", b"none")
OPS = ("Add", "Conv", "MatMul", "Reshape", "Gather", "Slice", "Pad", "Resize", "Concat",
       "Split", "Transpose", "ReduceSum", "Softmax", "Cast", "Expand", "Tile", "TopK", "Where",
       "Loop", "If", "Scan", "Einsum", "NonZero", "Unique", "ConstantOfShape", "Range",
       "CumSum", "MaxPool", "AveragePool", "BatchNormalization", "LSTM", "GRU", "RNN",
       "Squeeze")
OPSETS = (1, 5, 6, 7, 9, 11, 13, 17, 20, 23, 25, 30)


def _mutate_attribute(attr: AttributeProto, rng: random.Random) -> None:
    """Give ``attr`` an odd value of its own kind (or drop an entry of a list)."""
    if attr.type == AttributeProto.INT:
        attr.i = rng.choice(INTS)
    elif attr.type == AttributeProto.INTS:
        if attr.ints and rng.random() < 0.6:
            attr.ints[rng.randrange(len(attr.ints))] = rng.choice(INTS)
        elif attr.ints and rng.random() < 0.5:
            del attr.ints[-1]
        else:
            attr.ints.append(rng.choice(INTS))
    elif attr.type == AttributeProto.FLOAT:
        attr.f = rng.choice(FLOATS)
    elif attr.type == AttributeProto.FLOATS and attr.floats:
        attr.floats[rng.randrange(len(attr.floats))] = rng.choice(FLOATS)
    elif attr.type == AttributeProto.STRING:
        attr.s = rng.choice(STRINGS)
    elif attr.type == AttributeProto.TENSOR and attr.t.dims:
        attr.t.dims[rng.randrange(len(attr.t.dims))] = rng.choice((0, 1, 2, 3, 7))


def _nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The graph's nodes and those of every subgraph (If branches, Loop and Scan bodies)."""
    found = []
    for node in graph.node:
        found.append(node)
        for attr in node.attribute:
            for sub in ([attr.g] if attr.type == AttributeProto.GRAPH else list(attr.graphs)):
                found.extend(_nodes(sub))
    return found


def mutate(model: onnx.ModelProto, rng: random.Random) -> str:
    """Apply one random edit to ``model`` in place; returns what it did."""
    graph = model.graph
    nodes = _nodes(graph)
    node = rng.choice(nodes) if nodes else None
    kind = rng.randrange(12)
    if kind <= 4 and node is not None and node.attribute:
        attr = rng.choice(list(node.attribute))
        if kind == 4 or attr.type not in (AttributeProto.INT, AttributeProto.INTS,
                                          AttributeProto.FLOAT, AttributeProto.FLOATS,
                                          AttributeProto.STRING, AttributeProto.TENSOR):
            node.attribute.remove(attr)
            return f"drop attribute {node.op_type}.{attr.name}"
        _mutate_attribute(attr, rng)
        return f"attribute {node.op_type}.{attr.name}"
    if kind == 5 and node is not None:
        if node.input and rng.random() < 0.5:
            del node.input[-1]
            return f"drop last input of {node.op_type}"
        node.input.append(rng.choice(("", node.input[0] if node.input else "", "nonexistent")))
        return f"add an input to {node.op_type}"
    if kind == 6 and node is not None:
        old, node.op_type = node.op_type, rng.choice(OPS)
        return f"op {old} -> {node.op_type}"
    if kind == 7 and model.opset_import:
        opset = rng.choice(list(model.opset_import))
        opset.version = rng.choice(OPSETS)
        return f"opset {opset.domain or 'ai.onnx'} {opset.version}"
    if kind == 8 and graph.input:
        value = rng.choice(list(graph.input))
        dims = value.type.tensor_type.shape.dim
        if not dims:
            value.type.tensor_type.elem_type = rng.choice((1, 2, 6, 7, 9, 10, 11, 16))
            return f"dtype of input {value.name}"
        dim = dims[rng.randrange(len(dims))]
        if rng.random() < 0.5:
            dim.dim_value = rng.choice((0, 1, 2, 5, 1000))
        else:
            dim.dim_param = "N"
        return f"a dim of input {value.name}"
    if kind == 9 and graph.initializer:
        tensor = rng.choice(list(graph.initializer))
        if tensor.dims:
            tensor.dims[rng.randrange(len(tensor.dims))] += rng.choice((-1, 1, 5))
        return f"dims of initializer {tensor.name}"
    if kind == 10 and node is not None and node.output:
        node.output[0] = rng.choice(("", "renamed", node.input[0] if node.input else "z"))
        return f"first output of {node.op_type}"
    if node is not None and len(node.input) >= 2:
        i, j = rng.sample(range(len(node.input)), 2)
        node.input[i], node.input[j] = node.input[j], node.input[i]
        return f"swap inputs {i} and {j} of {node.op_type}"
    return "none"


def mutated(case: Any, index: int, seed: int) -> tuple[onnx.ModelProto, str]:
    """Case ``index``'s model after the edits of ``seed`` (one, half the time two)."""
    rng = random.Random(index * 1000 + seed)
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    what = mutate(model, rng)
    if rng.random() < 0.5:
        what += "; " + mutate(model, rng)
    return model, what


def corrupted(case: Any, index: int, seed: int) -> tuple[bytes, str]:
    """Case ``index``'s serialized model, truncated or with a few bytes overwritten."""
    rng = random.Random(index * 1000 + seed)
    data = bytearray(case.model.SerializeToString())
    if rng.random() < 1 / 3:
        cut = rng.randrange(len(data))
        return bytes(data[:cut]), f"truncated to {cut} of {len(data)} bytes"
    where = [rng.randrange(len(data)) for _ in range(rng.randint(1, 4))]
    for position in where:
        data[position] = rng.randrange(256)
    return bytes(data), f"bytes {where} overwritten"


SPECIALS = (np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-40, -1e-40, 1.0, -1.0, 0.5)
"""No near-overflow values: where a finite sum overflows depends on the order and precision of
accumulation, which the spec leaves open; NaN and infinities propagate the same in any order."""


def other_opsets(case: Any) -> list[tuple[onnx.ModelProto, str]]:
    """The case's model re-declared at each other default-domain opset (7 up to the newest the
    onnx package knows) where one of its ops has another definition than at the case's own,
    and where the model still passes onnx's checker with strict shape inference there (its
    attributes and inputs are those of that version)."""
    domain = next((o for o in case.model.opset_import if o.domain in ("", "ai.onnx")), None)
    if domain is None:
        return []
    newest = onnx.defs.onnx_opset_version()
    versions = set()
    for node in _nodes(case.model.graph):
        if node.domain not in ("", "ai.onnx"):
            continue
        own = _since(node.op_type, domain.version)
        for version in range(7, newest + 1):
            since = _since(node.op_type, version)
            if since is not None and since != own:
                versions.add(max(since, 7))
    result = []
    for version in sorted(versions - {domain.version}):
        model = onnx.ModelProto()
        model.CopyFrom(case.model)
        next(o for o in model.opset_import if o.domain in ("", "ai.onnx")).version = version
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception:
            continue
        result.append((model, f"opset {version}"))
    return result


def _since(op_type: str, opset: int) -> int | None:
    """The version of the definition of ``op_type`` in effect at ``opset`` (None: none)."""
    try:
        return onnx.defs.get_schema(op_type, opset, "").since_version
    except onnx.defs.SchemaError:
        return None


def extreme_feeds(case: Any, index: int, seed: int, every: bool = False
                  ) -> tuple[dict[str, Any], str]:
    """The case's inputs with the first one's entries, when it is a float tensor (the data: X,
    A, input...), redrawn from :data:`SPECIALS` (NaN, infinities, signed zeros, subnormals, a
    few ordinary values); with ``every``, each float input's (weights, scales and the rest
    too; by default they keep the case's values, as in a model whose weights are finite)."""
    rng = np.random.default_rng(index * 1000 + seed)
    feeds = feeds_of(case)
    redrawn = []
    for name, value in list(feeds.items())[:None if every else 1]:
        if isinstance(value, np.ndarray | np.generic) and value.dtype.kind == "f" and value.size:
            feeds[name] = rng.choice(np.array(SPECIALS), size=np.shape(value)).astype(value.dtype)
            redrawn.append(repr(name))
    return feeds, f"special float values in {', '.join(redrawn) or 'no input'}"


def feeds_of(case: Any) -> dict[str, np.ndarray]:
    """The case's first set of inputs, by the original model's input names (a TensorProto,
    as the float8/int4 cases give, as its array)."""
    initialized = {t.name for t in case.model.graph.initializer}
    names = [v.name for v in case.model.graph.input if v.name not in initialized]
    values = [onnx.numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v
              for v in case.data_sets[0][0]]
    return dict(zip(names, values, strict=False))


def compare(model: onnx.ModelProto, feeds: dict[str, np.ndarray], got: dict[str, Any],
            peer: str = "onnx.reference") -> str | None:
    """How refmnn's outputs differ from the peer's, onnx.reference's or onnxruntime's (None:
    they agree, or the peer failed)."""
    try:
        want = run_peer(model, feeds, peer)
    except Exception:
        return None
    return differences(got, dict(zip((o.name for o in model.graph.output), want, strict=False)),
                       peer)


def differences(got: dict[str, Any], want: dict[str, Any], other: str) -> str | None:
    """The first output where ``got`` and ``want`` differ beyond rtol 1e-3, atol 1e-4 (NaN
    equal to NaN; integers and booleans exactly), described; None when they agree."""
    for name, expected in want.items():
        actual = got.get(name)
        if actual is None or expected is None or isinstance(expected, list):
            continue
        a, e = np.asarray(actual), np.asarray(expected)
        if a.shape != e.shape:
            return f"{name}: shape {a.shape}, {other} {e.shape}"
        if a.dtype.kind in "fc" and e.dtype.kind in "fc":
            bad = ~np.isclose(a.astype(np.complex128), e.astype(np.complex128), rtol=1e-3,
                              atol=1e-4, equal_nan=True)
        elif a.dtype.kind in "biuf" and e.dtype.kind in "biuf":
            bad = a != e
        else:
            continue
        if np.any(bad):
            return (f"{name}: {int(np.sum(bad))} of {bad.size} differ, e.g. "
                    f"{a[bad][:3]} against {other}'s {e[bad][:3]}")
    return None


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def run_one(model: onnx.ModelProto | bytes, feeds: dict[str, np.ndarray], diff: bool,
            timeout: int, backend: str | None = None, peer: str = "onnx.reference",
            intermediates: bool = False) -> dict[str, Any]:
    """Load and run one mutated model; the outcome as a JSON-ready dict. ``intermediates``:
    run the backend's session with every intermediate value kept (``refmnn compare``'s path)."""
    import refmnn

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    data = model if isinstance(model, bytes) else model.SerializeToString()
    try:
        got = refmnn.Session(data).run(feeds)
        if backend is not None:
            try:
                accelerated = refmnn.Session(data, backends=(backend,)).run(
                    feeds, intermediates=intermediates)
            except refmnn.RefmnnError as exc:
                return {"status": "BACKEND-REFUSED", "error": f"{type(exc).__name__}: {exc}"}
            difference = differences(accelerated, got, "the reference")
            if difference:
                return {"status": "BACKEND-DIFF", "diff": difference}
    except refmnn.RefmnnError as exc:
        return {"status": "refused", "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    except _Timeout:
        return {"status": "HANG"}
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)[-3:]
        return {"status": "BUG", "error": f"{type(exc).__name__}: {str(exc)[:300]}",
                "where": [f"{f.filename}:{f.lineno} {f.name}" for f in frames]}
    finally:
        signal.alarm(0)
    difference = compare(model, feeds, got, peer) if diff and not isinstance(model, bytes) \
        else None
    return {"status": "DIFF", "diff": difference} if difference else {"status": "ok"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", type=int, default=0, help="first case index")
    parser.add_argument("--stop", type=int, default=None, help="one past the last case index")
    parser.add_argument("--seeds", type=int, default=3, help="mutations per case")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--diff", action="store_true", help="also compare with onnx.reference")
    parser.add_argument("--peer", choices=PEERS,
                        default="onnx.reference",
                        help="with --diff: the engine to compare with (onnxruntime may crash "
                        "the process on a malformed model: best with --values)")
    parser.add_argument("--bytes", action="store_true", help="corrupt the serialized bytes")
    parser.add_argument("--opsets", action="store_true",
                        help="keep the model and inputs; run them at each other opset (7 and "
                        "up) where an op's definition differs and the model is still valid")
    parser.add_argument("--values", action="store_true",
                        help="keep the model; feed NaN, infinities, signed zeros, subnormals")
    parser.add_argument("--all-inputs", action="store_true",
                        help="with --values: redraw every float input, not only the first")
    parser.add_argument("--backend", help="also run on this backend; compare with the reference")
    parser.add_argument("--intermediates", action="store_true",
                        help="with --backend: keep every intermediate value there (the path of "
                        "refmnn compare)")
    parser.add_argument("--timeout", type=int, default=20, help="seconds per mutation")
    parser.add_argument("--memory-limit", type=float, default=6.0, help="GiB of address space")
    parser.add_argument("--out", default="-", help="JSON lines file (default: stdout)")
    args = parser.parse_args(argv)

    limit = int(args.memory_limit * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    warnings.simplefilter("ignore")  # the cases' own generators and odd values warn a lot
    from onnx.backend.test.case.node import collect_testcases

    cases = collect_testcases(None)
    out = sys.stdout if args.out == "-" else open(args.out, "w")  # noqa: SIM115
    counts: Counter[str] = Counter()
    findings = []
    stop = len(cases) if args.stop is None else min(args.stop, len(cases))
    for index in range(args.start, stop):
        case = cases[index]
        if not case.data_sets:
            continue
        others = other_opsets(case) if args.opsets else []
        seeds = range(len(others)) if args.opsets else \
            range(args.first_seed, args.first_seed + args.seeds)
        for seed in seeds:
            feeds = feeds_of(case)
            if args.opsets:
                model, what = others[seed]
                if args.values:  # and special values in the inputs
                    feeds, special = extreme_feeds(case, index, seed, args.all_inputs)
                    what += f"; {special}"
            elif args.values:
                model = case.model
                feeds, what = extreme_feeds(case, index, seed, args.all_inputs)
            else:
                model, what = (corrupted if args.bytes else mutated)(case, index, seed)
            record = {"case": case.name, "index": index, "seed": seed, "mutation": what,
                      **run_one(model, feeds, args.diff, args.timeout, args.backend,
                                args.peer, args.intermediates)}
            counts[record["status"]] += 1
            if record["status"] not in ("ok", "refused"):
                findings.append(record)
            print(json.dumps(record), file=out, flush=True)
    print(f"{sum(counts.values())} mutations: " +
          ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr)
    for record in findings:
        print(f"{record['status']} {record['case']} (--start {record['index']} --first-seed "
              f"{record['seed']}): {record['mutation']}: "
              f"{record.get('error') or record.get('diff') or ''} {record.get('where', '')}",
              file=sys.stderr)
    return 1 if any(k not in ("ok", "refused", "DIFF") for k in counts) else 0


if __name__ == "__main__":
    sys.exit(main())
