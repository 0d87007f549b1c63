"""Attention (23, 24, 25): 3-D and 4-D inputs, MHA/GQA/MQA head counts, bool and float masks
of broadcast shapes (shorter last axes from 24), is_causal, scale, softcap, past_key/past_value
with the present outputs, every qk_matmul_output_mode, nonpad_kv_seqlen (24+), softmax_precision
and the sliding window (25); RotaryEmbedding (23): halves or interleaved pairs, partial rotation,
caches indexed by position_ids or given per token, 3-D and 4-D inputs."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import UNIT, Sample, SampleContext, Sweep, Tol


def _mask_shape(rng: np.random.Generator, full: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``full`` (B, Hq, Sq, T): its trailing 2-4 dims, some of the
    leading ones (and now and then Sq) made 1."""
    rank = int(rng.integers(2, 5))
    dims = list(full[4 - rank:])
    for i in range(len(dims) - 1):
        if rng.random() < (0.4 if i < len(dims) - 2 else 0.15):
            dims[i] = 1
    return tuple(dims)


def _mask(ctx: SampleContext, shape: tuple[int, ...]) -> np.ndarray:
    """A bool mask (70% True) or a float mask in Q's type (values in [-1, 1], a -inf now and
    then)."""
    rng = ctx.rng
    if rng.random() < 0.5:
        return rng.random(shape) < 0.7
    mask = ctx.make(shape, UNIT)
    if rng.random() < 0.3 and mask.size:
        mask.reshape(-1)[rng.random(mask.size) < 0.2] = -np.inf
    return mask


def draw_attention(ctx: SampleContext, opset: int) -> Sample:
    """A random Attention: batch 1-2, kv heads 1-2 and q heads 1-3 times that, Sq 1-4, Skv
    1-5, head sizes 1-6 (V's apart from Q's), as 4-D tensors or 3-D with q/kv_num_heads.
    Each of these now and then: a past cache of 0-3 keys with the present outputs, or (24+) a
    nonpad_kv_seqlen in [0, Skv] per batch; a bool or float mask (from 24 its last axis may
    stop short of T, though not before the longest nonpad length); is_causal, scale,
    softcap, softmax_precision (float, double, or half for float16 inputs), the window sizes
    (25); the qk_matmul_output in a random mode (its output needs the present outputs
    before it, so it comes without nonpad_kv_seqlen)."""
    rng = ctx.rng
    batch, kv_heads = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    q_heads = kv_heads * int(rng.integers(1, 4))
    q_len, kv_len = int(rng.integers(1, 5)), int(rng.integers(1, 6))
    head, v_head = int(rng.integers(1, 7)), int(rng.integers(1, 7))
    attrs: dict[str, object] = {}
    four_d = rng.random() < 0.5
    if four_d:
        q = ctx.make((batch, q_heads, q_len, head))
        k = ctx.make((batch, kv_heads, kv_len, head))
        v = ctx.make((batch, kv_heads, kv_len, v_head))
    else:
        attrs.update(q_num_heads=q_heads, kv_num_heads=kv_heads)
        q = ctx.make((batch, q_len, q_heads * head))
        k = ctx.make((batch, kv_len, kv_heads * head))
        v = ctx.make((batch, kv_len, kv_heads * v_head))
    past_key = past_value = nonpad = None
    past = 0
    choice = rng.random()
    if choice < 0.35:
        past = int(rng.integers(0, 4))
        past_key = ctx.make((batch, kv_heads, past, head))
        past_value = ctx.make((batch, kv_heads, past, v_head))
    elif choice < 0.65 and opset >= 24:
        nonpad = rng.integers(0 if rng.random() < 0.2 else 1, kv_len + 1, batch).astype(np.int64)
    total = past + kv_len
    mask = None
    if rng.random() < 0.6:
        shape = _mask_shape(rng, (batch, q_heads, q_len, total))
        if opset >= 24 and rng.random() < 0.3:
            shortest = 1 if nonpad is None else max(1, int(nonpad.max()))
            shape = shape[:-1] + (int(rng.integers(shortest, total + 1)),)
        mask = _mask(ctx, shape)
    if rng.random() < 0.3:
        attrs["is_causal"] = int(rng.integers(0, 2))
    if rng.random() < 0.3:
        attrs["scale"] = float(rng.choice([0.1, 0.5, 1.0, 2.0]))
    if rng.random() < 0.3:
        attrs["softcap"] = float(rng.choice([0.5, 1.0, 5.0]))
    if rng.random() < 0.2:
        attrs["softmax_precision"] = int(rng.choice([1, 11] + ([10] if q.dtype == np.float16
                                                               else [])))
    if opset >= 25:
        for side in ("left_window_size", "right_window_size"):
            if rng.random() < 0.3:
                attrs[side] = int(rng.integers(-1, 4))
    outputs = 1
    if past_key is not None:
        outputs = int(rng.integers(3, 5))
    elif nonpad is None and rng.random() < 0.3:
        outputs = 4
    if outputs == 4 or rng.random() < 0.1:
        attrs["qk_matmul_output_mode"] = int(rng.integers(0, 4))
    inputs: list[np.ndarray | None] = [q, k, v, mask, past_key, past_value, nonpad]
    while inputs[-1] is None:
        inputs.pop()
    return Sample(tuple(inputs), attrs, outputs=outputs)


