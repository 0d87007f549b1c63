"""refmnn's fused ops (refmnn/ops/fused.py): FusedConv, FusedConvMaxPool, FusedMatMul, FusedGemm,
FusedAttention.

The graph passes create these ops for a backend that declares them, so a backend that does is
checked here like any ONNX op: every activation, the optional bias and residual, the broadcast
shapes the passes accept, and the attention mask forms (padding, causal, per row).
"""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import RefmnnError

from refmnn_conformance.case import UNIT, ErrorSample, OpCase, Sample, SampleContext, Tol
from refmnn_conformance.cases._common import FLOATS, prod

DOMAIN = "refmnn"

_ONE_ROUNDING = ("the reference rounds the product to {t} before the bias, residual or mask is "
                 "added, as the unfused graph does; a fused kernel may keep it in float32 and round "
                 "once. The two differ by one rounding of the intermediate -- an ulp of the "
                 "product, not of the result, which is far smaller where the bias cancels it -- "
                 "so the floor is one {t} eps of the unit-range products (then widened by sqrt(K))")
NARROW = {DType.float16: Tol(1e-3, 9.8e-4, _ONE_ROUNDING.format(t="float16")),
          DType.bfloat16: Tol(1.6e-2, 7.8e-3, _ONE_ROUNDING.format(t="bfloat16"))}

# (name, attributes) of every epilogue activation
ACTIVATIONS = (
    ("relu", {"activation": "relu"}),
    ("leaky_relu", {"activation": "leaky_relu", "activation_alpha": 0.2}),
    ("relu6", {"activation": "clip", "activation_min": 0.0, "activation_max": 6.0}),
    ("clip", {"activation": "clip", "activation_min": -0.5, "activation_max": 0.25}),
    # Clip's min above its max: every element is the max (min(max(v, lo), hi))
    ("clip_min_above_max", {"activation": "clip", "activation_min": 0.25, "activation_max": -0.5}),
    ("sigmoid", {"activation": "sigmoid"}),
    ("tanh", {"activation": "tanh"}),
    ("gelu", {"activation": "gelu"}),
    ("gelu_tanh", {"activation": "gelu_tanh"}),
)


def fused_conv_samples(ctx: SampleContext):
    x, w, b = ctx.make((2, 3, 7, 6), UNIT), ctx.make((4, 3, 3, 3), UNIT), ctx.make((4,), UNIT)
    pads = {"pads": (1, 1, 1, 1)}
    z = ctx.make((2, 4, 7, 6), UNIT)
    for name, act in ACTIVATIONS:
        yield Sample((x, w, b), {**pads, **act}, name=name)
    yield Sample((x, w, b, z), pads, name="residual")
    yield Sample((x, w, b, z), {**pads, "activation": "relu"}, name="residual_relu")
    yield Sample((x, w, None, z), {**pads, "activation": "relu"}, name="no_bias_residual")
    yield Sample((x, w, b, ctx.make((4, 1, 1), UNIT)), pads, name="per_channel_residual")
    yield Sample((x, ctx.make((6, 3, 1, 1), UNIT), ctx.make((6,), UNIT)),
                 {"strides": (2, 2), "activation": "relu"}, name="pointwise_stride2")
    dw = ctx.make((2, 6, 8, 8), UNIT)
    yield Sample((dw, ctx.make((6, 1, 3, 3), UNIT), ctx.make((6,), UNIT)),
                 {"group": 6, "pads": (1, 1, 1, 1), "activation": "clip", "activation_min": 0.0,
                  "activation_max": 6.0}, name="depthwise_relu6")
    yield Sample((dw, ctx.make((6, 1, 3, 3), UNIT), ctx.make((6,), UNIT), ctx.make((2, 6, 4, 4), UNIT)),
                 {"group": 6, "pads": (1, 1, 1, 1), "strides": (2, 2), "activation": "relu"},
                 name="depthwise_stride2_residual")


def fused_conv_errors(ctx: SampleContext):
    x, w = ctx.make((1, 3, 5, 5)), ctx.make((2, 3, 3, 3))
    yield ErrorSample(Sample((x, w, None, ctx.make((1, 5, 3, 3))), name="residual_mismatch"),
                      RefmnnError, r"residual|broadcast|shape")
    yield ErrorSample(Sample((x, w), {"activation": "swish"}, name="unknown_activation"),
                      RefmnnError, r"activation")


