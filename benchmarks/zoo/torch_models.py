"""Zoo models written in plain PyTorch, after torchvision's (no torchvision needed): shrunk.

Each builder returns (module, example inputs by name, settings); forward returns a tuple.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


def cbr(cin: int, cout: int, k: int = 3, s: int = 1, groups: int = 1, act=nn.ReLU, d: int = 1):
    """Conv (no bias), BatchNorm, activation (None: none)."""
    layers = [
        nn.Conv2d(cin, cout, k, s, d * (k - 1) // 2, dilation=d, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    return nn.Sequential(*layers, act()) if act else nn.Sequential(*layers)


class SqueezeExcite(nn.Module):
    """Channel attention: pool, reduce, expand, gate (MobileNetV3: hardsigmoid; EfficientNet:
    sigmoid)."""

    def __init__(self, c: int, squeezed: int, act=nn.ReLU, gate=nn.Hardsigmoid):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, squeezed, 1), nn.Conv2d(squeezed, c, 1)
        self.act, self.gate = act(), gate()

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(self.act(self.fc1(s))))


class InvertedResidual(nn.Module):
    """MBConv: expand 1x1, depthwise kxk, optional SE, project 1x1; residual when shapes match."""

    def __init__(self, cin, exp, cout, k, s, se, act, gate=nn.Hardsigmoid, fused=False):
        super().__init__()
        layers = []
        if fused:  # EfficientNetV2's fused-MBConv: one full kxk conv replaces expand + depthwise
            layers.append(cbr(cin, exp, k, s, act=act))
        else:
            if exp != cin:
                layers.append(cbr(cin, exp, 1, act=act))
            layers.append(cbr(exp, exp, k, s, groups=exp, act=act))
        if se:
            layers.append(
                SqueezeExcite(
                    exp, max(8, exp // 4), nn.ReLU if gate is nn.Hardsigmoid else act, gate
                )
            )
        layers.append(cbr(exp, cout, 1, act=None))
        self.block, self.residual = nn.Sequential(*layers), s == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.residual else self.block(x)


class Classifier(nn.Module):
    """features -> global average pool -> (hidden linear + act) -> logits."""

    output_names = ("logits",)

    def __init__(self, features: nn.Module, c: int, classes: int = 10, hidden: int = 0, act=None):
        super().__init__()
        self.features = features
        head = (
            [nn.Linear(c, hidden), act(), nn.Linear(hidden, classes)]
            if hidden
            else [nn.Linear(c, classes)]
        )
        self.head = nn.Sequential(*head)

    def forward(self, x):
        return (self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1)),)


def image(g, size=64, channels=3, frames=0):
    """One random image (or clip, with frames) batch."""
    shape = (1, channels, frames, size, size) if frames else (1, channels, size, size)
    return torch.randn(*shape, generator=g)


def mobilenet_v3(g):
    """MobileNetV3-small-like: hardswish, SE with hardsigmoid, 64x64 input."""
    hs, re = nn.Hardswish, nn.ReLU
    # (exp, out, k, stride, se, act): torchvision's mobilenet_v3_small, first 6 rows, halved
    rows = [
        (16, 8, 3, 2, True, re),
        (36, 12, 3, 2, False, re),
        (44, 12, 3, 1, False, re),
        (48, 20, 5, 2, True, hs),
        (120, 20, 5, 1, True, hs),
        (60, 24, 5, 1, True, hs),
    ]
    layers, c = [cbr(3, 8, 3, 2, act=hs)], 8
    for exp, out, k, s, se, act in rows:
        layers.append(InvertedResidual(c, exp, out, k, s, se, act))
        c = out
    layers.append(cbr(c, 144, 1, act=hs))
    model = Classifier(nn.Sequential(*layers), 144, hidden=128, act=hs)
    return model, {"image": image(g)}, {"blocks": rows_text(rows), "image": 64}


def rows_text(rows) -> list[str]:
    """Block rows as short strings for the manifest."""
    return [" ".join(getattr(v, "__name__", str(v)) for v in r) for r in rows]


def efficientnet_v2(g):
    """EfficientNetV2-like: fused-MBConv then MBConv + SE stages, 64x64 input."""
    silu = nn.SiLU
    # (fused, expand ratio, out, stride, repeats): efficientnet_v2_s's stages, narrowed
    rows = [
        (True, 1, 8, 1, 1),
        (True, 4, 16, 2, 2),
        (True, 4, 24, 2, 1),
        (False, 4, 32, 2, 2),
        (False, 4, 32, 1, 1),
    ]
    layers, c = [cbr(3, 8, 3, 2, act=silu)], 8
    for fused, ratio, out, s, reps in rows:
        for i in range(reps):
            se = not fused
            layers.append(
                InvertedResidual(
                    c, c * ratio, out, 3, s if i == 0 else 1, se, silu, nn.Sigmoid, fused
                )
            )
            c = out
    layers.append(cbr(c, 64, 1, act=silu))
    model = Classifier(nn.Sequential(*layers), 64)
    return model, {"image": image(g)}, {"stages": rows_text(rows), "image": 64}


class DenseLayer(nn.Module):
    """BN-ReLU-Conv1x1-BN-ReLU-Conv3x3, its output concatenated to its input."""

    def __init__(self, cin: int, growth: int):
        super().__init__()
        wide = 4 * growth
        self.body = nn.Sequential(
            nn.BatchNorm2d(cin),
            nn.ReLU(),
            nn.Conv2d(cin, wide, 1, bias=False),
            nn.BatchNorm2d(wide),
            nn.ReLU(),
            nn.Conv2d(wide, growth, 3, padding=1, bias=False),
        )

    def forward(self, x):
        return torch.cat([x, self.body(x)], 1)


def densenet(g):
    """DenseNet-like: three dense blocks (growth 8) with transitions, 64x64 input."""
    growth, blocks, c = 8, (2, 3, 2), 16
    layers = [
        nn.Conv2d(3, c, 7, 2, 3, bias=False),
        nn.BatchNorm2d(c),
        nn.ReLU(),
        nn.MaxPool2d(3, 2, 1),
    ]
    for i, n in enumerate(blocks):
        for _ in range(n):
            layers.append(DenseLayer(c, growth))
            c += growth
        if i < len(blocks) - 1:  # transition: halve channels and resolution
            layers += [
                nn.BatchNorm2d(c),
                nn.ReLU(),
                nn.Conv2d(c, c // 2, 1, bias=False),
                nn.AvgPool2d(2, 2),
            ]
            c //= 2
    layers += [nn.BatchNorm2d(c), nn.ReLU()]
    model = Classifier(nn.Sequential(*layers), c)
    return model, {"image": image(g)}, {"growth": growth, "blocks": list(blocks), "image": 64}


class Fire(nn.Module):
    """SqueezeNet's fire module: squeeze 1x1, then 1x1 and 3x3 expands concatenated."""

    def __init__(self, cin: int, squeeze: int, expand: int):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.e1, self.e3 = nn.Conv2d(squeeze, expand, 1), nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x):
        s = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.e1(s)), F.relu(self.e3(s))], 1)


