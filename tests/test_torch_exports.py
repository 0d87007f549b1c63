"""Building blocks as users export them from PyTorch, beyond the zoo: each small module is
exported by both of torch's exporters (TorchScript at opset 17; dynamo at opset 18, and at 23
for the blocks that opset writes as single ops: Attention, RMSNormalization, Gelu) and run on
the reference, whose outputs must match PyTorch's own (eager, the model the user converted):
relative L2 at most 1e-5, integers and booleans exact. Every export also runs on numba and
opencl (where they run here), which must match the reference the same way. Two exports with
symbolic dims (a scripted loop with a branch; the encoder and decoder with dynamic batch and
lengths) run at four shapes each, in turn on one Session, on all three, against PyTorch.

Two things PyTorch users meet are left out on purpose, because the ONNX model itself means
something else than the module (refmnn runs what the model says; onnxruntime agrees with it):
TorchScript exports integer ``//`` as Div, which truncates, and ``interpolate(scale_factor=s,
align_corners=True)`` where in * s is not whole (see test_reference_oracles.py).
"""

from __future__ import annotations

import io

import numpy as np
import pytest

import refmnn
from refmnn.demo import rel_l2
from tests.helpers import require_backend

torch = pytest.importorskip("torch", reason="the modules are built with torch: "
                            "pip install torch==2.13.0")
nn, F = torch.nn, torch.nn.functional