def _conv_k(sample: Sample) -> int:
    return max(1, prod(sample.inputs[1].shape[1:]))


def fused_conv_max_pool_samples(ctx: SampleContext):
    relu = {"activation": "relu"}
    pool = {"pool_kernel_shape": (3, 3), "pool_strides": (2, 2)}
    # stems as numba's direct_few_max_pool takes them: few input channels, 3x3 or 7x7, a 3x3
    # stride-2 pool on rows of at least 16 convolution and 8 pooled outputs
    yield Sample((ctx.make((1, 3, 40, 40), UNIT), ctx.make((8, 3, 3, 3), UNIT),
                  ctx.make((8,), UNIT)), {"strides": (2, 2), **relu, **pool, "pool_ceil_mode": 1},
                 name="squeezenet_stem")
    yield Sample((ctx.make((2, 3, 48, 48), UNIT), ctx.make((8, 3, 7, 7), UNIT),
                  ctx.make((8,), UNIT)),
                 {"strides": (2, 2), "pads": (3, 3, 3, 3), **relu, **pool,
                  "pool_pads": (1, 1, 1, 1)}, name="resnet_stem")
    yield Sample((ctx.make((1, 1, 36, 36), UNIT), ctx.make((4, 1, 3, 3), UNIT)),
                 {"pads": (1, 1, 1, 1), "activation": "clip", "activation_min": -0.5,
                  "activation_max": 0.25, **pool}, name="clip_no_bias")
    yield Sample((ctx.make((1, 4, 33, 33), UNIT), ctx.make((12, 4, 3, 3), UNIT),
                  ctx.make((12,), UNIT)), {**pool, "pool_ceil_mode": 1},
                 name="stride1_no_activation")
    # what the kernels above do not take: many channels, other pools and activations
    yield Sample((ctx.make((2, 6, 9, 8), UNIT), ctx.make((5, 6, 3, 3), UNIT),
                  ctx.make((5,), UNIT)),
                 {"pads": (1, 1, 1, 1), "activation": "sigmoid", "pool_kernel_shape": (2, 2),
                  "pool_dilations": (2, 1)}, name="dilated_pool_sigmoid")
    yield Sample((ctx.make((1, 2, 11, 11), UNIT), ctx.make((3, 2, 3, 3), UNIT),
                  ctx.make((3,), UNIT)),
                 {"strides": (2, 2), **relu, **pool, "pool_auto_pad": "SAME_UPPER"},
                 name="same_upper_pool")


def fused_conv_max_pool_errors(ctx: SampleContext):
    x, w = ctx.make((1, 3, 5, 5)), ctx.make((2, 3, 3, 3))
    yield ErrorSample(Sample((x, w), {"pool_kernel_shape": (3, 3), "activation": "swish"},
                             name="unknown_activation"), RefmnnError, r"activation")
    yield ErrorSample(Sample((x, ctx.make((2, 4, 3, 3))), {"pool_kernel_shape": (2, 2)},
                             name="channel_mismatch"), RefmnnError, r"channel|shape|group")


def fused_matmul_samples(ctx: SampleContext):
    a, b = ctx.make((2, 5, 8), UNIT), ctx.make((8, 6), UNIT)
    bias, z = ctx.make((6,), UNIT), ctx.make((2, 5, 6), UNIT)
    for name, act in ACTIVATIONS:
        yield Sample((a, b, bias), act, name=name)
    yield Sample((a, b, bias, z), name="bias_residual")
    yield Sample((a, b, None, z), {"activation": "relu"}, name="residual_relu")
    yield Sample((a, b, bias, ctx.make((5, 6), UNIT)), {"activation": "gelu"},
                 name="broadcast_residual_gelu")
    yield Sample((ctx.make((3, 4, 16), UNIT), ctx.make((3, 16, 5), UNIT), ctx.make((5,), UNIT)),
                 {"activation": "tanh"}, name="batched")
    yield Sample((ctx.make((17, 33), UNIT), ctx.make((33, 65), UNIT), ctx.make((65,), UNIT)),
                 {"activation": "relu"}, name="odd_sizes")