class SqueezeNet(nn.Module):
    """squeezenet1_1's layout with quarter widths; the classifier is a 1x1 conv, then pooling."""

    output_names = ("logits",)

    def __init__(self, classes: int = 10):
        super().__init__()
        pool = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2),
            nn.ReLU(),
            pool,
            Fire(16, 4, 16),
            Fire(32, 4, 16),
            pool,
            Fire(32, 8, 32),
            Fire(64, 8, 32),
            pool,
            Fire(64, 12, 48),
            Fire(96, 16, 64),
        )
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(128, classes, 1), nn.ReLU())

    def forward(self, x):
        return (torch.flatten(F.adaptive_avg_pool2d(self.classifier(self.features(x)), 1), 1),)


def squeezenet(g):
    """SqueezeNet 1.1 layout at quarter widths, 64x64 input."""
    return SqueezeNet(), {"image": image(g)}, {"widths": "squeezenet1_1 / 4", "image": 64}


class UNet(nn.Module):
    """Three-level U-Net: ConvTranspose up on one level, bilinear Resize on the other."""

    output_names = ("logits",)  # per pixel

    def __init__(self, c: int = 8, classes: int = 2):
        super().__init__()

        def double(a, b):
            return nn.Sequential(cbr(a, b), cbr(b, b))

        self.d1, self.d2, self.d3 = double(3, c), double(c, 2 * c), double(2 * c, 4 * c)
        self.up2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, 2)
        self.u2, self.u1 = double(4 * c, 2 * c), double(3 * c, c)
        self.out = nn.Conv2d(c, classes, 1)

    def forward(self, x):
        x1 = self.d1(x)
        x2 = self.d2(F.max_pool2d(x1, 2))
        x3 = self.d3(F.max_pool2d(x2, 2))
        y = self.u2(torch.cat([self.up2(x3), x2], 1))
        y = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
        return (self.out(self.u1(torch.cat([y, x1], 1))),)