class Blocks(nn.Module):
    """Convolutions of every rank, dilated depthwise 'same', BatchNorm, PReLU, activations."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv1d(4, 6, 5, padding=2)
        self.c3 = nn.Conv3d(2, 3, 3, padding=1, stride=(1, 2, 2))
        self.dw = nn.Conv2d(6, 6, 3, padding="same", dilation=2, groups=6)
        self.bn, self.prelu = nn.BatchNorm2d(6), nn.PReLU(6)
        self.up = nn.ConvTranspose2d(6, 4, 4, stride=2, padding=1)
        self.gn, self.shuffle = nn.GroupNorm(2, 4), nn.PixelShuffle(2)

    def forward(self, a, b, c):
        y = self.prelu(self.bn(self.dw(c)))
        return (F.relu6(self.c1(a)), F.elu(self.c3(b)), y, F.hardsigmoid(c), F.leaky_relu(c, 0.2),
                self.shuffle(F.silu(self.gn(self.up(y)))), F.hardswish(c), F.mish(c))


class Pools(nn.Module):
    def forward(self, x):
        return (F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
                F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), F.lp_pool2d(x, 2, 2),
                F.adaptive_avg_pool2d(x, (1, 4)), F.unfold(x, 3, padding=1, stride=2),
                F.pixel_unshuffle(x[..., :10, :10], 2))


class Resample(nn.Module):
    def forward(self, x, grid):
        h, w = x.shape[-2:]
        return (F.interpolate(x, scale_factor=2, mode="bilinear"),
                F.interpolate(x, size=(13, 9), mode="nearest"),
                F.interpolate(x, size=(h * 2, w + 3), mode="bicubic", align_corners=True),
                F.grid_sample(x, grid, mode="bilinear", align_corners=False),
                F.grid_sample(x, grid, mode="nearest", padding_mode="border", align_corners=True),
                F.pad(x, (1, 2, 2, 1), mode="reflect"), F.pad(x, (2, 0, 1, 1), mode="replicate"),
                F.pad(x, (1, 1, 2, 0), mode="circular"), F.pad(x, (1, 1, 1, 1), value=3.0))


class Indexing(nn.Module):
    def forward(self, x, index):
        return (x.masked_fill(x > 0.5, -1.0)[:, 1::2, ::3], x.index_select(1, index),
                x.flip(-1).roll(2, 1), x.tril(1), x.triu(-1), x.argmax(-1),
                x.var(1, keepdim=True), x.std(-1), torch.logsumexp(x, -1), torch.nonzero(x > 0.3),
                x[:1].expand(3, -1, -1).sum(0), x.repeat(1, 2, 1), x.chunk(2, dim=1)[1],
                x.norm(dim=-1), torch.topk(x, 3, dim=-1)[1], torch.cumsum(x, 1),
                torch.einsum("bij,bkj->bik", x, x), torch.where(x > 0.2, x, x.exp() - 1))


class Norms(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.instance = nn.InstanceNorm2d(3, affine=True)
        self.layer = nn.LayerNorm([5, 7])

    def forward(self, x):
        return (self.instance(x), self.layer(x), F.normalize(x, dim=1), F.softplus(x),
                F.gelu(x, approximate="tanh"), torch.round(x * 3), torch.remainder(x, 0.3),
                torch.fmod(x, 0.3), (x.half() * 2).float(), (x > 0).float())


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(16, 32, 2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(64, 8, batch_first=True)
        self.cell = nn.LSTMCell(16, 12)
        self.rnn = nn.RNN(16, 4, nonlinearity="relu", batch_first=True)

    def forward(self, x):
        z, h = self.gru(self.lstm(x)[0])
        return (z, h, *self.cell(x[:, 0]), *self.rnn(x))


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoderLayer(64, 4, 96, batch_first=True)

    def forward(self, x, memory):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.decoder(self.encoder(x), memory, tgt_mask=mask)


class Heads(nn.Module):
    """Multi-head attention with a padding mask, an embedding, batched products."""

    def __init__(self) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(32, 4, batch_first=True)
        self.embed = nn.Embedding(100, 32)

    def forward(self, q, tokens, pad, a, b, c):
        k = self.embed(tokens)
        return (*self.mha(q, k, k, key_padding_mask=pad), torch.bmm(a, b),
                torch.baddbmm(c, a, b, beta=0.5, alpha=2.0), torch.addmm(c[0], a[0], b[0]))


class Decoding(nn.Module):
    """What a decoder-only LM is made of: RMSNorm, rotary embeddings, grouped-query causal
    attention with a float mask, a bias-free LayerNorm and torch.cond."""

    def __init__(self) -> None:
        super().__init__()
        self.rms = nn.RMSNorm(16, eps=1e-3)
        self.norm = nn.LayerNorm(16, bias=False)

    def forward(self, q, k, v, mask):
        half = q.shape[-1] // 2
        angle = torch.arange(q.shape[2], dtype=torch.float32)[:, None] / (
            10000 ** (torch.arange(half, dtype=torch.float32) / half))
        cos, sin = angle.cos(), angle.sin()
        q1, q2 = q[..., :half], q[..., half:]
        q = torch.cat([q1 * cos - q2 * sin, q1 * sin + q2 * cos], -1)
        y = F.scaled_dot_product_attention(self.rms(q), k, v, attn_mask=mask, enable_gqa=True)
        z = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, scale=0.3)
        w = torch.cond(y.sum() > 0, lambda t: t.sin() * 2, lambda t: t.cos() - 1, (self.norm(z),))
        return y, z, w


class Accumulate(nn.Module):
    """A data-dependent loop with a branch, as torch.jit.script exports it (Loop holding If)."""

    def forward(self, x):
        total = torch.zeros_like(x[0])
        for i in range(x.shape[0]):
            if x[i].sum() > 0:
                total = total + x[i] * i
            else:
                total = total - x[i]
        return total


def _inputs(name: str) -> tuple:
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g)

    return {
        "blocks": lambda: (randn(2, 4, 11), randn(1, 2, 5, 8, 9), randn(1, 6, 9, 10)),
        "pools": lambda: (randn(1, 3, 11, 12),),
        "resample": lambda: (randn(1, 3, 6, 5), torch.rand(1, 5, 6, 2, generator=g) * 2.4 - 1.2),
        "indexing": lambda: (torch.rand(2, 6, 7, generator=g), torch.tensor([0, 3, 5, 3])),
        "norms": lambda: (randn(2, 3, 5, 7),),
        "recurrent": lambda: (randn(2, 5, 16),),
        "encoder": lambda: (randn(2, 9, 64), randn(2, 4, 64)),
        "heads": lambda: (randn(2, 5, 32), torch.randint(0, 100, (2, 7), generator=g),
                          torch.tensor([[False] * 5 + [True] * 2, [False] * 7]),
                          randn(3, 4, 5), randn(3, 5, 6), randn(3, 4, 6)),
        "decoding": lambda: (randn(2, 8, 6, 16), randn(2, 2, 9, 16), randn(2, 2, 9, 16),
                             randn(6, 9)),
    }[name]()


MODULES = {"blocks": Blocks, "pools": Pools, "resample": Resample, "indexing": Indexing,
           "norms": Norms, "recurrent": Recurrent, "encoder": Encoder, "heads": Heads,
           "decoding": Decoding}
"""Name -> module class; ``_inputs(name)`` draws its seeded inputs."""

EXPORTS = [(name, "torchscript", 17) for name in MODULES if name != "decoding"] + [
    (name, "dynamo", 18) for name in MODULES] + [
    (name, "dynamo", 23) for name in ("norms", "encoder", "decoding")]
"""(module, exporter, opset). torch.cond and enable_gqa have no TorchScript export."""


def _flat(value) -> list[np.ndarray]:
    if isinstance(value, (tuple, list)):
        return [array for item in value for array in _flat(item)]
    return [value.detach().numpy()]


@pytest.fixture(scope="module", params=EXPORTS, ids=[f"{n}-{e}{o}" for n, e, o in EXPORTS])
def exported(request, tmp_path_factory):
    """(name, ONNX bytes, feeds, PyTorch's outputs) of one module as one exporter writes it."""
    name, exporter, opset = request.param
    if exporter == "dynamo":
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript: "
                            "pip install onnxscript")
    torch.manual_seed(0)
    module = MODULES[name]().eval()
    args = _inputs(name)
    with torch.no_grad():
        want = _flat(module(*args))
    if exporter == "dynamo":
        path = tmp_path_factory.mktemp(name) / f"{name}.onnx"
        torch.onnx.export(module, args, str(path), dynamo=True, opset_version=opset,
                          external_data=False, verbose=False)
        model = path.read_bytes()
    else:
        buffer = io.BytesIO()
        torch.onnx.export(module, args, buffer, dynamo=False, opset_version=opset)
        model = buffer.getvalue()
    session = refmnn.Session(model)
    feeds = {value.name: arg.numpy() for value, arg in zip(session.graph.inputs, args,
                                                          strict=True)}
    return name, model, feeds, want