def fused_matmul_errors(ctx: SampleContext):
    a, b = ctx.make((2, 3)), ctx.make((3, 4))
    yield ErrorSample(Sample((a, b, None, ctx.make((2, 2, 4))), name="residual_enlarges"),
                      RefmnnError, r"residual|broadcast|rank|shape")


def _matmul_k(sample: Sample) -> int:
    return sample.inputs[0].shape[-1]


def fused_gemm_samples(ctx: SampleContext):
    a, c = ctx.make((3, 5), UNIT), ctx.make((6,), UNIT)
    for name, act in ACTIVATIONS:
        yield Sample((a, ctx.make((6, 5), UNIT), c), {"transB": 1, **act}, name=name)
    yield Sample((ctx.make((5, 3), UNIT), ctx.make((5, 6), UNIT), ctx.make((3, 6), UNIT)),
                 {"transA": 1, "alpha": 0.5, "beta": 2.0, "activation": "relu"},
                 name="transA_alpha_beta")
    yield Sample((a, ctx.make((5, 6), UNIT)), {"activation": "relu"}, name="no_c")
    yield Sample((ctx.make((1, 300), UNIT), ctx.make((700, 300), UNIT), ctx.make((700,), UNIT)),
                 {"transB": 1, "activation": "relu"}, name="one_row")  # a classifier's product


def _gemm_k(sample: Sample) -> int:
    a = sample.inputs[0]
    return a.shape[0] if sample.attrs.get("transA", 0) else a.shape[1]


# name, Q, KT, V, mask shape (None: no mask; "causal": a lower-triangular 0 / -inf mask)
ATTENTIONS = (
    ("bert_like", (1, 4, 16, 8), (1, 4, 8, 16), (1, 4, 16, 8), None),
    ("padding_mask", (2, 3, 9, 5), (2, 3, 5, 11), (2, 3, 11, 7), (2, 1, 1, 11)),
    ("causal", (2, 12, 6), (2, 6, 12), (2, 12, 6), "causal"),
    ("row_mask", (3, 10, 4), (3, 4, 13), (3, 13, 4), (3, 10, 1)),
    ("full_mask", (1, 2, 5, 4), (1, 2, 4, 6), (1, 2, 6, 3), (1, 2, 5, 6)),
    ("broadcast_batch", (2, 3, 7, 4), (1, 3, 4, 9), (3, 9, 5), (7, 9)),
    ("rank2", (6, 9), (9, 11), (11, 4), None),
    ("long_keys", (1, 2, 40, 16), (1, 2, 16, 197), (1, 2, 197, 16), None),
    ("one_key", (2, 5, 3), (2, 3, 1), (2, 1, 4), None),
)


def fused_attention_samples(ctx: SampleContext):
    for name, q, kt, v, mask in ATTENTIONS:
        inputs = [ctx.make(q, UNIT), ctx.make(kt, UNIT), ctx.make(v, UNIT)]
        if mask == "causal":
            sq, sk = q[-2], kt[-1]
            inputs.append(ctx.array(np.where(np.tril(np.ones((sq, sk), bool)), 0.0, -np.inf)))
        elif mask is not None:
            values = ctx.make(mask, UNIT)
            keep = ctx.rng.random(mask) >= 0.3
            keep[..., 0] = True  # every row keeps a key (an all -inf row is NaN, by definition)
            inputs.append(ctx.array(np.where(keep, values.astype(np.float64), -np.inf)))
        yield Sample(tuple(inputs), {"scale": 1.0 / np.sqrt(q[-1])}, name=name)
    yield Sample((ctx.make((1, 2, 8, 4), UNIT), ctx.make((1, 2, 4, 8), UNIT),
                  ctx.make((1, 2, 8, 4), UNIT)), name="unit_scale")
    yield Sample((ctx.make((1, 1, 4, 3)), ctx.make((1, 1, 3, 0)), ctx.make((1, 1, 0, 5))),
                 {"scale": 0.5}, name="no_keys")
    # the heads read from [B, S, H, D] and written back to it (the Transposes the graph pass
    # absorbs), K untransposed, and features strided (the last axes moved)
    heads = {"perm_q": (0, 2, 1, 3), "perm_v": (0, 2, 1, 3), "perm_y": (0, 2, 1, 3)}
    yield Sample((ctx.make((2, 9, 3, 4), UNIT), ctx.make((2, 3, 4, 7), UNIT),
                  ctx.make((2, 7, 3, 5), UNIT)), {"scale": 0.5, **heads}, name="heads_bshd")
    yield Sample((ctx.make((2, 3, 9, 4), UNIT), ctx.make((2, 3, 7, 4), UNIT),
                  ctx.make((2, 3, 7, 5), UNIT)), {"scale": 0.5, "perm_kt": (0, 1, 3, 2)},
                 name="keys_untransposed")
    yield Sample((ctx.make((2, 3, 4, 9), UNIT), ctx.make((2, 3, 4, 7), UNIT),
                  ctx.make((2, 3, 5, 7), UNIT)),
                 {"scale": 0.5, "perm_q": (0, 1, 3, 2), "perm_v": (0, 1, 3, 2),
                  "perm_y": (0, 1, 3, 2)}, name="features_strided")


