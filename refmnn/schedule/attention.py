"""Graph passes for attention: the scaled dot-product chain as one ``refmnn::FusedAttention``
(:func:`fuse_attention`), then the Transposes around it absorbed into its ``perm_*``
attributes (:func:`absorb_attention_transposes`). Both run in :mod:`refmnn.schedule.optimize`'s
pipeline and follow its rules (pure, top-level only, graph outputs kept, tested against the
reference in tests/test_optimize.py).
"""

from __future__ import annotations

from refmnn.graph import Graph, Node, TensorType
from refmnn.ops.fused import DOMAIN as FUSED_DOMAIN
from refmnn.schedule.rewrite import (PassContext, _absorb_add, _has, _pos, _scalar, _shape,
                                     _sole_reader, _walk, _with, _with_nodes)


def _scaling(graph: Graph, ctx: PassContext, node: Node) -> tuple[str, float] | None:
    """(x, f) when ``node`` is Mul(x, c), Mul(c, x) or Div(x, c) with c a scalar constant of
    x's float dtype (f = c, or 1 / c for Div), whose output keeps x's shape; else None."""
    if node.domain or node.op not in ("Mul", "Div") or len(node.inputs) != 2 or \
            graph.opset_of(node) < 7:
        return None
    for x, c in ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0])):
        f = _scalar(graph, ctx, c)
        tx, tc = ctx.types.get(x), ctx.types.get(c)
        if f is None or x == c or not isinstance(tx, TensorType) or \
                not isinstance(tc, TensorType) or tx.dtype is None or tx.dtype != tc.dtype or \
                not tx.dtype.is_float or _shape(ctx, node.outputs[0]) != _shape(ctx, x):
            continue
        if node.op == "Div":
            if x != node.inputs[0] or f == 0.0:
                return None
            return x, 1.0 / f
        return x, f
    return None


def fuse_attention(graph: Graph, ctx: PassContext) -> Graph:
    """Fuse scaled dot-product attention into one ``refmnn::FusedAttention`` (Q, KT, V, mask)::

        [Mul(q, c1)] -> MatMul(., KT) -> [Mul/Div(., c2)] -> [Add(., mask)] -> Softmax(axis=-1)
            -> MatMul(., V)

    as torch exports ``softmax(q @ k.transpose(-2, -1) / sqrt(d) + mask) @ v`` (BERT) or
    ``softmax((q * d**-0.5) @ k.transpose(-2, -1)) @ v`` (timm's ViT); a constant scaling of
    KT is absorbed like one of Q. The scalings multiply into the one ``scale`` attribute (a Div
    by c becomes a factor 1 / c), so results may differ from the chain's by rounding (an ulp of
    the scores).

    Preconditions: every intermediate value (scaled Q, scores, scaled and masked scores,
    probabilities) is read only by the next node of the chain (not a graph output, not
    captured by a subgraph); the constants are scalars of the scores' float dtype; Softmax
    normalises the last axis (Softmax-1/11 with ``axis`` = rank - 1 coerces to the same rows);
    Q, KT and V have static shapes of rank >= 2; the mask has a static shape that broadcasts to
    the scores' without enlarging them; the target has the fused op. The fused node takes the
    place of the last MatMul, after which Q, KT, V and the mask are all available.
    """
    if not ctx.target_has(FUSED_DOMAIN, "FusedAttention"):
        return graph
    uses, readers, producer, nodes = _walk(graph)

    def feeding(value: str, reader: Node) -> Node | None:
        """The producer of ``value`` when ``reader`` is its only reader."""
        node = producer.get(value)
        if node is None or node.domain or not _has(nodes, node) or \
                _sole_reader(readers, uses, value) is not reader:
            return None
        return node

    def scores(value: str, reader: Node, scaled: bool) -> tuple[Node, float, list[Node]] | None:
        """Walk back from ``value`` (read by ``reader``), through one scaling when ``scaled``,
        to the scores' MatMul: (MatMul, scale, absorbed nodes in graph order)."""
        node = feeding(value, reader)
        if node is None:
            return None
        if node.op == "MatMul":
            return node, 1.0, [node]
        if scaled and (found := _scaling(graph, ctx, node)) is not None:
            inner = scores(found[0], node, False)
            return None if inner is None else (inner[0], inner[1] * found[1], [*inner[2], node])
        return None

    for softmax in graph.nodes:
        if softmax.op != "Softmax" or softmax.domain or not _has(nodes, softmax):
            continue
        shape = _shape(ctx, softmax.inputs[0])
        axis = softmax.attrs.get("axis", -1 if graph.opset_of(softmax) >= 13 else 1)
        if not shape or int(axis) % len(shape) != len(shape) - 1:
            continue
        av = _sole_reader(readers, uses, softmax.outputs[0])
        if av is None or av.op != "MatMul" or av.domain or av.inputs[0] != softmax.outputs[0] \
                or av.inputs[1] == softmax.outputs[0] or not _has(nodes, av):
            continue
        mask, chain = "", scores(softmax.inputs[0], softmax, True)
        add = feeding(softmax.inputs[0], softmax)
        if chain is None and add is not None and add.op == "Add":
            for value in add.inputs:
                found = scores(value, add, True)
                bias = found and _absorb_add(graph, ctx, value, add, "Z")
                if bias:
                    chain, mask = (found[0], found[1], [*found[2], add]), bias[0]
                    break
        if chain is None:
            continue
        qk, scale, absorbed = chain
        operands = list(qk.inputs)
        for index, operand in enumerate(qk.inputs):
            pre = feeding(operand, qk)
            found = pre and _scaling(graph, ctx, pre)
            if found:
                operands[index], scale = found[0], scale * found[1]
                absorbed.insert(0, pre)
        q, kt = operands
        v = av.inputs[1]
        types = [ctx.types.get(name) for name in (q, kt, v, av.outputs[0])]
        shapes = [_shape(ctx, name) for name in (q, kt, v)]
        if any(s is None or len(s) < 2 for s in shapes) or \
                any(not isinstance(t, TensorType) or t.dtype != types[0].dtype for t in types) or \
                types[0].dtype is None or not types[0].dtype.is_float:  # type: ignore[union-attr]
            continue
        inputs = (q, kt, v, mask) if mask else (q, kt, v)
        fused = Node(name=softmax.name, op="FusedAttention", domain=FUSED_DOMAIN, inputs=inputs,
                     outputs=av.outputs, attrs={"scale": scale}, opset=1)
        nodes[_pos(nodes, av)] = fused
        for node in (*absorbed, softmax):
            del nodes[_pos(nodes, node)]
    return _with_nodes(graph, nodes)


