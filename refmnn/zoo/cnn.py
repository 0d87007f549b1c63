"""Convolutional architectures of the zoo, written in plain PyTorch.

The definitions follow torchvision (ResNet-18, MobileNetV2, SqueezeNet 1.1) module for
module, so parameter counts and exported graphs match what a user exporting the
torchvision model would get. MobileNetV1 (not in torchvision) follows the original paper
(Howard et al., 2017) with BatchNorm + ReLU after every convolution.

Every ``build_*`` function returns an eval-mode module with deterministic weights: the
global torch RNG is forked and seeded with 0 for the torchvision-style initialisation, then
:func:`refmnn.zoo._init.perturb` randomises the BatchNorm statistics and affine parameters
and the biases with its own seeded generator.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from refmnn.zoo._init import init_torchvision_cnn, perturb

__all__ = ["build_mobilenet_v1", "build_mobilenet_v2", "build_resnet18", "build_squeezenet1_1"]


def _seeded(factory: Callable[[], nn.Module], init: Callable[[nn.Module], None]) -> nn.Module:
    """Construct and initialise a module under a forked, seeded global RNG.

    Args:
        factory: Builds the module.
        init: Initialises it in place (may use the global RNG).

    Returns:
        The initialised, perturbed module in eval mode.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = factory()
        init(model)
    perturb(model)
    return model.eval()


# --------------------------------------------------------------------------- ResNet-18


