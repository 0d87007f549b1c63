"""Attention ops: Attention (23/24/25), RotaryEmbedding, LinearAttention, FlexAttention (preview).

Every op computes in :func:`refmnn.dtypes.compute_dtype` of its input (float16/bfloat16 in
float32) and rounds its outputs once to the dtype the spec gives them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refmnn.dtypes import DType, compute_dtype
from refmnn.graph import Dim, TensorType, ValueType
from refmnn.ops._infer import dtype_of, same_as, shape_of
from refmnn.ops._schema import Attr, InferContext, OpContext, flag, op

_SOFTMAX_PRECISIONS = {1: DType.float32, 10: DType.float16, 11: DType.float64, 16: DType.bfloat16}


# --------------------------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------------------------

def _split_heads(x: np.ndarray, num_heads: int) -> np.ndarray:
    """(B, S, H*D) -> (B, H, S, D)."""
    b, s, hidden = x.shape
    if num_heads <= 0 or hidden % num_heads:
        raise ValueError(f"hidden size {hidden} is not a multiple of num_heads {num_heads}")
    return x.reshape(b, s, num_heads, hidden // num_heads).transpose(0, 2, 1, 3)


def _merge_heads(x: np.ndarray) -> np.ndarray:
    """(B, H, S, D) -> (B, S, H*D)."""
    b, h, s, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, h * d)


def _repeat_kv(x: np.ndarray, q_heads: int) -> np.ndarray:
    """Grouped-query attention: query head h reads kv head h // (q_heads / kv_heads)."""
    kv_heads = x.shape[1]
    if q_heads == kv_heads:
        return x
    if kv_heads <= 0 or q_heads % kv_heads:
        raise ValueError(f"q_num_heads {q_heads} is not a multiple of kv_num_heads {kv_heads}")
    return np.repeat(x, q_heads // kv_heads, axis=1)


def _softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, the row's max subtracted first, as Softmax-13 computes it:
    a row of scores that are all -inf (a -inf query, not a mask) gives NaN, as in onnxruntime;
    the caller zeroes the rows the mask leaves without a key."""
    with np.errstate(invalid="ignore"):  # -inf - -inf: NaN, the formula's answer
        e = np.exp(x - np.max(x, axis=-1, keepdims=True, initial=-np.inf))
        return e / np.sum(e, axis=-1, keepdims=True)


def _mul_dims(a: Dim, b: Dim) -> Dim:
    return a * b if isinstance(a, int) and isinstance(b, int) else None


def _div_dim(a: Dim, b: Any) -> Dim:
    return a // b if isinstance(a, int) and isinstance(b, int) and b else None


def _check_heads(ctx: InferContext, heads: int, hidden: Dim, which: str) -> None:
    """A 3-D input's last dim holds ``heads`` heads of equal size: heads >= 1 dividing it."""
    if heads < 1 or (isinstance(hidden, int) and hidden % heads):
        ctx.fail(f"{which}_num_heads={heads} does not split a hidden size of {hidden} into "
                 f"heads of equal size")


def _add_dims(a: Dim, b: Dim) -> Dim:
    return a + b if isinstance(a, int) and isinstance(b, int) else None


# --------------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------------

def _structural_bias(q_len: int, kv_len: int, offset: np.ndarray, is_causal: int,
                     nonpad: np.ndarray | None, left: int, right: int, dtype: np.dtype) -> np.ndarray:
    """Additive bias (0 or -inf) of the causal frontier, sliding window and padding mask.

    ``offset`` has shape (B,) (or (1,)): the absolute position of query row 0.  Query i of batch
    b sits at p = offset[b] + i; key j is allowed iff j <= p (causal), p - left <= j (left >= 0),
    j <= p + right (right >= 0) and j < nonpad[b] (when given).  Result: (B|1, 1, q_len, kv_len).
    """
    i = np.arange(q_len).reshape(1, q_len, 1)
    j = np.arange(kv_len).reshape(1, 1, kv_len)
    p = i + offset.reshape(-1, 1, 1)                               # (B|1, q, 1)
    allowed = np.ones((offset.shape[0], q_len, kv_len), dtype=bool)
    if is_causal:
        allowed &= j <= p
    if left >= 0:
        allowed &= p - j <= left
    if right >= 0:
        allowed &= j - p <= right
    if nonpad is not None:
        allowed = allowed & (j < nonpad.reshape(-1, 1, 1))
    return np.where(allowed, 0, -np.inf).astype(dtype)[:, None]


def _attention_bias(attn_mask, past_key, nonpad_kv_seqlen, q_len: int, kv_len: int,
                    is_causal: int, left: int, right: int, work: np.dtype) -> np.ndarray:
    """The additive bias: the mask (bool -> 0/-inf, padded with -inf to kv_len) plus the
    structural causal/window/padding bias; broadcastable to (B, Hq, q_len, kv_len)."""
    bias = np.zeros((1, 1, q_len, kv_len), dtype=work)
    if attn_mask is not None:
        mask = attn_mask
        if mask.dtype == np.bool_:
            mask = np.where(mask, 0, -np.inf).astype(work)
        else:
            mask = mask.astype(work)
        pad = kv_len - mask.shape[-1]
        if pad > 0:
            mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)], constant_values=-np.inf)
        bias = bias + mask
    if nonpad_kv_seqlen is not None:
        offset = nonpad_kv_seqlen.astype(np.int64).reshape(-1) - q_len
    else:
        offset = np.array([0 if past_key is None else past_key.shape[2]], dtype=np.int64)
    if is_causal or left >= 0 or right >= 0 or nonpad_kv_seqlen is not None:
        bias = bias + _structural_bias(q_len, kv_len, offset, is_causal, nonpad_kv_seqlen,
                                       left, right, work)
    return bias