def fused_attention_errors(ctx: SampleContext):
    q, kt, v = ctx.make((2, 4, 3)), ctx.make((2, 3, 5)), ctx.make((2, 5, 6))
    yield ErrorSample(Sample((q, ctx.make((2, 4, 5)), v), name="inner_dim_mismatch"),
                      RefmnnError, r"inner|dimension|contract|mismatch")
    yield ErrorSample(Sample((q, kt, v, ctx.make((3, 2, 4, 5))), name="mask_enlarges"),
                      RefmnnError, r"mask|broadcast|rank|shape")
    yield ErrorSample(Sample((q, kt, v), {"perm_q": (0, 0, 1)}, name="perm_not_a_permutation"),
                      RefmnnError, r"perm_q|permutation")


def _attention_k(sample: Sample) -> int:
    """Terms of the scores' sums (D) plus of the outputs' (Sk), through the perms."""
    q, kt = sample.inputs[0].shape, sample.inputs[1].shape
    perm_q, perm_kt = (sample.attrs.get(key) or range(len(shape))
                       for key, shape in (("perm_q", q), ("perm_kt", kt)))
    return q[list(perm_q)[-1]] + kt[list(perm_kt)[-1]]


CASES = (
    OpCase("FusedConv", domain=DOMAIN, opset=1, dtypes=FLOATS, samples=fused_conv_samples,
           errors=fused_conv_errors, accumulates=_conv_k, tolerance=NARROW,
           tags=("accumulates", "fused")),
    OpCase("FusedConv", domain=DOMAIN, opset=1, dtypes=(DType.float32,),
           samples=fused_conv_samples, accumulates=_conv_k, tolerance=NARROW,
           tags=("accumulates", "fused"), variant="constant_weights", constants=(1, 2)),
    OpCase("FusedConvMaxPool", domain=DOMAIN, opset=1, dtypes=FLOATS,
           samples=fused_conv_max_pool_samples, errors=fused_conv_max_pool_errors,
           accumulates=_conv_k, tolerance=NARROW, tags=("accumulates", "fused")),
    OpCase("FusedMatMul", domain=DOMAIN, opset=1, dtypes=FLOATS, samples=fused_matmul_samples,
           errors=fused_matmul_errors, accumulates=_matmul_k, tolerance=NARROW,
           tags=("accumulates", "fused")),
    OpCase("FusedMatMul", domain=DOMAIN, opset=1, dtypes=(DType.float32,),
           samples=fused_matmul_samples, accumulates=_matmul_k, tolerance=NARROW,
           tags=("accumulates", "fused"), variant="constant_weights", constants=(1, 2)),
    OpCase("FusedGemm", domain=DOMAIN, opset=1, dtypes=FLOATS, samples=fused_gemm_samples,
           accumulates=_gemm_k, tolerance=NARROW, tags=("accumulates", "fused")),
    OpCase("FusedAttention", domain=DOMAIN, opset=1, dtypes=FLOATS,
           samples=fused_attention_samples, errors=fused_attention_errors,
           accumulates=_attention_k, tolerance=NARROW, tags=("accumulates", "fused")),
)
