"""The ai.onnx.ml tree ensembles, TreeEnsembleRegressor (1, 3) and TreeEnsemble (5): random
small trees (every branch mode, NaN features and missing_value_tracks_true, every aggregate
function and post transform) in float32, float64 and the integer types the op takes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refmnn.dtypes import DType

from ._sweep import Sample, SampleContext, Sweep
from .ml import (_AGGREGATES, _NUMBERS, _ONE_TARGET, _TRANSFORMS, _ZERO_ROW, ML, _as_float,
                 _floats, _halves, _nan_at_neq, _numbers, _probit_cancels, _with, _zero_row)

# --------------------------------------------------------------------------------------------
# tree ensembles
# --------------------------------------------------------------------------------------------

_BRANCHES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")


@dataclass(eq=False)
class _Node:
    """One node of a drawn tree: a leaf (``true`` and ``false`` None) with its votes, or a
    branch comparing feature ``feature`` with ``split`` by mode ``mode`` (an index into
    ``_BRANCHES``, 6 for BRANCH_MEMBER with the set ``members``)."""

    feature: int = 0
    mode: int = 0
    split: float = 0.0
    missing_true: int = 0
    members: tuple[float, ...] = ()
    true: _Node | None = None
    false: _Node | None = None
    votes: tuple[tuple[int, float], ...] = ()


def _tree(rng: np.random.Generator, features: int, targets: int, depth: int, member: bool,
          votes: tuple[int, int]) -> _Node:
    """A random tree of depth up to ``depth``: branches on random features by random modes
    (BRANCH_MEMBER too when ``member``, with 1-3 integers: onnxruntime takes no others),
    splits multiples of 1/2 or random, missing values sent either way; each leaf with
    ``votes`` (low, high) random (target, weight) votes."""
    if depth == 0 or rng.random() < 0.3:
        n = int(rng.integers(votes[0], votes[1] + 1))
        return _Node(votes=tuple((int(rng.integers(0, targets)), w)
                                 for w in _floats(rng, n, 2.0)))
    mode = int(rng.integers(0, 7 if member else 6))
    split = _halves(rng, 1)[0] if rng.random() < 0.8 else _floats(rng, 1, 2.0)[0]
    members = tuple(float(v) for v in rng.choice(np.arange(-4, 5), int(rng.integers(1, 4)),
                                                 replace=False)) if mode == 6 else ()
    return _Node(int(rng.integers(0, features)), mode, split, int(rng.random() < 0.4), members,
                 _tree(rng, features, targets, depth - 1, member, votes),
                 _tree(rng, features, targets, depth - 1, member, votes))


def _preorder(root: _Node) -> list[_Node]:
    """The nodes of a tree, root first, each before its children."""
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        out.append(node)
        if node.true is not None:
            stack += [node.false, node.true]
    return out


def _tree_inputs(ctx: SampleContext) -> tuple[np.ndarray, int]:
    """X [N, F] (N 0-5, F 1-4) of multiples of 1/2, NaN in a fifth of float samples' elements
    now and then; and F."""
    rng = ctx.rng
    f = int(rng.integers(1, 5))
    shape = (int(rng.integers(0 if rng.random() < 0.1 else 1, 6)), f)
    return _numbers(ctx, shape, nans=0.2 if rng.random() < 0.4 else 0.0), f


def _tree_options(rng: np.random.Generator, attrs: dict[str, object], targets: int,
                  names: bool) -> None:
    """Sets n_targets, aggregate_function and post_transform (names or their numbers, 5)."""
    attrs["n_targets"] = targets
    agg = int(rng.integers(0, 4))
    if agg != 1 or rng.random() < 0.5:
        attrs["aggregate_function"] = _AGGREGATES[agg] if names else agg
    transform = int(rng.integers(0, 5))
    if transform or rng.random() < 0.5:
        attrs["post_transform"] = _TRANSFORMS[transform] if names else transform


def draw_tree_ensemble_regressor(ctx: SampleContext, opset: int) -> Sample:
    """A random TreeEnsembleRegressor: 1-4 random trees (``_tree``, depth up to 3; a tree of one
    leaf now and then) over X [N, F]; node ids numbered from 0 per tree, root first, each tree's
    nodes listed together, root first (both peers take the first listed node of a tree for its
    root), the others in id order or shuffled; 1-3 targets, each leaf 1-2 votes (in a tenth of
    the samples 0-2, so no vote at all now and then, in float X only: onnxruntime has no integer
    kernel to judge the reference's answer); base_values and missing_value_tracks_true now and
    then; every aggregate function and post transform; at 3, the thresholds, weights and base
    values as double tensors (mostly for float64 X: onnxruntime reads them only for double
    input)."""
    rng = ctx.rng
    x, features = _tree_inputs(ctx)
    targets = int(rng.integers(1, 4))
    votes = (0, 2) if rng.random() < 0.1 else (1, 2)
    rows = []  # (tree, node id, node, true id, false id)
    for t in rng.permutation(int(rng.integers(1, 5))):
        nodes = _preorder(_tree(rng, features, targets, 3, False, votes))
        ids = {id(node): i for i, node in enumerate(nodes)}
        order = [0, *(rng.permutation(len(nodes) - 1) + 1 if rng.random() < 0.3
                      else range(1, len(nodes)))]
        rows += [(int(t), int(i), nodes[i], ids.get(id(nodes[i].true), 0),
                  ids.get(id(nodes[i].false), 0)) for i in order]
    cast = [(t, i, target, w) for t, i, node, _, _ in rows for target, w in node.votes]
    if not cast and not ctx.is_float:  # no integer kernel in onnxruntime to run it
        leaf = next(r for r in rows if r[2].true is None)
        cast = [(leaf[0], leaf[1], 0, 1.0)]
    attrs: dict[str, object] = {
        "nodes_treeids": [r[0] for r in rows], "nodes_nodeids": [r[1] for r in rows],
        "nodes_featureids": [r[2].feature for r in rows],
        "nodes_modes": [_BRANCHES[r[2].mode] if r[2].true else "LEAF" for r in rows],
        "nodes_truenodeids": [r[3] for r in rows], "nodes_falsenodeids": [r[4] for r in rows]}
    splits = [r[2].split if r[2].true else 0.0 for r in rows]
    weights = [v[3] for v in cast]
    base = _floats(rng, targets) if rng.random() < 0.4 else None
    tensors = opset >= 3 and rng.random() < (0.7 if ctx.dtype == np.float64 else 0.1)
    for name, values in (("nodes_values", splits), ("target_weights", weights),
                         ("base_values", base)):
        if values:
            attrs[f"{name}_as_tensor" if tensors else name] = \
                np.asarray(values, np.float64) if tensors else values
    if cast:
        attrs.update({"target_treeids": [v[0] for v in cast],
                      "target_nodeids": [v[1] for v in cast],
                      "target_ids": [v[2] for v in cast]})
    if rng.random() < 0.6:
        attrs["nodes_missing_value_tracks_true"] = [r[2].missing_true for r in rows]
    _tree_options(rng, attrs, targets, names=True)
    return Sample((x,), attrs)


def draw_tree_ensemble(ctx: SampleContext, opset: int) -> Sample:
    """A random TreeEnsemble (ai.onnx.ml 5): 1-4 random trees (``_tree`` with BRANCH_MEMBER
    sets, depth up to 3) over X [N, F]; interior nodes and leaves each listed in a random order,
    tree_roots pointing at them; a tree of one leaf as a node whose two branches are that leaf;
    each leaf one (target, weight), 1-3 targets; modes, splits, weights and membership values
    (sets separated by NaN, a NaN after the last set half the time) as tensors of X's type;
    missing_value_tracks_true now and then; every aggregate function and post transform."""
    rng = ctx.rng
    x, features = _tree_inputs(ctx)
    targets = int(rng.integers(1, 4))
    roots = [_tree(rng, features, targets, 3, True, (1, 1))
             for _ in range(int(rng.integers(1, 5)))]
    branches, leaves = [], []
    for root in roots:
        nodes = _preorder(root)
        if root.true is None:  # one leaf: a branch node whose two sides are the leaf
            nodes = [_Node(int(rng.integers(0, features)), int(rng.integers(0, 6)), 0.0,
                           0, (), root, root), root]
        branches += [n for n in nodes if n.true is not None]
        leaves += [n for n in nodes if n.true is None]
    branches = [branches[int(i)] for i in rng.permutation(len(branches))]
    leaves = [leaves[int(i)] for i in rng.permutation(len(leaves))]
    where = {id(n): i for i, n in enumerate(branches)} | {id(n): i for i, n in enumerate(leaves)}

    def is_leaf(node: _Node | None) -> int:
        return int(node is not None and node.true is None)
    attrs: dict[str, object] = {
        "tree_roots": [where[id(r)] if r.true is not None else
                       next(i for i, b in enumerate(branches) if b.true is r and b.false is r)
                       for r in roots],
        "nodes_featureids": [n.feature for n in branches],
        "nodes_modes": np.asarray([n.mode for n in branches], np.uint8),
        "nodes_splits": np.asarray([n.split for n in branches], ctx.dtype),
        "nodes_truenodeids": [where[id(n.true)] for n in branches],
        "nodes_trueleafs": [is_leaf(n.true) for n in branches],
        "nodes_falsenodeids": [where[id(n.false)] for n in branches],
        "nodes_falseleafs": [is_leaf(n.false) for n in branches],
        "leaf_targetids": [n.votes[0][0] for n in leaves],
        "leaf_weights": np.asarray([n.votes[0][1] for n in leaves], ctx.dtype)}
    sets = [n.members for n in branches if n.mode == 6]
    if sets:
        flat = [v for s in sets for v in (*s, float("nan"))]
        flat = flat[:-1] if rng.random() < 0.5 else flat
        attrs["membership_values"] = np.asarray(flat, ctx.dtype)
    if rng.random() < 0.6:
        attrs["nodes_missing_value_tracks_true"] = [n.missing_true for n in branches]
    _tree_options(rng, attrs, targets, names=False)
    return Sample((x,), attrs)


def _regressor_votes(sample: Sample, opset: int) -> np.ndarray:
    """[N, targets]: how many votes each row's leaves cast for each target."""
    a = sample.attrs
    if "target_ids" not in a:
        return np.zeros((sample.inputs[0].shape[0], a["n_targets"]))
    ones = {k: (np.ones(len(a[k])) if isinstance(a[k], np.ndarray) else [1.0] * len(a[k]))
            for k in ("target_weights", "target_weights_as_tensor") if k in a}
    return _with(sample, "TreeEnsembleRegressor", opset, aggregate_function="SUM",
                 post_transform=None, base_values=None, base_values_as_tensor=None, **ones)


def known_tree_ensemble_regressor(sample: Sample, opset: int, peer: str) -> str | None:
    """TreeEnsembleRegressor: onnxruntime's single-target shortcuts and dropped base values;
    both peers' MIN/MAX of a target no leaf voted for."""
    a = sample.attrs
    transform, agg = a.get("post_transform", "NONE"), a.get("aggregate_function", "SUM")
    votes = _regressor_votes(sample, opset)
    if agg in ("MIN", "MAX") and peer == "onnx.reference" and np.any(votes == 0):
        return ("onnx.reference 1.23.2 gives a target no reached leaf voted for +-FLT_MAX under "
                "MIN/MAX; the spec does not say (the reference, as onnxruntime, gives 0 before "
                "base_values)")
    if peer != "onnxruntime":
        return _as_float("TreeEnsembleRegressor")(sample, opset, peer)
    if a["n_targets"] == 1 and transform not in ("NONE", "PROBIT"):
        return _ONE_TARGET.format(transform)
    leaves = list(zip(a.get("target_treeids", []), a.get("target_nodeids", []), strict=True))
    if a["n_targets"] == 1 and len(set(leaves)) < len(leaves):
        return ("onnxruntime 1.32 keeps only the first vote of a leaf with several when there is "
                "one target; the spec: 'A leaf may have multiple votes, where each vote is "
                "weighted by the associated target_weights index' (onnx.reference agrees with "
                "the reference)")
    if reason := _nan_at_neq(sample, peer):
        return reason
    base = a.get("base_values", a.get("base_values_as_tensor"))
    if base is not None and np.any((votes == 0) & (np.asarray(base) != 0)):
        return ("onnxruntime 1.32 gives 0 for a target no reached leaf voted for, leaving out "
                "its base value; the spec: base_values are 'added to final prediction after "
                "applying aggregate_function' (onnx.reference agrees with the reference)")
    raw = _with(sample, "TreeEnsembleRegressor", opset, post_transform=None)
    if transform == "SOFTMAX_ZERO" and _zero_row(raw):
        return _ZERO_ROW
    return _probit_cancels(raw) if transform == "PROBIT" else None


def _truncated_member(sample: Sample) -> bool:
    """Whether a BRANCH_MEMBER node meets a fractional feature whose integer part is in its
    set."""
    a, x = sample.attrs, sample.inputs[0]
    members = np.asarray(a.get("membership_values", []), np.float64)
    sets = np.split(members, np.flatnonzero(np.isnan(members)))
    nodes = np.flatnonzero(np.asarray(a["nodes_modes"]) == 6)
    for node, values in zip(nodes, sets, strict=False):
        column = x[:, a["nodes_featureids"][node]].astype(np.float64)
        if np.any((column != np.trunc(column)) & np.isin(np.trunc(column), values)):
            return True
    return False


def _members_visited(a: dict[str, Any]) -> list[int]:
    """The BRANCH_MEMBER nodes in the order onnx.reference reads their sets: each tree from its
    root, a node before its true, then its false branch."""
    order: list[int] = []

    def visit(node: int) -> None:
        order.extend([node] if a["nodes_modes"][node] == 6 else [])
        for child, leaf in (("nodes_truenodeids", "nodes_trueleafs"),
                            ("nodes_falsenodeids", "nodes_falseleafs")):
            if not a[leaf][node]:
                visit(a[child][node])
    for root in a["tree_roots"]:
        if not (a["nodes_trueleafs"][root] and a["nodes_falseleafs"][root]
                and a["nodes_truenodeids"][root] == a["nodes_falsenodeids"][root]):
            visit(root)
    return order


def known_tree_ensemble(sample: Sample, opset: int, peer: str) -> str | None:
    """TreeEnsemble: onnxruntime's post_transform numbers; onnx.reference's missing
    post_transform, MIN/MAX without votes and set parsing."""
    a = sample.attrs
    transform, agg = a.get("post_transform", 0), a.get("aggregate_function", 1)
    if peer == "onnxruntime":
        if _truncated_member(sample):
            return ("onnxruntime 1.32 tests BRANCH_MEMBER on the feature cast to an integer "
                    "(-0.5 is 'in' {0}); the spec: the node tests membership of the feature's "
                    "value in the set (onnx.reference agrees with the reference)")
        if reason := _nan_at_neq(sample, peer):
            return reason
        if transform in (1, 2):
            return ("onnxruntime 1.32 reads post_transform 1 as LOGISTIC and 2 as SOFTMAX (its "
                    "own enumeration); the spec: 'SOFTMAX' (1), 'LOGISTIC' (2)")
        if transform == 3 and a["n_targets"] == 1:
            return _ONE_TARGET.format("SOFTMAX_ZERO")
        raw = _with(sample, "TreeEnsemble", opset, post_transform=0)
        if transform == 3 and _zero_row(raw):
            return _ZERO_ROW
        return _probit_cancels(raw) if transform == 4 else None
    if transform:
        return "onnx.reference 1.23.2 ignores post_transform in TreeEnsemble"
    if reason := _nan_at_neq(sample, peer):  # its TreeEnsembleRegressor goes 'false'
        return reason
    if any(a["nodes_trueleafs"][r] and a["nodes_falseleafs"][r] and a["nodes_truenodeids"][r]
           == a["nodes_falsenodeids"][r] != r for r in a["tree_roots"]):
        return ("onnx.reference 1.23.2 scores a tree of one leaf (a root whose two branches are "
                "the same leaf) with leaf_weights[root index], not the leaf the branches name")
    members = a.get("membership_values")
    if members is not None and np.any(np.asarray(members) == 0):
        return ("onnx.reference 1.23.2 ends a membership set at a member 0.0 (it reads the "
                "values with 'while (v := next(it)) and not isnan(v)', and 0.0 is false)")
    if _members_visited(dict(a)) != sorted(_members_visited(dict(a))):
        return ("onnx.reference 1.23.2 hands the membership sets to the BRANCH_MEMBER nodes in "
                "the order it builds the trees (from the roots, true branches first); the spec: "
                "'in the order that the BRANCH_MEMBER mode appears in node_modes'")
    ones = np.ones(len(a["leaf_weights"]), a["leaf_weights"].dtype)
    if agg in (2, 3) and np.any(_with(sample, "TreeEnsemble", opset, aggregate_function=1,
                                      leaf_weights=ones) == 0):
        return ("onnx.reference 1.23.2 gives a target no reached leaf voted for +-FLT_MAX under "
                "MIN/MAX; the spec does not say (the reference, as onnxruntime, gives 0)")
    return None


SWEEPS = (
    Sweep("TreeEnsembleRegressor", (1, 3), draw_tree_ensemble_regressor, dtypes=_NUMBERS,
          known=known_tree_ensemble_regressor, domain=ML),
    Sweep("TreeEnsemble", (5,), draw_tree_ensemble, dtypes=(DType.float32, DType.float64),
          known=known_tree_ensemble, domain=ML),
)
