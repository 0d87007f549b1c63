"""Seeded weight-initialisation helpers shared by the zoo architectures.

The zoo builds every model with fresh, seeded weights (no downloads are possible).
Framework default initialisations leave BatchNorm running statistics at mean 0 / var 1,
affine parameters at 1 / 0 and most biases at 0, which would let an inference engine get
BatchNorm folding or bias handling wrong without any test noticing. The helpers here
therefore first apply the usual torchvision / Hugging Face initialisation and then
overwrite those "trivial" tensors with small values drawn from a dedicated, seeded
``torch.Generator``, so every such operation is numerically exercised.

This module imports torch at the top; :mod:`refmnn.zoo` only imports it lazily.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["init_torchvision_cnn", "init_transformer", "perturb"]


def init_torchvision_cnn(model: nn.Module, *, linear_std: float | None = 0.01) -> None:
    """Apply the torchvision CNN initialisation (ResNet / MobileNet style).

    Convolutions get Kaiming-normal weights (``mode="fan_out"``, ReLU gain) and zero
    bias, BatchNorm gets weight 1 / bias 0, and Linear layers get ``N(0, linear_std)``
    weights with zero bias.

    Args:
        model: Module to initialise in place. Uses the global torch RNG, which the
            caller is expected to have seeded.
        linear_std: Standard deviation for Linear weights, or ``None`` to keep PyTorch's
            default Linear initialisation (what torchvision's ResNet does).
    """
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear) and linear_std is not None:
            nn.init.normal_(m.weight, 0.0, linear_std)
            nn.init.zeros_(m.bias)


def init_transformer(model: nn.Module, *, std: float = 0.02) -> None:
    """Apply the BERT / ViT style initialisation.

    Linear, Conv2d and Embedding weights get ``N(0, std)``, biases 0, LayerNorm
    weight 1 / bias 0. Embedding rows at ``padding_idx`` are zeroed as Hugging Face does.

    Args:
        model: Module to initialise in place (global torch RNG, seeded by the caller).
        std: Standard deviation of the normal initialisation.
    """
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.normal_(m.weight, 0.0, std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, std)
            if m.padding_idx is not None:
                with torch.no_grad():
                    m.weight[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


@torch.no_grad()
def perturb(
    model: nn.Module, *, seed: int = 1, bias_std: float = 0.02, ln_std: float = 0.05
) -> None:
    """Replace trivially-initialised tensors by small seeded random values.

    * BatchNorm: ``running_mean ~ N(0, 0.1)``, ``running_var ~ U(0.5, 1.5)``,
      ``weight ~ U(0.5, 1.5)``, ``bias ~ N(0, 0.1)``.
    * LayerNorm: ``weight ~ 1 + N(0, ln_std)``, ``bias ~ N(0, ln_std)``.
    * Biases of Conv2d / Linear layers: ``N(0, bias_std)``.

    Args:
        model: Module to modify in place.
        seed: Seed of the private ``torch.Generator`` (the global RNG is not touched).
        bias_std: Standard deviation of Conv2d / Linear biases.
        ln_std: Standard deviation of the LayerNorm perturbation.
    """
    gen = torch.Generator().manual_seed(seed)

    def normal(t: torch.Tensor, mean: float, std: float) -> None:
        t.copy_(torch.randn(t.shape, generator=gen) * std + mean)

    def uniform(t: torch.Tensor, low: float, high: float) -> None:
        t.copy_(torch.rand(t.shape, generator=gen) * (high - low) + low)

    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            normal(m.running_mean, 0.0, 0.1)
            uniform(m.running_var, 0.5, 1.5)
            uniform(m.weight, 0.5, 1.5)
            normal(m.bias, 0.0, 0.1)
        elif isinstance(m, nn.LayerNorm):
            normal(m.weight, 1.0, ln_std)
            normal(m.bias, 0.0, ln_std)
        elif isinstance(m, (nn.Conv2d, nn.Linear)) and m.bias is not None:
            normal(m.bias, 0.0, bias_std)
