"""Transformer architectures of the zoo: ViT-Ti/16 (timm layout) and a 6-layer BERT encoder.

Attention is written with explicit ``q @ k^T`` and ``attn @ v`` products (through the tiny
:class:`MatMul` module, so :func:`refmnn.zoo.count_flops` can hook them) followed by a
softmax, rather than ``F.scaled_dot_product_attention``; the exported ONNX therefore
contains plain ``MatMul`` / ``Softmax`` nodes. GELU is the exact erf form (``nn.GELU()``).

Weights: ``N(0, 0.02)`` for Linear / Conv / Embedding weights and the ViT class token and
position embedding (global RNG forked and seeded with 0), then
:func:`refmnn.zoo._init.perturb` gives LayerNorm affine parameters and all biases small
seeded random values.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from refmnn.zoo._init import init_transformer, perturb

__all__ = ["MatMul", "build_bert6", "build_vit_tiny"]


class MatMul(nn.Module):
    """``torch.matmul`` as a module, so forward hooks can count attention MACs."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Return ``a @ b``."""
        return torch.matmul(a, b)


# -------------------------------------------------------------------------------- ViT


class Attention(nn.Module):
    """timm ``Attention``: fused qkv projection, scaled dot-product softmax, output proj."""

    def __init__(self, dim: int, num_heads: int) -> None:
        """Create the layer.

        Args:
            dim: Embedding width.
            num_heads: Number of heads (``dim`` must be divisible by it).
        """
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.qk = MatMul()
        self.av = MatMul()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply self-attention to a ``(B, N, C)`` token sequence."""
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = self.qk(q * self.scale, k.transpose(-2, -1)).softmax(dim=-1)
        x = self.av(attn, v).transpose(1, 2).reshape(b, n, c)
        return self.proj(x)


class Mlp(nn.Module):
    """Transformer feed-forward block: Linear, exact GELU, Linear."""

    def __init__(self, dim: int, hidden: int) -> None:
        """Create the block.

        Args:
            dim: Input / output width.
            hidden: Hidden width.
        """
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the block."""
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-LN transformer block (timm ``Block``)."""

    def __init__(self, dim: int, num_heads: int, mlp_hidden: int, eps: float) -> None:
        """Create the block.

        Args:
            dim: Embedding width.
            num_heads: Attention heads.
            mlp_hidden: MLP hidden width.
            eps: LayerNorm epsilon.
        """
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = Mlp(dim, mlp_hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the block."""
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    """timm ``VisionTransformer`` with class token, learned position embedding, token pooling."""

    def __init__(
        self,
        img_size: int = 224,
        patch: int = 16,
        dim: int = 192,
        depth: int = 12,
        num_heads: int = 3,
        mlp_hidden: int = 768,
        num_classes: int = 1000,
        eps: float = 1e-6,
    ) -> None:
        """Create the network (defaults: ViT-Ti/16).

        Args:
            img_size: Square input resolution.
            patch: Patch size (the stride of the patch-embedding conv).
            dim: Embedding width.
            depth: Number of transformer blocks.
            num_heads: Attention heads.
            mlp_hidden: MLP hidden width.
            num_classes: Classifier outputs.
            eps: LayerNorm epsilon.
        """
        super().__init__()
        num_patches = (img_size // patch) ** 2
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, dim))
        self.blocks = nn.Sequential(*(Block(dim, num_heads, mlp_hidden, eps) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim, eps=eps)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return class logits for an NCHW image batch."""
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def build_vit_tiny() -> nn.Module:
    """ViT-Ti/16 for 224x224 inputs and 1000 classes, seeded weights, eval mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = VisionTransformer()
        init_transformer(model)
        nn.init.normal_(model.cls_token, 0.0, 0.02)
        nn.init.normal_(model.pos_embed, 0.0, 0.02)
    perturb(model)
    return model.eval()


# ------------------------------------------------------------------------------- BERT


class BertEmbeddings(nn.Module):
    """Word + learned position + token-type embeddings, then LayerNorm (HF ``BertEmbeddings``)."""

    def __init__(
        self, vocab: int, hidden: int, max_positions: int, type_vocab: int, eps: float
    ) -> None:
        """Create the layer.

        Args:
            vocab: Vocabulary size.
            hidden: Hidden width.
            max_positions: Number of learned positions.
            type_vocab: Number of token types.
            eps: LayerNorm epsilon.
        """
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden, padding_idx=0)
        self.position_embeddings = nn.Embedding(max_positions, hidden)
        self.token_type_embeddings = nn.Embedding(type_vocab, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=eps)
        position_ids = torch.arange(max_positions).unsqueeze(0)
        self.register_buffer("position_ids", position_ids, persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Embed ``(B, S)`` int64 token ids (all token types 0) into ``(B, S, hidden)``."""
        position_ids = self.position_ids[:, : input_ids.shape[1]]
        token_type_ids = torch.zeros_like(input_ids)
        x = (
            self.word_embeddings(input_ids)
            + self.token_type_embeddings(token_type_ids)
            + self.position_embeddings(position_ids)
        )
        return self.LayerNorm(x)


class BertSelfAttention(nn.Module):
    """HF ``BertSelfAttention`` without mask: separate q/k/v projections, softmax attention."""

    def __init__(self, hidden: int, num_heads: int) -> None:
        """Create the layer.

        Args:
            hidden: Hidden width.
            num_heads: Attention heads.
        """
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = hidden // num_heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.qk = MatMul()
        self.av = MatMul()

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, S, hidden)`` -> ``(B, heads, S, head_dim)``."""
        return x.view(x.shape[0], x.shape[1], self.num_heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply self-attention to ``(B, S, hidden)``; returns the merged head outputs."""
        q = self._split_heads(self.query(x))
        k = self._split_heads(self.key(x))
        v = self._split_heads(self.value(x))
        scores = self.qk(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        ctx = self.av(scores.softmax(dim=-1), v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.shape[0], ctx.shape[1], -1)


class BertLayer(nn.Module):
    """Post-LN BERT encoder layer (attention, Add & LN, GELU FFN, Add & LN)."""

    def __init__(self, hidden: int, num_heads: int, ffn: int, eps: float) -> None:
        """Create the layer.

        Args:
            hidden: Hidden width.
            num_heads: Attention heads.
            ffn: Feed-forward (intermediate) width.
            eps: LayerNorm epsilon.
        """
        super().__init__()
        self.attention = BertSelfAttention(hidden, num_heads)
        self.attention_output = nn.Linear(hidden, hidden)
        self.attention_norm = nn.LayerNorm(hidden, eps=eps)
        self.intermediate = nn.Linear(hidden, ffn)
        self.act = nn.GELU()
        self.output = nn.Linear(ffn, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the layer."""
        x = self.attention_norm(x + self.attention_output(self.attention(x)))
        return self.output_norm(x + self.output(self.act(self.intermediate(x))))


class BertEncoder(nn.Module):
    """BERT embeddings + encoder stack, returning the final hidden states (no pooler)."""

    def __init__(
        self,
        vocab: int = 30522,
        hidden: int = 384,
        layers: int = 6,
        num_heads: int = 12,
        ffn: int = 1536,
        max_positions: int = 512,
        type_vocab: int = 2,
        eps: float = 1e-12,
    ) -> None:
        """Create the network (defaults: the zoo's ``bert6``).

        Args:
            vocab: Vocabulary size.
            hidden: Hidden width.
            layers: Number of encoder layers.
            num_heads: Attention heads.
            ffn: Feed-forward width.
            max_positions: Number of learned positions.
            type_vocab: Number of token types.
            eps: LayerNorm epsilon.
        """
        super().__init__()
        self.embeddings = BertEmbeddings(vocab, hidden, max_positions, type_vocab, eps)
        self.layers = nn.Sequential(
            *(BertLayer(hidden, num_heads, ffn, eps) for _ in range(layers))
        )

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Map ``(B, S)`` int64 token ids to ``(B, S, hidden)`` hidden states."""
        return self.layers(self.embeddings(input_ids))


def build_bert6() -> nn.Module:
    """6-layer, 384-wide BERT encoder with seeded weights, eval mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = BertEncoder()
        init_transformer(model)
    perturb(model)
    return model.eval()