def _transpose_perm(node: Node, rank: int) -> tuple[int, ...]:
    """The axis order of a Transpose node (absent perm: reversed)."""
    perm = node.attrs.get("perm")
    return tuple(int(p) for p in perm) if perm is not None else tuple(range(rank))[::-1]


def _then(first: tuple[int, ...], then: tuple[int, ...]) -> tuple[int, ...]:
    """The one perm of Transpose(first) followed by Transpose(then)."""
    return tuple(first[i] for i in then)


def absorb_attention_transposes(graph: Graph, ctx: PassContext) -> Graph:
    """Absorb the Transposes around ``refmnn::FusedAttention`` into its ``perm_*`` attributes::

        Transpose(q, p) -> FusedAttention(., KT, V) -> Transpose(., r)
            ==> FusedAttention(q, KT, V, perm_q=p, perm_y=r)

    (so for KT and V), which spares the copies that split the heads out of [B, S, heads, D]
    and merge them back (BERT: Q, V and Y; ViT: Y). The result is the same, bit for bit: a
    Transpose only moves values.

    Preconditions: the Transpose's output is read by the attention alone (or, after it, the
    attention's output by the Transpose alone, and is not a graph output); its input has a
    static shape; the composed perm keeps the operand's last axis last, so that each head's
    matrices stay plain BLAS operands with unit-stride rows (a row stride, then contiguous
    elements); the target has FusedAttention. K's Transposes move its last axis (D) off the
    end, so they stay: read in place as sgemm's transposed B, K made numba's attention slower
    than the copies it saved (2 threads, in-model, absorbing them too: ViT-Tiny's attention
    nodes +0.9 ms against -0.7 ms of copies, BERT-6's +0.5 against -0.35).
    """
    if not ctx.target_has(FUSED_DOMAIN, "FusedAttention"):
        return graph
    uses, readers, producer, nodes = _walk(graph)
    changed = False
    for attention in list(nodes):
        if attention.op != "FusedAttention" or attention.domain != FUSED_DOMAIN:
            continue
        inputs, attrs, dropped = list(attention.inputs), dict(attention.attrs), []
        for index, key in enumerate(("perm_q", "perm_kt", "perm_v")):
            pre = producer.get(inputs[index])
            shape = pre is not None and _shape(ctx, pre.inputs[0])
            if not shape or pre.op != "Transpose" or pre.domain or not _has(nodes, pre) or \
                    _sole_reader(readers, uses, inputs[index]) is not attention:
                continue
            perm = _then(_transpose_perm(pre, len(shape)),
                         tuple(attrs.get(key) or range(len(shape))))
            if perm[-1] != len(shape) - 1:
                continue
            inputs[index], attrs[key] = pre.inputs[0], perm
            dropped.append(pre)
        outputs = attention.outputs
        post = _sole_reader(readers, uses, outputs[0])
        shape = _shape(ctx, outputs[0])
        if post is not None and shape and post.op == "Transpose" and not post.domain:
            perm = _then(tuple(attrs.get("perm_y") or range(len(shape))),
                         _transpose_perm(post, len(shape)))
            if perm[-1] == len(shape) - 1:
                attrs["perm_y"], outputs = perm, post.outputs
                dropped.append(post)
        if not dropped:
            continue
        nodes[_pos(nodes, attention)] = _with(attention, inputs=tuple(inputs), outputs=outputs,
                                              attrs=attrs)
        for node in dropped:
            del nodes[_pos(nodes, node)]
        changed = True
    return _with_nodes(graph, nodes) if changed else graph