class BasicBlock(nn.Module):
    """torchvision ``BasicBlock``: two 3x3 conv-BN pairs with an identity/projection skip."""

    expansion: int = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        """Create the block.

        Args:
            inplanes: Input channels.
            planes: Output channels.
            stride: Stride of the first convolution (and of the projection shortcut).
        """
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample: nn.Module | None = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the block."""
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """torchvision ``ResNet`` with :class:`BasicBlock` (ResNet-18 / 34 layouts)."""

    def __init__(self, layers: tuple[int, int, int, int], num_classes: int = 1000) -> None:
        """Create the network.

        Args:
            layers: Number of blocks in each of the four stages.
            num_classes: Classifier outputs.
        """
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        inplanes = 64
        stages: list[nn.Sequential] = []
        for i, (planes, blocks) in enumerate(zip((64, 128, 256, 512), layers)):
            stride = 1 if i == 0 else 2
            seq = [BasicBlock(inplanes, planes, stride)]
            seq += [BasicBlock(planes, planes) for _ in range(blocks - 1)]
            stages.append(nn.Sequential(*seq))
            inplanes = planes
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return class logits for an NCHW image batch."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build_resnet18() -> nn.Module:
    """ResNet-18 (torchvision layout; torchvision leaves ``fc`` at PyTorch's default init)."""
    return _seeded(lambda: ResNet((2, 2, 2, 2)), lambda m: init_torchvision_cnn(m, linear_std=None))


# ------------------------------------------------------------------------ MobileNetV2


def _make_divisible(v: float, divisor: int = 8) -> int:
    """Round ``v`` to a multiple of ``divisor`` not below 90% of ``v`` (torchvision rule)."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvBNAct(nn.Sequential):
    """Conv2d (no bias) + BatchNorm2d + activation, like torchvision ``Conv2dNormActivation``."""

    def __init__(
        self,
        in_ch: int,
        out_ch: int,
        kernel: int = 3,
        stride: int = 1,
        groups: int = 1,
        act: type[nn.Module] | None = nn.ReLU6,
    ) -> None:
        """Create the triple.

        Args:
            in_ch: Input channels.
            out_ch: Output channels.
            kernel: Square kernel size (padding keeps "same" size at stride 1).
            stride: Convolution stride.
            groups: Convolution groups (``in_ch`` for depthwise).
            act: Activation class, or ``None`` for a linear bottleneck.
        """
        layers: list[nn.Module] = [
            nn.Conv2d(in_ch, out_ch, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(out_ch),
        ]
        if act is not None:
            layers.append(act(inplace=True))
        super().__init__(*layers)


class InvertedResidual(nn.Module):
    """MobileNetV2 inverted residual: 1x1 expand, 3x3 depthwise, 1x1 linear projection."""

    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int) -> None:
        """Create the block.

        Args:
            inp: Input channels.
            oup: Output channels.
            stride: Depthwise stride (1 or 2).
            expand_ratio: Hidden-width multiplier; 1 skips the expansion conv.
        """
        super().__init__()
        hidden = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvBNAct(inp, hidden, 1))
        layers += [
            ConvBNAct(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, oup, 1, 1, 0, bias=False),
            nn.BatchNorm2d(oup),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the block."""
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    """torchvision ``MobileNetV2`` (width multiplier 1.0, round-to-8)."""

    SETTING: tuple[tuple[int, int, int, int], ...] = (
        # t, c, n, s
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    )

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0) -> None:
        """Create the network.

        Args:
            num_classes: Classifier outputs.
            width_mult: Channel width multiplier.
        """
        super().__init__()
        input_channel = _make_divisible(32 * width_mult)
        self.last_channel = _make_divisible(1280 * max(1.0, width_mult))
        features: list[nn.Module] = [ConvBNAct(3, input_channel, stride=2)]
        for t, c, n, s in self.SETTING:
            output_channel = _make_divisible(c * width_mult)
            for i in range(n):
                stride = s if i == 0 else 1
                features.append(InvertedResidual(input_channel, output_channel, stride, t))
                input_channel = output_channel
        features.append(ConvBNAct(input_channel, self.last_channel, 1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(self.last_channel, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return class logits for an NCHW image batch."""
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


def build_mobilenet_v2() -> nn.Module:
    """MobileNetV2 1.0 with torchvision initialisation, then seeded BN/bias perturbation."""
    return _seeded(MobileNetV2, init_torchvision_cnn)


# ---------------------------------------------------------------------- SqueezeNet 1.1


class Fire(nn.Module):
    """SqueezeNet Fire module: 1x1 squeeze, then parallel 1x1 / 3x3 expands, concatenated."""

    def __init__(self, inplanes: int, squeeze: int, expand1x1: int, expand3x3: int) -> None:
        """Create the module.

        Args:
            inplanes: Input channels.
            squeeze: Squeeze (bottleneck) channels.
            expand1x1: Output channels of the 1x1 expand branch.
            expand3x3: Output channels of the 3x3 expand branch.
        """
        super().__init__()
        self.squeeze = nn.Conv2d(inplanes, squeeze, 1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze, expand1x1, 1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze, expand3x3, 3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the module."""
        x = self.squeeze_activation(self.squeeze(x))
        e1 = self.expand1x1_activation(self.expand1x1(x))
        e3 = self.expand3x3_activation(self.expand3x3(x))
        return torch.cat([e1, e3], 1)


class SqueezeNet11(nn.Module):
    """torchvision ``SqueezeNet`` version 1.1 (ceil-mode max pools, conv classifier)."""

    def __init__(self, num_classes: int = 1000) -> None:
        """Create the network.

        Args:
            num_classes: Classifier outputs.
        """
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(64, 16, 64, 64),
            Fire(128, 16, 64, 64),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(128, 32, 128, 128),
            Fire(256, 32, 128, 128),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(256, 48, 192, 192),
            Fire(384, 48, 192, 192),
            Fire(384, 64, 256, 256),
            Fire(512, 64, 256, 256),
        )
        self.final_conv = nn.Conv2d(512, num_classes, 1)
        self.classifier = nn.Sequential(
            nn.Dropout(0.5), self.final_conv, nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return class scores for an NCHW image batch."""
        return torch.flatten(self.classifier(self.features(x)), 1)


def _init_squeezenet(model: nn.Module) -> None:
    """torchvision SqueezeNet init: Kaiming-uniform convs, ``N(0, 0.01)`` final conv, zero bias."""
    assert isinstance(model, SqueezeNet11)
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            if m is model.final_conv:
                nn.init.normal_(m.weight, 0.0, 0.01)
            else:
                nn.init.kaiming_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def build_squeezenet1_1() -> nn.Module:
    """SqueezeNet 1.1 with torchvision initialisation, then seeded bias perturbation."""
    return _seeded(SqueezeNet11, _init_squeezenet)


# ------------------------------------------------------------------------ MobileNetV1


class MobileNetV1(nn.Module):
    """MobileNetV1 (width 1.0): a stem conv then 13 depthwise-separable conv pairs."""

    CFG: tuple[tuple[int, int], ...] = (
        # (output channels, depthwise stride)
        (64, 1),
        (128, 2),
        (128, 1),
        (256, 2),
        (256, 1),
        (512, 2),
        (512, 1),
        (512, 1),
        (512, 1),
        (512, 1),
        (512, 1),
        (1024, 2),
        (1024, 1),
    )

    def __init__(self, num_classes: int = 1000) -> None:
        """Create the network.

        Args:
            num_classes: Classifier outputs.
        """
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, 32, 3, 2, act=nn.ReLU)]
        in_ch = 32
        for out_ch, stride in self.CFG:
            layers.append(ConvBNAct(in_ch, in_ch, 3, stride, groups=in_ch, act=nn.ReLU))
            layers.append(ConvBNAct(in_ch, out_ch, 1, act=nn.ReLU))
            in_ch = out_ch
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return class logits for an NCHW image batch."""
        return self.fc(torch.flatten(self.avgpool(self.features(x)), 1))


def build_mobilenet_v1() -> nn.Module:
    """MobileNetV1 with torchvision-style initialisation, then seeded BN/bias perturbation."""
    return _seeded(MobileNetV1, init_torchvision_cnn)