def draw_rotary_embedding(ctx: SampleContext, opset: int) -> Sample:
    """A random RotaryEmbedding: X (B, H, S, D) or (B, S, H * D) with num_heads, batch 1-2,
    1-3 heads, S 1-4, D even in [2, 8]; rotary_embedding_dim even in [2, D] half the time (0 or
    absent: the whole head); interleaved 0, 1 or absent; caches (max_pos, R/2) indexed by
    position_ids (B, S) in [0, max_pos), or (B, S, R/2) without them."""
    rng = ctx.rng
    batch, heads, seq = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 5))
    head = 2 * int(rng.integers(1, 5))
    attrs: dict[str, object] = {}
    if rng.random() < 0.5:
        x = ctx.make((batch, heads, seq, head))
        if rng.random() < 0.2:
            attrs["num_heads"] = heads
    else:
        x = ctx.make((batch, seq, heads * head))
        attrs["num_heads"] = heads
    rot = head
    if rng.random() < 0.5:
        rot = 2 * int(rng.integers(1, head // 2 + 1))
        attrs["rotary_embedding_dim"] = rot
    elif rng.random() < 0.3:
        attrs["rotary_embedding_dim"] = 0
    if rng.random() < 0.7:
        attrs["interleaved"] = int(rng.integers(0, 2))
    if rng.random() < 0.6:
        positions = seq + int(rng.integers(0, 5))
        ids = rng.integers(0, positions, (batch, seq)).astype(np.int64)
        cos, sin = (ctx.make((positions, rot // 2), UNIT) for _ in range(2))
        return Sample((x, cos, sin, ids), attrs)
    cos, sin = (ctx.make((batch, seq, rot // 2), UNIT) for _ in range(2))
    return Sample((x, cos, sin), attrs)


def _masks_a_key(sample: Sample) -> bool:
    """Whether the sample's bias holds a -inf: a bool mask with a False, a float mask with
    -inf, is_causal, a window, or a mask shorter than the keys."""
    inputs, attrs = sample.inputs, sample.attrs
    mask = inputs[3] if len(inputs) > 3 else None
    if mask is not None and (not mask.all() if mask.dtype == np.bool_ else
                             np.isneginf(mask).any()):
        return True
    return bool(attrs.get("is_causal") or attrs.get("left_window_size", -1) >= 0
                or attrs.get("right_window_size", -1) >= 0)


def _lengths(sample: Sample) -> tuple[int, int]:
    """(Sq, Skv) of the sample's Q and K."""
    q, k = sample.inputs[0], sample.inputs[1]
    return (q.shape[2], k.shape[2]) if q.ndim == 4 else (q.shape[1], k.shape[1])


def known_attention(sample: Sample, opset: int, peer: str) -> str | None:
    """Attention: onnxruntime's causal frontier for one query after a past cache, its mode-2
    output's masked scores, its double softmax_precision; onnx.reference's mode 0 with softcap
    and its causal frontier under a mask broadcast along Sq."""
    inputs, attrs = sample.inputs, sample.attrs
    q = inputs[0]
    mask = inputs[3] if len(inputs) > 3 else None
    past = inputs[4] if len(inputs) > 4 else None
    q_len, kv_len = _lengths(sample)
    causal = bool(attrs.get("is_causal"))
    mode = attrs.get("qk_matmul_output_mode", 0)
    if peer == "onnx.reference":
        if sample.outputs == 4 and mode == 0 and attrs.get("softcap", 0.0) > 0:
            return ("onnx.reference 1.23.2 returns the softcapped scores in mode 0; the spec: "
                    "'If set to 0, qk_matmul_output is the output of qk matmul' (mode 1 is "
                    "'after the softcap'); tests/test_reference_oracles.py::"
                    "test_attention_qk_output_mode_0_is_the_product_before_softcap")
        if causal and mask is not None and mask.ndim >= 2 and mask.shape[-2] == 1 < q_len:
            return ("onnx.reference 1.23.2 sizes the causal mask from the attn_mask's own last "
                    "two dims (q_sequence_length, kv = base.shape[-2:] in _apply_causal), so a "
                    "mask broadcast along Sq (size 1) gets one causal row, query 0's, for every "
                    "query; the spec: 'query i attends key j iff j <= i + offset' for each i")
        return None
    if causal and past is not None and q_len == 1 < kv_len and q.dtype != np.float64:
        return ("onnxruntime 1.32 (float and float16) lets a single query after a past cache "
                "attend every present key (offset past + kv_len - 1, as if it were the last "
                "token); the spec: 'query i attends key j iff j <= i + past_sequence_length' "
                "(24+: 'offset = past_sequence_length when past_key is provided'), as the "
                "reference, onnx.reference and onnxruntime's own double kernel compute")
    if sample.outputs == 4 and mode == 2 and _masks_a_key(sample):
        return ("onnxruntime 1.32's mode-2 qk_matmul_output holds the lowest float "
                "(-3.40282347e+38) where a key is masked; the spec's bias there is -inf ('its "
                "disallowed positions contribute -inf to the bias') and mode 2 'includes the "
                "attention mask', as the reference and onnx.reference give")
    if q.dtype == np.float64 and attrs.get("softmax_precision") == 1:
        return ("onnxruntime 1.32 ignores softmax_precision = 1 (float) for double inputs and "
                "computes the softmax in double; the spec: 'The floating-point precision used "
                "in softmax computation', so the reference rounds to float32 there (as "
                "onnx.reference)")
    return None


_TOL = {DType.float16: Tol(3e-3, 1e-3, "two matmuls and a softmax in float32, rounded once "
                                       "(the conformance case's)"),
        DType.float32: Tol(1e-5, 1e-6, "two matmuls and a softmax: accumulated roundings (the "
                                       "conformance case's)")}
_ATTENTION_TOL = {**_TOL, DType.float16: Tol(
    5e-3, 5e-3, "the spec's graph rounds Q * sqrt(scale), K * sqrt(scale), QK, the softcap and "
    "the softmax each to float16 (T1), onnxruntime does much of that, the reference rounds once: "
    "a head-size dot product of standard normal terms scaled up to 2 cancels, leaving an absolute "
    "error of a few float16 ulps of its terms rather than of the result"),
    DType.float64: Tol(1e-7, 5e-7, "onnxruntime 1.32's double Attention is up to ~2.5e-7 off "
                                   "(absolute, on outputs of magnitude ~1) where the reference "
                                   "and onnx.reference agree to the last bit; the floor takes it")}

SWEEPS = (
    Sweep("Attention", (23, 24, 25), draw_attention,
          dtypes=(DType.float32, DType.float16, DType.float64), known=known_attention,
          tolerance=_ATTENTION_TOL),
    Sweep("RotaryEmbedding", (23,), draw_rotary_embedding,
          dtypes=(DType.float32, DType.float16), tolerance=_TOL),
)
