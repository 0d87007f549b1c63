"""Training ops (domain ``ai.onnx.preview.training``): Adagrad, Adam, Momentum and Gradient.

The optimizers take ``R`` (learning rate, scalar), ``T`` (update count, int64 scalar) and then
groups of tensors: all the X's, then all their gradients G, then each extra state (H, or V and
H).  They return the new X's followed by the new states, each with its X's dtype.  Scalar
coefficients are computed in float64 and applied to the tensors in their own dtype.

Gradient differentiates a part of the graph it sits in: :func:`gradient` re-runs the nodes that
compute ``y`` from ``xs`` + ``zs`` on its inputs and applies reverse-mode rules (:data:`_VJP`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from refmnn.graph import Graph, Node, Value, ValueType
from refmnn.ops._schema import Attr, InferContext, OpContext, op

_DOMAIN = "ai.onnx.preview.training"


def _groups(values: Sequence[Any], kinds: int, op_name: str) -> list[list[Any]]:
    """Split [X1..Xn, G1..Gn, ...] into ``kinds`` lists of n."""
    if not values or len(values) % kinds:
        raise ValueError(f"{op_name}: {len(values)} tensor inputs cannot be split into "
                         f"{kinds} equal groups")
    n = len(values) // kinds
    return [list(values[i * n:(i + 1) * n]) for i in range(kinds)]


def _optimizer_infer(kinds: int, keep: Sequence[int]) -> Callable[..., tuple[ValueType | None, ...]]:
    """Rule: the outputs are groups ``keep`` of the tensor inputs (X, then the states), same types."""

    def rule(ctx: InferContext, r: Any, t: Any, *tensors: ValueType | None,
             **attrs: Any) -> tuple[ValueType | None, ...]:
        if len(tensors) % kinds:
            ctx.fail(f"{len(tensors)} tensor inputs cannot be split into {kinds} equal groups")
        n = len(tensors) // kinds
        return tuple(tensors[k * n + i] for k in keep for i in range(n))

    return rule


def _scalar(value: np.ndarray) -> float:
    return float(np.asarray(value).reshape(-1)[0]) if np.size(value) else 0.0


@op("Adagrad", since=1, domain=_DOMAIN, inputs=("R", "T", "inputs..."), outputs=("outputs...",),
    infer=_optimizer_infer(3, (0, 2)),
    attrs=(Attr("decay_factor", "float", 0.0, "learning rate r = R / (1 + T * decay_factor)"),
           Attr("epsilon", "float", 1e-6, "added to sqrt(H_new) to avoid dividing by zero"),
           Attr("norm_coefficient", "float", 0.0, "L2 regularization: G += norm_coefficient * X")))
def adagrad(R, T, *inputs, decay_factor, epsilon, norm_coefficient):
    """One ADAGRAD step for each X_i.  inputs: X_1..X_n, G_1..G_n, H_1..H_n::

        r = R / (1 + T * decay_factor)
        G' = norm_coefficient * X + G
        H_new = H + G' * G'
        X_new = X - r * G' / (sqrt(H_new) + epsilon)

    Returns X_new_1..n, H_new_1..n, each in its X's / H's dtype.
    """
    xs, gs, hs = _groups(inputs, 3, "Adagrad")
    r = _scalar(R) / (1.0 + _scalar(T) * decay_factor)
    new_x, new_h = [], []
    for x, g, h in zip(xs, gs, hs, strict=True):
        g_reg = x.dtype.type(norm_coefficient) * x + g
        h_new = (h + g_reg * g_reg).astype(h.dtype)
        new_x.append((x - x.dtype.type(r) * g_reg / (np.sqrt(h_new) + x.dtype.type(epsilon))).astype(x.dtype))
        new_h.append(h_new)
    return tuple(new_x + new_h)


@op("Adam", since=1, domain=_DOMAIN, inputs=("R", "T", "inputs..."), outputs=("outputs...",),
    infer=_optimizer_infer(4, (0, 2, 3)),
    attrs=(Attr("alpha", "float", 0.9, "decay of the running average of gradients"),
           Attr("beta", "float", 0.999, "decay of the running average of squared gradients"),
           Attr("epsilon", "float", 1e-6, "added to sqrt(H_new) to avoid dividing by zero"),
           Attr("norm_coefficient", "float", 0.0, "L2 regularization: G += norm_coefficient * X"),
           Attr("norm_coefficient_post", "float", 0.0, "X_final = (1 - this) * X_new")))
def adam(R, T, *inputs, alpha, beta, epsilon, norm_coefficient, norm_coefficient_post):
    """One Adam step for each X_i.  inputs: X_1..n, G_1..n, V_1..n, H_1..n::

        G' = norm_coefficient * X + G
        V_new = alpha * V + (1 - alpha) * G'
        H_new = beta * H + (1 - beta) * G' * G'
        R' = R * sqrt(1 - beta**T) / (1 - alpha**T)  if T > 0 else R
        X_new = (1 - norm_coefficient_post) * (X - R' * V_new / (sqrt(H_new) + epsilon))

    Returns X_new_1..n, V_new_1..n, H_new_1..n in the dtypes of X, V, H.
    """
    xs, gs, vs, hs = _groups(inputs, 4, "Adam")
    r, t = _scalar(R), _scalar(T)
    if t > 0:
        r = r * np.sqrt(1.0 - beta ** t) / (1.0 - alpha ** t)
    out_x, out_v, out_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs, strict=True):
        c = x.dtype.type
        g_reg = c(norm_coefficient) * x + g
        v_new = (c(alpha) * v + c(1 - alpha) * g_reg).astype(v.dtype)
        h_new = (c(beta) * h + c(1 - beta) * g_reg * g_reg).astype(h.dtype)
        x_new = x - c(r) * (v_new / (np.sqrt(h_new) + c(epsilon)))
        out_x.append((c(1 - norm_coefficient_post) * x_new).astype(x.dtype))
        out_v.append(v_new)
        out_h.append(h_new)
    return tuple(out_x + out_v + out_h)


@op("Momentum", since=1, domain=_DOMAIN, inputs=("R", "T", "inputs..."), outputs=("outputs...",),
    infer=_optimizer_infer(3, (0, 2)),
    attrs=(Attr("alpha", "float", doc="decay of the previous momentum"),
           Attr("beta", "float", doc="scale of the current gradient (1 at T == 0)"),
           Attr("mode", "string", doc='"standard" or "nesterov"'),
           Attr("norm_coefficient", "float", doc="L2 regularization: G += norm_coefficient * X")))
def momentum(R, T, *inputs, alpha, beta, mode, norm_coefficient):
    """One SGD-with-momentum step for each X_i.  inputs: X_1..n, G_1..n, V_1..n::

        G' = norm_coefficient * X + G
        V_new = alpha * V + (beta if T > 0 else 1) * G'
        X_new = X - R * V_new                       (mode "standard")
        X_new = X - R * (G' + alpha * V_new)        (mode "nesterov")

    Returns X_new_1..n, V_new_1..n in the dtypes of X and V.
    """
    if mode not in ("standard", "nesterov"):
        raise ValueError(f"Momentum mode must be 'standard' or 'nesterov', got {mode!r}")
    xs, gs, vs = _groups(inputs, 3, "Momentum")
    r = _scalar(R)
    b = beta if _scalar(T) > 0 else 1.0
    out_x, out_v = [], []
    for x, g, v in zip(xs, gs, vs, strict=True):
        c = x.dtype.type
        g_reg = c(norm_coefficient) * x + g
        v_new = (c(alpha) * v + c(b) * g_reg).astype(v.dtype)
        step = v_new if mode == "standard" else g_reg + c(alpha) * v_new
        out_x.append((x - c(r) * step).astype(x.dtype))
        out_v.append(v_new)
    return tuple(out_x + out_v)


# --------------------------------------------------------------------------------------------
# Gradient: reverse-mode differentiation of a slice of the enclosing graph
# --------------------------------------------------------------------------------------------

def _unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``g`` over the axes NumPy broadcasting added or stretched to reach its shape."""
    g = np.asarray(g)
    if g.ndim > len(shape):
        g = g.sum(axis=tuple(range(g.ndim - len(shape))))
    axes = tuple(i for i, (n, m) in enumerate(zip(shape, g.shape, strict=True)) if n == 1 and m != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def _vjp_matmul(node: Node, g, ins, outs):
    a, b = ins
    a2 = a if a.ndim > 1 else a[None, :]
    b2 = b if b.ndim > 1 else b[:, None]
    g2 = np.asarray(g).reshape(np.matmul(a2, b2).shape)
    ga = _unbroadcast(g2 @ np.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)
    gb = _unbroadcast(np.swapaxes(a2, -1, -2) @ g2, b2.shape).reshape(b.shape)
    return [ga, gb]


def _vjp_transpose(node: Node, g, ins, outs):
    perm = node.attrs.get("perm") or tuple(range(ins[0].ndim - 1, -1, -1))
    return [np.transpose(g, np.argsort(perm))]


def _vjp_reshape(node: Node, g, ins, outs):
    return [np.reshape(g, ins[0].shape)] + [None] * (len(ins) - 1)


_VJP: dict[str, Callable[..., list[Any]]] = {
    # each rule: (node, dL/dY, input values, output values) -> [dL/dX_i or None]
    "Identity": lambda n, g, i, o: [g],
    "Neg": lambda n, g, i, o: [-g],
    "Add": lambda n, g, i, o: [_unbroadcast(g, i[0].shape), _unbroadcast(g, i[1].shape)],
    "Sub": lambda n, g, i, o: [_unbroadcast(g, i[0].shape), _unbroadcast(-g, i[1].shape)],
    "Mul": lambda n, g, i, o: [_unbroadcast(g * i[1], i[0].shape), _unbroadcast(g * i[0], i[1].shape)],
    "Div": lambda n, g, i, o: [_unbroadcast(g / i[1], i[0].shape),
                               _unbroadcast(-g * i[0] / (i[1] * i[1]), i[1].shape)],
    "Sum": lambda n, g, i, o: [_unbroadcast(g, x.shape) for x in i],
    "MatMul": _vjp_matmul,
    "Relu": lambda n, g, i, o: [g * (i[0] > 0)],
    "Sigmoid": lambda n, g, i, o: [g * o[0] * (1 - o[0])],
    "Tanh": lambda n, g, i, o: [g * (1 - o[0] * o[0])],
    "Exp": lambda n, g, i, o: [g * o[0]],
    "Log": lambda n, g, i, o: [g / i[0]],
    "Sqrt": lambda n, g, i, o: [g / (2 * o[0])],
    "Pow": lambda n, g, i, o: [_unbroadcast(g * i[1] * np.power(i[0], i[1] - 1), i[0].shape),
                               _unbroadcast(g * o[0] * np.log(i[0]), i[1].shape)],
    "Transpose": _vjp_transpose,
    "Reshape": _vjp_reshape,
    "Flatten": _vjp_reshape,
    "Squeeze": _vjp_reshape,
    "Unsqueeze": _vjp_reshape,
}


def _forward_slice(graph: Graph, upto: Node, y: str, sources: set[str]) -> list[Node]:
    """The nodes before ``upto`` that ``y`` depends on, stopping at ``sources``, in graph order."""
    producers: dict[str, tuple[int, Node]] = {}
    for index, node in enumerate(graph.nodes):
        if node is upto:
            break
        for out in node.outputs:
            if out:
                producers[out] = (index, node)
    needed: dict[int, Node] = {}
    stack = [y]
    while stack:
        name = stack.pop()
        if name in sources or name not in producers:
            continue
        index, node = producers[name]
        if index in needed:
            continue
        needed[index] = node
        stack.extend(n for n in node.inputs if n)
    return [needed[i] for i in sorted(needed)]


_FORWARD_CACHE: dict[tuple[int, str], tuple[Graph, Graph]] = {}


def _forward_graph(graph: Graph, node: Node, y: str, names: list[str]) -> Graph:
    """The sub-graph computing y from ``names`` (cached per Gradient node, so it compiles once)."""
    key = (id(graph), node.name)
    cached = _FORWARD_CACHE.get(key)
    if cached is not None and cached[0] is graph:
        return cached[1]
    nodes = _forward_slice(graph, node, y, set(names))
    for n in nodes:
        if n.op not in _VJP or n.domain not in ("", "ai.onnx"):
            raise NotImplementedError(f"Gradient: no derivative rule for {n.op} ({n.name})")
    produced = [o for n in nodes for o in n.outputs if o]
    initializers = {i: graph.initializers[i] for n in nodes for i in n.inputs
                    if i in graph.initializers and i not in names}
    forward = Graph(nodes=tuple(nodes), inputs=tuple(Value(n) for n in names),
                    outputs=tuple(Value(n) for n in produced), initializers=initializers,
                    opsets=graph.opsets, name=f"{node.name}_forward")
    if len(_FORWARD_CACHE) > 64:
        _FORWARD_CACHE.clear()
    _FORWARD_CACHE[key] = (graph, forward)
    return forward


def _gradient_infer(ctx: InferContext, *types: ValueType | None, **attrs: Any) -> tuple[Any, ...]:
    """Output i has the type of input i (the value fed for xs[i])."""
    count = len(attrs["xs"])
    return tuple(types[i] if i < len(types) else None for i in range(count))


@op("Gradient", since=1, domain=_DOMAIN, inputs=("Inputs...",), outputs=("Outputs...",),
    infer=_gradient_infer,
    attrs=(Attr("xs", "strings", doc="names of the differentiated inputs of the sub-graph"),
           Attr("y", "string", doc="name of the differentiated tensor"),
           Attr("zs", "strings", (), "names of the other (non-differentiated) inputs")))
def gradient(*inputs, xs, y, zs, ctx: OpContext):
    """dy/dx for each x in ``xs``, where y is computed by the enclosing graph from xs + zs.

    Inputs: the values of xs followed by those of zs (the point the derivative is taken at).
    Output i is d(sum of y)/d(xs[i]), shaped like xs[i]; a tensor y gives the gradient of the
    sum of its elements.  The nodes of the enclosing graph that compute y from xs + zs are
    re-run on the inputs, then reverse-mode rules for Identity, Neg, Add, Sub, Mul, Div, Sum,
    MatMul, Relu, Sigmoid, Tanh, Exp, Log, Sqrt, Pow, Transpose, Reshape, Flatten, Squeeze and
    Unsqueeze propagate dy back (broadcast operands are summed back to their shapes).  An x
    that y does not depend on gets zeros.
    """
    names = list(xs) + list(zs)
    if len(inputs) != len(names):
        raise ValueError(f"Gradient takes {len(names)} inputs (xs + zs), got {len(inputs)}")
    if ctx.graph is None:
        raise RuntimeError("Gradient needs the enclosing graph (run it through the interpreter)")
    forward = _forward_graph(ctx.graph, ctx.node, y, names)
    nodes = forward.nodes
    produced = [v.name for v in forward.outputs]
    initializers = forward.initializers
    values = dict(zip(names, inputs, strict=True))
    values.update(initializers)
    values.update(zip(produced, ctx.run_graph(forward, list(inputs)), strict=True))
    if y not in values:
        raise ValueError(f"Gradient: y={y!r} is not computed from xs + zs")
    grads: dict[str, np.ndarray] = {y: np.ones_like(values[y])}
    for node in reversed(nodes):
        g = grads.get(node.outputs[0])
        if g is None:
            continue
        ins = [values[n] if n else None for n in node.inputs]
        outs = [values.get(n) for n in node.outputs]
        for name, gi in zip(node.inputs, _VJP[node.op](node, g, ins, outs), strict=False):
            if name and gi is not None:
                grads[name] = grads[name] + gi if name in grads else gi
    return tuple(np.asarray(grads.get(x, np.zeros_like(values[x]))).astype(values[x].dtype)
                 .reshape(np.shape(values[x])) for x in xs)


OPS = (adagrad, adam, momentum, gradient)