def unet(g):
    """U-Net of three levels, 2 classes per pixel of a 64x64 image."""
    return UNet(), {"image": image(g)}, {"base_channels": 8, "classes": 2, "image": 64}


class DeepLabHead(nn.Module):
    """A small backbone, then DeepLabv3's ASPP (dilated convs + image pooling), upsampled."""

    output_names = ("logits",)  # per pixel

    def __init__(self, c: int = 32, classes: int = 2):
        super().__init__()
        self.backbone = nn.Sequential(cbr(3, 16, 3, 2), cbr(16, 24, 3, 2), cbr(24, c, 3, 2))
        self.branches = nn.ModuleList([cbr(c, 16, 1)] + [cbr(c, 16, 3, d=d) for d in (2, 4)])
        self.pooled = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, 16, 1, bias=False), nn.ReLU()
        )
        self.project = cbr(64, 16, 1)
        self.classify = nn.Conv2d(16, classes, 1)

    def forward(self, x):
        size = x.shape[-2:]
        f = self.backbone(x)
        pooled = F.interpolate(
            self.pooled(f), size=f.shape[-2:], mode="bilinear", align_corners=False
        )
        y = self.project(torch.cat([b(f) for b in self.branches] + [pooled], 1))
        return (F.interpolate(self.classify(y), size=size, mode="bilinear", align_corners=False),)


def deeplab_head(g):
    """DeepLabv3-like ASPP head on a stride-8 backbone, 2 classes, 64x64 image."""
    return DeepLabHead(), {"image": image(g)}, {"dilations": [2, 4], "classes": 2, "image": 64}


class Conv2Plus1D(nn.Sequential):
    """R(2+1)D's factorised 3-D conv: spatial (1,3,3), BN, ReLU, temporal (3,1,1)."""

    def __init__(self, cin: int, cout: int, mid: int, stride: int = 1):
        super().__init__(
            nn.Conv3d(cin, mid, (1, 3, 3), (1, stride, stride), (0, 1, 1), bias=False),
            nn.BatchNorm3d(mid),
            nn.ReLU(),
            nn.Conv3d(mid, cout, (3, 1, 1), (stride, 1, 1), (1, 0, 0), bias=False),
        )


class Block3d(nn.Module):
    """A basic residual block of two (2+1)D convs."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(
            Conv2Plus1D(cin, cout, cout, stride),
            nn.BatchNorm3d(cout),
            nn.ReLU(),
            Conv2Plus1D(cout, cout, cout),
            nn.BatchNorm3d(cout),
        )
        self.down = (
            nn.Sequential(nn.Conv3d(cin, cout, 1, stride, bias=False), nn.BatchNorm3d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x):
        return F.relu(self.body(x) + self.down(x))


class R2Plus1D(nn.Module):
    """torchvision's r2plus1d_18 layout with one block per stage and narrow widths."""

    output_names = ("logits",)

    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv3d(3, 16, (1, 7, 7), (1, 2, 2), (0, 3, 3), bias=False),
            nn.BatchNorm3d(16),
            nn.ReLU(),
            nn.Conv3d(16, 16, (3, 1, 1), 1, (1, 0, 0), bias=False),
            nn.BatchNorm3d(16),
            nn.ReLU(),
        )
        self.layers = nn.Sequential(Block3d(16, 16, 1), Block3d(16, 24, 2), Block3d(24, 32, 2))
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        y = F.adaptive_avg_pool3d(self.layers(self.stem(x)), 1)
        return (self.fc(torch.flatten(y, 1)),)


def r2plus1d(g):
    """R(2+1)D: factorised 3-D convs on a 4-frame 32x32 clip."""
    return R2Plus1D(), {"video": image(g, 32, frames=4)}, {"clip": [4, 32, 32]}


# Builders of the two networks with the most code (RAFT-like, detector) live in torch_flow_det.
BUILDERS: dict[str, Callable] = {
    "mobilenet_v3": mobilenet_v3,
    "efficientnet_v2": efficientnet_v2,
    "densenet": densenet,
    "squeezenet": squeezenet,
    "unet": unet,
    "deeplab_head": deeplab_head,
    "r2plus1d": r2plus1d,
}
