"""Attention (refmnn/ops/attention.py): Attention with 3-D and 4-D inputs, GQA, masks, causal,
KV cache, softcap, scale, qk output modes; RotaryEmbedding."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from refmnn_conformance.case import UNIT, OpCase, Sample, SampleContext, Tol


def attention_samples(ctx: SampleContext):
    b, hq, hk, s, kv, d = 2, 4, 2, 3, 5, 8
    q, k, v = (ctx.make((b, hq, s, d), UNIT), ctx.make((b, hq, kv, d), UNIT),
               ctx.make((b, hq, kv, d), UNIT))
    yield Sample((q, k, v), name="4d")
    yield Sample((q, ctx.make((b, hk, kv, d), UNIT), ctx.make((b, hk, kv, d), UNIT)), name="gqa_4d")
    yield Sample((ctx.make((b, s, hq * d), UNIT), ctx.make((b, kv, hk * d), UNIT),
                  ctx.make((b, kv, hk * 6), UNIT)), {"q_num_heads": hq, "kv_num_heads": hk},
                 name="3d_gqa_other_v_size")
    yield Sample((q, k, v), {"is_causal": 1}, name="causal")
    yield Sample((q, k, v, ctx.make((s, kv), UNIT)), name="float_mask")
    mask = ctx.rng.integers(0, 2, (b, 1, s, kv)).astype(bool)
    mask[..., 0] = True
    yield Sample((q, k, v, mask), name="bool_mask")
    yield Sample((q, k, v), {"scale": 0.5, "softcap": 2.0}, name="scale_softcap")
    past_k, past_v = ctx.make((b, hq, 2, d), UNIT), ctx.make((b, hq, 2, d), UNIT)
    yield Sample((q, k, v, None, past_k, past_v), {"is_causal": 1}, outputs=3, name="kv_cache")
    for mode in (0, 1, 2, 3):
        yield Sample((q, k, v, ctx.make((s, kv), UNIT), None, None), {"qk_matmul_output_mode": mode,
                                                                      "softcap": 1.5},
                     outputs=4, name=f"qk_output_mode{mode}")
    yield Sample((ctx.make((1, 2, 64, 16), UNIT), ctx.make((1, 2, 64, 16), UNIT),
                  ctx.make((1, 2, 64, 16), UNIT)), {"is_causal": 1}, name="larger_causal")


def rotary_samples(ctx: SampleContext):
    b, h, s, d = 2, 3, 4, 8
    pos = np.array([[0, 1, 2, 3], [5, 6, 7, 8]], dtype=np.int64)
    cos = ctx.make((10, d // 2), UNIT)
    sin = ctx.make((10, d // 2), UNIT)
    x = ctx.make((b, h, s, d))
    yield Sample((x, cos, sin, pos), name="4d_positions")
    yield Sample((x, cos, sin, pos), {"interleaved": 1}, name="interleaved")
    yield Sample((ctx.make((b, s, h * d)), cos, sin, pos), {"num_heads": h}, name="3d")
    yield Sample((x, ctx.make((10, 2), UNIT), ctx.make((10, 2), UNIT), pos),
                 {"rotary_embedding_dim": 4}, name="partial_rotation")
    yield Sample((x, ctx.make((b, s, d // 2), UNIT), ctx.make((b, s, d // 2), UNIT)),
                 name="no_positions_cache_per_token")


_TYPES = (DType.float32, DType.float16, DType.float64)
_TOL = {DType.float16: Tol(3e-3, 1e-3, "two matmuls and a softmax in float32, rounded once"),
        DType.float32: Tol(1e-5, 1e-6, "two matmuls and a softmax: accumulated roundings")}
CASES = (
    OpCase("Attention", dtypes=_TYPES, samples=attention_samples, tolerance=_TOL,
           tags=("attention",)),
    # RotaryEmbedding's T has no float64 (ONNX schema); bfloat16 would need its own tolerance
    OpCase("RotaryEmbedding", dtypes=_TYPES[:2], samples=rotary_samples, tolerance=_TOL,
           tags=("attention",)),
)