def _attention(Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen, *, scale, is_causal,
               q_num_heads, kv_num_heads, softmax_precision, softcap, qk_matmul_output_mode,
               left_window_size=-1, right_window_size=-1, ctx: OpContext):
    """The shared body of every Attention version (see :func:`attention_25`)."""
    if (past_key is None) != (past_value is None):
        raise ValueError("past_key and past_value must be given together")
    if nonpad_kv_seqlen is not None and past_key is not None:
        raise ValueError("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    if not Q.ndim == K.ndim == V.ndim or Q.ndim not in (3, 4):
        raise ValueError(f"Q, K, V must all be 3-D or all 4-D, got {Q.shape}, {K.shape}, {V.shape}")
    out_dtype, v_dtype, was_3d = Q.dtype, V.dtype, Q.ndim == 3
    work = np.result_type(compute_dtype(Q.dtype), compute_dtype(V.dtype))
    if Q.ndim == 3:
        if q_num_heads is None or kv_num_heads is None:
            raise ValueError("3-D Q/K/V need the q_num_heads and kv_num_heads attributes")
        Q, K, V = _split_heads(Q, q_num_heads), _split_heads(K, kv_num_heads), _split_heads(V, kv_num_heads)
    else:
        for given, actual, what in ((q_num_heads, Q.shape[1], "q"), (kv_num_heads, K.shape[1], "kv")):
            if given is not None and given != actual:
                raise ValueError(f"{what}_num_heads={given} contradicts the 4-D input ({actual} heads)")
    # present = past ++ new along the sequence axis, in the input dtypes (no rounding)
    present_key = K if past_key is None else np.concatenate([past_key, K], axis=2)
    present_value = V if past_value is None else np.concatenate([past_value, V], axis=2)
    _, q_heads, q_len, head_size = Q.shape
    kv_len = present_key.shape[2]

    bias = _attention_bias(attn_mask, past_key, nonpad_kv_seqlen, q_len, kv_len, is_causal,
                           left_window_size, right_window_size, work)
    sqrt_scale = np.sqrt(1.0 / np.sqrt(head_size) if scale is None else scale)
    k_all = _repeat_kv(present_key.astype(work), q_heads)
    v_all = _repeat_kv(present_value.astype(work), q_heads)
    qk = (Q.astype(work) * work.type(sqrt_scale)) @ (k_all * work.type(sqrt_scale)).swapaxes(-1, -2)
    capped = softcap * np.tanh(qk / softcap) if softcap > 0 else qk
    logits = capped + bias                                         # (B, Hq, q, kv)
    soft_dtype = work
    if softmax_precision is not None:
        if softmax_precision not in _SOFTMAX_PRECISIONS:
            raise ValueError(f"unsupported softmax_precision {softmax_precision}")
        soft_dtype = _SOFTMAX_PRECISIONS[softmax_precision].numpy
    probs = _softmax(logits.astype(soft_dtype).astype(compute_dtype(soft_dtype)))
    probs = probs.astype(soft_dtype)
    # a row whose bias is -inf everywhere has no attendable key: it is a zero row
    fully_masked = np.isneginf(np.max(bias, axis=-1, keepdims=True, initial=-np.inf))
    probs = np.where(fully_masked, 0, probs).astype(soft_dtype)
    Y = probs.astype(out_dtype).astype(work) @ v_all               # (B, Hq, q, Dv)
    Y = (_merge_heads(Y) if was_3d else Y).astype(out_dtype)
    results: list[Any] = [Y, present_key.astype(out_dtype), present_value.astype(v_dtype)]
    if ctx.output_wanted(3):
        if qk_matmul_output_mode not in (0, 1, 2, 3):
            raise ValueError(f"qk_matmul_output_mode must be 0..3, got {qk_matmul_output_mode}")
        qk_out = (qk, capped, logits, probs)[qk_matmul_output_mode]
        results.append(np.broadcast_to(qk_out, qk.shape).astype(out_dtype))
    return tuple(results[:max(ctx.num_outputs, 1)])


def _attention_infer(ctx: InferContext, q: ValueType | None, k: ValueType | None,
                     v: ValueType | None, mask: ValueType | None = None,
                     past_key: ValueType | None = None, past_value: ValueType | None = None,
                     nonpad: ValueType | None = None, **attrs: Any) -> tuple[TensorType, ...]:
    """Y: (B, Hq, Sq, Dv) or (B, Sq, Hq*Dv); present_*: (B, Hkv, P+Skv, D); qk: (B, Hq, Sq, P+Skv)."""
    qs, ks, vs = shape_of(q), shape_of(k), shape_of(v)
    t1, t2 = dtype_of(q), dtype_of(v)
    for side in ("left_window_size", "right_window_size"):
        if attrs.get(side, -1) < -1:
            ctx.fail(f"{side}={attrs[side]}: -1 (no limit) or a count >= 0")
    ps = shape_of(past_key) if past_key is not None else (None, None, 0, None)
    unknown = TensorType(t1, None)
    if qs is None or ks is None or vs is None:
        return (unknown, unknown, TensorType(t2, None), unknown)
    if not len(qs) == len(ks) == len(vs) or len(qs) not in (3, 4):
        ctx.fail(f"Q, K, V must all be 3-D or all 4-D, got ranks {len(qs)}, {len(ks)}, {len(vs)}")
    past_len = ps[2] if ps is not None else None
    if len(qs) == 4:
        batch, q_heads, q_len, head = qs
        kv_heads, kv_len, v_head = ks[1], ks[2], vs[3]
        y = (batch, q_heads, q_len, v_head)
    else:
        qh, kvh = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
        if qh is None or kvh is None:
            ctx.fail("3-D Q/K/V need the q_num_heads and kv_num_heads attributes")
        _check_heads(ctx, qh, qs[2], "q")
        _check_heads(ctx, kvh, ks[2], "kv")
        _check_heads(ctx, kvh, vs[2], "kv")
        batch, q_len, kv_len = qs[0], qs[1], ks[1]
        q_heads, kv_heads = qh, kvh
        head, v_head = _div_dim(ks[2], kvh), _div_dim(vs[2], kvh)
        y = (batch, q_len, _mul_dims(qh, v_head))
    total = _add_dims(past_len, kv_len)
    return (TensorType(t1, y), TensorType(t1, (batch, kv_heads, total, head)),
            TensorType(t2, (batch, kv_heads, total, v_head)),
            TensorType(t1, (batch, q_heads, q_len, total)))


_ATTENTION_ATTRS = (
    flag("is_causal", 0, "1: bottom-right causal mask (query i sees key j <= i + offset)"),
    Attr("kv_num_heads", "int", None, "number of K/V heads (3-D inputs only)"),
    Attr("q_num_heads", "int", None, "number of Q heads (3-D inputs only)"),
    Attr("qk_matmul_output_mode", "int", 0,
         "4th output: 0 raw scaled QK, 1 after softcap, 2 + bias, 3 softmax probabilities"),
    Attr("scale", "float", None, "scale of Q·K^T; default 1/sqrt(head_size)"),
    Attr("softcap", "float", 0.0, "if > 0, logits = softcap * tanh(logits / softcap)"),
    Attr("softmax_precision", "int", None, "ONNX dtype code the softmax is computed in"),
)
_ATTENTION_OUTPUTS = ("Y", "present_key?", "present_value?", "qk_matmul_output?")


@op("Attention", since=23, inputs=("Q", "K", "V", "attn_mask?", "past_key?", "past_value?"),
    outputs=_ATTENTION_OUTPUTS, attrs=_ATTENTION_ATTRS, infer=_attention_infer)
def attention_23(Q, K, V, attn_mask=None, past_key=None, past_value=None, *, is_causal,
                 kv_num_heads, q_num_heads, qk_matmul_output_mode, scale, softcap,
                 softmax_precision, ctx: OpContext):
    """Scaled dot-product attention, opset 23 (as :func:`attention_25` without
    ``nonpad_kv_seqlen`` and without the sliding window; the causal offset is the past length).
    """
    return _attention(Q, K, V, attn_mask, past_key, past_value, None, scale=scale,
                      is_causal=is_causal, q_num_heads=q_num_heads, kv_num_heads=kv_num_heads,
                      softmax_precision=softmax_precision, softcap=softcap,
                      qk_matmul_output_mode=qk_matmul_output_mode, ctx=ctx)


@op("Attention", since=24,
    inputs=("Q", "K", "V", "attn_mask?", "past_key?", "past_value?", "nonpad_kv_seqlen?"),
    outputs=_ATTENTION_OUTPUTS, attrs=_ATTENTION_ATTRS, infer=_attention_infer)
def attention_24(Q, K, V, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None,
                 *, is_causal, kv_num_heads, q_num_heads, qk_matmul_output_mode, scale, softcap,
                 softmax_precision, ctx: OpContext):
    """Scaled dot-product attention, opset 24: adds ``nonpad_kv_seqlen`` (external KV cache);
    otherwise as :func:`attention_25` without the sliding window."""
    return _attention(Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen, scale=scale,
                      is_causal=is_causal, q_num_heads=q_num_heads, kv_num_heads=kv_num_heads,
                      softmax_precision=softmax_precision, softcap=softcap,
                      qk_matmul_output_mode=qk_matmul_output_mode, ctx=ctx)


@op("Attention", since=25,
    inputs=("Q", "K", "V", "attn_mask?", "past_key?", "past_value?", "nonpad_kv_seqlen?"),
    outputs=_ATTENTION_OUTPUTS, infer=_attention_infer,
    attrs=_ATTENTION_ATTRS + (
        Attr("left_window_size", "int", -1, "keys at most this far left of the query (-1: any)"),
        Attr("right_window_size", "int", -1, "keys at most this far right of the query (-1: any)"),
    ))
def attention_25(Q, K, V, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None,
                 *, is_causal, kv_num_heads, q_num_heads, qk_matmul_output_mode, scale, softcap,
                 softmax_precision, left_window_size, right_window_size, ctx: OpContext):
    """Scaled dot-product attention with optional mask, KV cache, GQA, softcap and window.

    Shapes: Q (B, Hq, Sq, D) | (B, Sq, Hq*D); K (B, Hkv, Skv, D) | (B, Skv, Hkv*D);
    V (B, Hkv, Skv, Dv) | (B, Skv, Hkv*Dv); 3-D inputs are split with ``q_num_heads`` /
    ``kv_num_heads`` and Y is merged back to (B, Sq, Hq*Dv).  past_key/value (B, Hkv, P, D|Dv)
    are concatenated before K/V along the sequence axis and returned as present_key/value;
    T = P + Skv.  Query head h reads K/V head h // (Hq/Hkv) (GQA/MQA).

    Formula (s = sqrt(scale), scale defaulting to 1/sqrt(D))::

        qk     = (Q*s) @ (K*s)^T                                  # (B, Hq, Sq, T)
        capped = softcap * tanh(qk / softcap)  if softcap > 0 else qk
        bias   = mask + where(allowed, 0, -inf)
        P      = softmax(capped + bias)   (in softmax_precision if given), rows whose bias
                 is -inf everywhere set to 0 (a fully-masked query gives a zero row)
        Y      = P @ V

    ``attn_mask`` (broadcastable to (B, Hq, Sq, T); last axis may be shorter, padded with
    -inf/False): bool True = attend (False adds -inf), otherwise added to the logits.
    ``allowed``: with p = offset + i the absolute position of query i, key j needs j <= p if
    ``is_causal``, p - j <= left_window_size and j - p <= right_window_size when those are >= 0,
    and j < nonpad_kv_seqlen[b].  offset = P with a past cache, nonpad_kv_seqlen[b] - Sq with an
    external cache (it may be negative: the leading rows are then fully masked), else 0.
    The optional 4th output is qk / capped / capped + bias / P for qk_matmul_output_mode 0..3.
    Dtypes: Y, present_key and qk_matmul_output are Q's type, present_value V's type; float16 and
    bfloat16 compute in float32.
    """
    return _attention(Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen, scale=scale,
                      is_causal=is_causal, q_num_heads=q_num_heads, kv_num_heads=kv_num_heads,
                      softmax_precision=softmax_precision, softcap=softcap,
                      qk_matmul_output_mode=qk_matmul_output_mode,
                      left_window_size=left_window_size, right_window_size=right_window_size,
                      ctx=ctx)


# --------------------------------------------------------------------------------------------
# RotaryEmbedding
# --------------------------------------------------------------------------------------------

@op("RotaryEmbedding", since=23, inputs=("X", "cos_cache", "sin_cache", "position_ids?"),
    outputs=("Y",), infer=same_as(0),
    attrs=(flag("interleaved", 0, "rotate pairs (x0,x1),(x2,x3)... instead of halves"),
           Attr("num_heads", "int", None, "number of heads; required for 3-D X"),
           Attr("rotary_embedding_dim", "int", 0, "rotate only the first dims (0: all of head)")))
def rotary_embedding(X, cos_cache, sin_cache, position_ids=None, *, interleaved, num_heads,
                     rotary_embedding_dim):
    """Rotary positional embedding (RoPE).

    X: (B, H, S, D) or (B, S, H*D) with ``num_heads``.  The first R = rotary_embedding_dim (or D)
    features of each head are split into pairs (x1, x2) -- halves [:R/2], [R/2:] or, when
    ``interleaved``, even/odd features -- and rotated::

        x1' = cos * x1 - sin * x2,   x2' = sin * x1 + cos * x2

    cos/sin: ``cache[position_ids]`` when position_ids (B, S) is given (cache (max_pos, R/2)),
    else the caches themselves, (B, S, R/2).  Features past R pass through.  Y has X's shape and
    dtype; float16/bfloat16 compute in float32.
    """
    work = compute_dtype(X.dtype)
    if X.ndim == 4:
        x = X.transpose(0, 2, 1, 3)                                  # (B, S, H, D)
    elif X.ndim == 3:
        if not num_heads:
            raise ValueError("3-D input needs the num_heads attribute")
        b, s, hidden = X.shape
        if hidden % num_heads:
            raise ValueError(f"hidden size {hidden} is not a multiple of num_heads {num_heads}")
        x = X.reshape(b, s, num_heads, hidden // num_heads)
    else:
        raise ValueError(f"input must be 3-D or 4-D, got shape {X.shape}")
    x = x.astype(work)
    rot = rotary_embedding_dim or x.shape[-1]
    if rot % 2 or rot > x.shape[-1]:
        raise ValueError(f"rotary_embedding_dim {rot} must be even and <= head size {x.shape[-1]}")
    if position_ids is not None:
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
    if cos_cache.shape[-1] != rot // 2 or sin_cache.shape[-1] != rot // 2:
        raise ValueError(f"cos/sin cache last dim must be rotary_dim/2 = {rot // 2}, got "
                         f"{cos_cache.shape[-1]}, {sin_cache.shape[-1]}")
    cos = cos_cache.astype(work)[:, :, None, :]                      # (B, S, 1, R/2)
    sin = sin_cache.astype(work)[:, :, None, :]
    head, rest = x[..., :rot], x[..., rot:]
    x1, x2 = (head[..., 0::2], head[..., 1::2]) if interleaved else (head[..., :rot // 2], head[..., rot // 2:])
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:
        rotated = np.stack([real, imag], axis=-1).reshape(head.shape)
    else:
        rotated = np.concatenate([real, imag], axis=-1)
    y = np.concatenate([rotated, rest], axis=-1).astype(X.dtype)
    return y.transpose(0, 2, 1, 3) if X.ndim == 4 else y.reshape(X.shape)


# --------------------------------------------------------------------------------------------
# LinearAttention
# --------------------------------------------------------------------------------------------

def _linear_attention_infer(ctx: InferContext, q, k, v, past=None, decay=None, beta=None,
                            **attrs: Any) -> tuple[TensorType, TensorType]:
    """output: (B, T, Hq*dv); present_state: (B, Hkv, dk, dv) in past_state's (else query's) type."""
    qs, vs = shape_of(q), shape_of(v)
    hq, hkv = attrs["q_num_heads"], attrs["kv_num_heads"]
    state_dtype = dtype_of(past) if past is not None else dtype_of(q)
    if qs is None or vs is None:
        return TensorType(dtype_of(q), None), TensorType(state_dtype, None)
    _check_heads(ctx, hq, qs[2], "q")
    _check_heads(ctx, hkv, vs[2], "kv")
    dk, dv = _div_dim(qs[2], hq), _div_dim(vs[2], hkv)
    return (TensorType(dtype_of(q), (qs[0], qs[1], _mul_dims(hq, dv))),
            TensorType(state_dtype, (qs[0], hkv, dk, dv)))


@op("LinearAttention", since=27,
    inputs=("query", "key", "value", "past_state?", "decay?", "beta?"),
    outputs=("output", "present_state"), infer=_linear_attention_infer,
    attrs=(Attr("chunk_size", "int", 64, "chunking hint for fast kernels; no effect on results"),
           Attr("kv_num_heads", "int", doc="number of key/value heads"),
           Attr("q_num_heads", "int", doc="number of query heads (a multiple of kv_num_heads)"),
           Attr("scale", "float", 0.0, "output scale; 0 means 1/sqrt(d_k)"),
           Attr("update_rule", "string", "gated_delta", "linear | gated | delta | gated_delta")))
def linear_attention(query, key, value, past_state=None, decay=None, beta=None, *, chunk_size,
                     kv_num_heads, q_num_heads, scale, update_rule):
    """Recurrent linear attention over T steps, state S: (B, Hkv, dk, dv), float32 inside.

    query (B, T, Hq*dk), key (B, T, Hkv*dk), value (B, T, Hkv*dv); decay g (B, T, Hkv*dk) per key
    dim or (B, T, Hkv) per head (log space); beta (B, T, Hkv) or (B, T, 1).  Per step t::

        S = exp(g_t) * S                          (gated, gated_delta)
        v_t = beta_t * (v_t - S^T k_t)            (delta, gated_delta; S already decayed)
        S = S + k_t ⊗ v_t
        o_t = scale * q_t^T S_h                   (query head h reads kv head h // (Hq/Hkv))

    ``decay`` is required exactly for the gated rules and ``beta`` for the delta rules.
    past_state defaults to zeros.  output has query's dtype; present_state has past_state's dtype
    (query's when past_state is omitted).  scale 0 means 1/sqrt(dk).
    """
    gated, delta = update_rule in ("gated", "gated_delta"), update_rule in ("delta", "gated_delta")
    if update_rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ValueError(f"unknown update_rule {update_rule!r}")
    if gated != (decay is not None) or delta != (beta is not None):
        raise ValueError(f"update_rule {update_rule!r} needs decay: {gated}, beta: {delta}")
    if q_num_heads <= 0 or kv_num_heads <= 0 or q_num_heads % kv_num_heads:
        raise ValueError(f"q_num_heads {q_num_heads} must be a multiple of kv_num_heads {kv_num_heads}")
    f32 = np.float32
    q = _split_heads(query, q_num_heads).astype(f32)                 # (B, Hq, T, dk)
    k = _split_heads(key, kv_num_heads).astype(f32)                  # (B, Hkv, T, dk)
    v = _split_heads(value, kv_num_heads).astype(f32)                # (B, Hkv, T, dv)
    b, _, steps, dk = q.shape
    dv = v.shape[-1]
    if past_state is not None:
        if past_state.shape != (b, kv_num_heads, dk, dv):
            raise ValueError(f"past_state shape {past_state.shape} is not {(b, kv_num_heads, dk, dv)}")
        state = past_state.astype(f32)
    else:
        state = np.zeros((b, kv_num_heads, dk, dv), dtype=f32)
    if gated:
        width = decay.shape[-1]
        if width not in (kv_num_heads, kv_num_heads * dk):
            raise ValueError(f"decay last dim {width} must be kv_num_heads or kv_num_heads*d_k")
        g = _split_heads(decay, kv_num_heads).astype(f32)            # (B, Hkv, T, dk|1)
    if delta:
        bt = beta.reshape(b, steps, beta.shape[-1], 1).transpose(0, 2, 1, 3).astype(f32)
    factor = f32(scale if scale else 1.0 / np.sqrt(dk))
    group = q_num_heads // kv_num_heads
    out = np.empty((b, q_num_heads, steps, dv), dtype=f32)
    for t in range(steps):
        if gated:
            state = state * np.exp(g[:, :, t, :])[..., None]
        v_t = v[:, :, t, :]
        if delta:
            v_t = bt[:, :, t, :] * (v_t - np.einsum("bhdm,bhd->bhm", state, k[:, :, t, :]))
        state = state + k[:, :, t, :, None] * v_t[:, :, None, :]
        out[:, :, t, :] = factor * np.einsum("bhd,bhdm->bhm", q[:, :, t, :],
                                             np.repeat(state, group, axis=1))
    state_dtype = past_state.dtype if past_state is not None else query.dtype
    return _merge_heads(out).astype(query.dtype), state.astype(state_dtype)


# --------------------------------------------------------------------------------------------
# FlexAttention (ai.onnx.preview)
# --------------------------------------------------------------------------------------------

def _flex_infer(ctx: InferContext, q, k, v, **attrs: Any) -> TensorType:
    """Y: (B, Hq, Sq, Dv), Q's dtype."""
    qs, vs = shape_of(q), shape_of(v)
    if qs is None or vs is None:
        return TensorType(dtype_of(q), None)
    if len(qs) != 4 or len(vs) != 4:
        ctx.fail("FlexAttention needs rank-4 Q, K, V")
    return TensorType(dtype_of(q), (qs[0], qs[1], qs[2], vs[3]))


@op("FlexAttention", since=1, domain="ai.onnx.preview", inputs=("Q", "K", "V"),
    outputs=("Y",), infer=_flex_infer,
    attrs=(Attr("prob_mod", "graph", None, "subgraph (probs) -> probs applied after softmax"),
           Attr("scale", "float", None, "scale of Q·K^T; default 1/sqrt(head_size)"),
           Attr("score_mod", "graph", None, "subgraph (scores) -> scores applied before softmax"),
           Attr("softmax_precision", "int", None,
                "ONNX dtype code of scores/probs; default float32, or double for double inputs")))
def flex_attention(Q, K, V, *, prob_mod, scale, score_mod, softmax_precision, ctx: OpContext):
    """Attention with user subgraphs on the scores and the probabilities.

    Q (B, Hq, L, E), K (B, Hkv, S, E), V (B, Hkv, S, Ev) -> Y (B, Hq, L, Ev); query head h reads
    kv head h // (Hq/Hkv).  With s = sqrt(scale) (default scale 1/sqrt(E))::

        scores = score_mod((Q*s) @ (K*s)^T)      # in the softmax precision
        probs  = prob_mod(softmax(scores, axis=-1))
        Y      = probs @ V

    The softmax precision is ``softmax_precision`` when given, else float64 for double inputs
    and float32 otherwise; the subgraphs receive and return tensors of that type.  Y has Q's
    dtype.  A row of scores that is all -inf gives NaN, as softmax does.
    """
    if Q.ndim != 4 or K.ndim != 4 or V.ndim != 4:
        raise ValueError(f"FlexAttention needs rank-4 Q, K, V, got {Q.shape}, {K.shape}, {V.shape}")
    if K.shape[1] != V.shape[1] or K.shape[2] != V.shape[2] or K.shape[3] != Q.shape[3]:
        raise ValueError(f"incompatible shapes Q {Q.shape}, K {K.shape}, V {V.shape}")
    if softmax_precision is not None:
        if softmax_precision not in _SOFTMAX_PRECISIONS:
            raise ValueError(f"unsupported softmax_precision {softmax_precision}")
        soft = _SOFTMAX_PRECISIONS[softmax_precision].numpy
    else:
        soft = np.dtype(np.float64) if Q.dtype == np.float64 else np.dtype(np.float32)
    work = np.result_type(compute_dtype(Q.dtype), compute_dtype(soft))
    sqrt_scale = work.type(np.sqrt(1.0 / np.sqrt(Q.shape[3]) if scale is None else scale))
    k_all = _repeat_kv(K.astype(work), Q.shape[1])
    v_all = _repeat_kv(V.astype(work), Q.shape[1])
    scores = ((Q.astype(work) * sqrt_scale) @ (k_all * sqrt_scale).swapaxes(-1, -2)).astype(soft)
    if score_mod is not None:
        scores = np.asarray(ctx.run_graph(score_mod, [scores])[0]).astype(soft)
    x = scores.astype(work)
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    probs = (e / np.sum(e, axis=-1, keepdims=True)).astype(soft)
    if prob_mod is not None:
        probs = np.asarray(ctx.run_graph(prob_mod, [probs])[0]).astype(soft)
    return (probs.astype(work) @ v_all).astype(Q.dtype)


OPS = (attention_23, attention_24, attention_25, rotary_embedding, linear_attention,
       flex_attention)