def _assert_close(got: dict[str, np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want), what
    for (key, g), w in zip(got.items(), want, strict=True):
        assert g.shape == w.shape, f"{what} {key}: shape {g.shape} vs {w.shape}"
        if w.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w, err_msg=f"{what} {key}")
        else:
            assert g.dtype == w.dtype, f"{what} {key}: {g.dtype} vs {w.dtype}"
            assert rel_l2(g, w) <= 1e-5, f"{what} {key}: relative L2 {rel_l2(g, w):.2e}"


def test_reference_matches_pytorch(exported):
    name, model, feeds, want = exported
    _assert_close(refmnn.Session(model).run(feeds), want, f"{name} on the reference")


@pytest.mark.parametrize("backend", ["numba", "opencl"])
def test_backend_matches_the_reference(exported, backend):
    name, model, feeds, _ = exported
    require_backend(backend)
    want = list(refmnn.Session(model).run(feeds).values())
    _assert_close(refmnn.Session(model, backends=(backend,)).run(feeds), want,
                  f"{name} on {backend}")


@pytest.fixture(scope="module")
def dynamic_exports(tmp_path_factory):
    """Exports with symbolic dims: the scripted loop (TorchScript, its trip count the first
    dim) and the Transformer encoder and decoder (dynamo, batch and both lengths dynamic)."""
    torch.manual_seed(0)
    loop = torch.jit.script(Accumulate())
    buffer = io.BytesIO()
    torch.onnx.export(loop, (torch.randn(5, 3, 4),), buffer, dynamo=False, opset_version=17,
                      input_names=["x"], dynamic_axes={"x": {0: "n"}})
    exports = {"accumulate": (Accumulate(), buffer.getvalue())}
    pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    encoder = Encoder().eval()
    batch, length, memory = (torch.export.Dim(n, min=1, max=64) for n in ("b", "t", "m"))
    path = tmp_path_factory.mktemp("encoder") / "encoder.onnx"
    torch.onnx.export(encoder, _inputs("encoder"), str(path), dynamo=True, external_data=False,
                      dynamic_shapes=({0: batch, 1: length}, {0: batch, 1: memory}))
    exports["encoder"] = (encoder, path.read_bytes())
    return exports


SIZES = {"accumulate": [((5, 3, 4),), ((1, 3, 4),), ((9, 3, 4),), ((5, 3, 4),)],
         "encoder": [((2, 9, 64), (2, 4, 64)), ((1, 2, 64), (1, 7, 64)),
                     ((3, 17, 64), (3, 1, 64)), ((2, 9, 64), (2, 4, 64))]}
"""Input shapes each dynamic export runs at, in turn on one Session (the last repeats the
first: a plan made again for shapes seen before)."""


@pytest.mark.parametrize("backend", ["reference", "numba", "opencl"])
@pytest.mark.parametrize("name", list(SIZES))
def test_dynamic_exports_match_pytorch_at_every_size(dynamic_exports, name, backend):
    require_backend(backend)
    module, model = dynamic_exports[name]
    session = refmnn.Session(model, backends=(backend,))
    generator = torch.Generator().manual_seed(1)
    for shapes in SIZES[name]:
        args = tuple(torch.randn(*shape, generator=generator) for shape in shapes)
        with torch.no_grad():
            want = _flat(module(*args))
        feeds = {value.name: arg.numpy() for value, arg in zip(session.graph.inputs, args,
                                                              strict=True)}
        _assert_close(session.run(feeds), want, f"{name} at {shapes} on {backend}")
