"""Two zoo models with more moving parts, in plain PyTorch: a RAFT-like optical-flow net and an
FCOS-like detector up to its raw boxes and scores (no NMS: its output shape depends on data)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


def encoder(cout: int, norm=nn.InstanceNorm2d) -> nn.Sequential:
    """RAFT's small encoder, one layer per stride: 1/8 resolution."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 7, 2, 3),
        norm(16),
        nn.ReLU(),
        nn.Conv2d(16, 24, 3, 2, 1),
        norm(24),
        nn.ReLU(),
        nn.Conv2d(24, 32, 3, 2, 1),
        norm(32),
        nn.ReLU(),
        nn.Conv2d(32, cout, 1),
    )


class ConvGRU(nn.Module):
    """RAFT's convolutional GRU cell."""

    def __init__(self, hidden: int, inp: int):
        super().__init__()
        self.z, self.r, self.q = (nn.Conv2d(hidden + inp, hidden, 3, padding=1) for _ in range(3))

    def forward(self, h, x):
        hx = torch.cat([h, x], 1)
        z, r = torch.sigmoid(self.z(hx)), torch.sigmoid(self.r(hx))
        q = torch.tanh(self.q(torch.cat([r * h, x], 1)))
        return (1 - z) * h + z * q


class TinyRAFT(nn.Module):
    """RAFT's structure, shrunk: all-pairs correlation, a 2-level pyramid, bilinear lookups of
    radius 1 (GridSample), a ConvGRU update, `iters` refinements, bilinear x8 upsampling."""

    output_names = ("flow",)

    def __init__(self, dim: int = 32, hidden: int = 16, context: int = 16, iters: int = 2):
        super().__init__()
        self.fnet, self.cnet = (
            encoder(dim, nn.InstanceNorm2d),
            encoder(hidden + context, nn.BatchNorm2d),
        )
        self.hidden, self.context, self.iters = hidden, context, iters
        self.levels, self.radius = 2, 1
        taps = self.levels * (2 * self.radius + 1) ** 2
        self.convc = nn.Conv2d(taps, 32, 1)
        self.convf = nn.Conv2d(2, 16, 7, padding=3)
        self.motion = nn.Conv2d(48, 14, 3, padding=1)
        self.gru = ConvGRU(hidden, context + 16)
        self.flow_head = nn.Sequential(
            nn.Conv2d(hidden, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 2, 3, padding=1)
        )

    def lookup(self, pyramid, coords):
        """Bilinear samples of every pyramid level around coords: [B, taps, H, W]."""
        b, _, h, w = coords.shape
        d = torch.arange(-self.radius, self.radius + 1, dtype=coords.dtype)
        delta = torch.stack(torch.meshgrid(d, d, indexing="ij"), -1).view(1, -1, 1, 2)
        centre = coords.permute(0, 2, 3, 1).reshape(b * h * w, 1, 1, 2)
        out = []
        for i, corr in enumerate(pyramid):  # corr: [B*H*W, 1, H_i, W_i]
            xy = centre / 2**i + delta.flip(-1)  # [BHW, taps, 1, 2] as (x, y)
            hi, wi = corr.shape[-2:]
            grid = torch.cat([2 * xy[..., :1] / (wi - 1) - 1, 2 * xy[..., 1:] / (hi - 1) - 1], -1)
            sampled = F.grid_sample(corr, grid, align_corners=True)
            out.append(sampled.view(b, h, w, -1))
        return torch.cat(out, -1).permute(0, 3, 1, 2)

    def forward(self, image1, image2):
        f1, f2 = self.fnet(image1), self.fnet(image2)
        b, c, h, w = f1.shape
        corr = torch.matmul(f1.view(b, c, h * w).transpose(1, 2), f2.view(b, c, h * w))
        corr = (corr / c**0.5).reshape(b * h * w, 1, h, w)
        pyramid = [corr, F.avg_pool2d(corr, 2, 2)]
        net, inp = torch.split(self.cnet(image1), [self.hidden, self.context], 1)
        net, inp = torch.tanh(net), torch.relu(inp)
        ys, xs = torch.meshgrid(
            torch.arange(h, dtype=f1.dtype), torch.arange(w, dtype=f1.dtype), indexing="ij"
        )
        coords0 = torch.stack([xs, ys], 0)[None]
        coords1 = coords0
        for _ in range(self.iters):
            flow = coords1 - coords0
            corr_feat = F.relu(self.convc(self.lookup(pyramid, coords1)))
            motion = F.relu(self.motion(torch.cat([corr_feat, F.relu(self.convf(flow))], 1)))
            net = self.gru(net, torch.cat([inp, motion, flow], 1))
            coords1 = coords1 + self.flow_head(net)
        flow = coords1 - coords0
        return (8 * F.interpolate(flow, scale_factor=8.0, mode="bilinear", align_corners=True),)


def raft_tiny(g):
    """RAFT-like flow between two 64x64 images."""
    inputs = {
        "image1": torch.randn(1, 3, 64, 64, generator=g),
        "image2": torch.randn(1, 3, 64, 64, generator=g),
    }
    settings = {
        "feature_dim": 32,
        "hidden": 16,
        "context": 16,
        "iters": 2,
        "levels": 2,
        "radius": 1,
        "image": 64,
    }
    return TinyRAFT(), inputs, settings


class TinyFCOS(nn.Module):
    """FCOS: a backbone, a two-level FPN, a shared head (GroupNorm towers; class logits, box
    distances exp(scale * x) x stride, centerness), decoded to boxes around each location."""

    output_names = ("boxes", "scores")

    def __init__(self, classes: int = 5, c: int = 24):
        super().__init__()

        def down(a, b):
            return nn.Sequential(nn.Conv2d(a, b, 3, 2, 1, bias=False), nn.BatchNorm2d(b), nn.ReLU())

        self.c3 = nn.Sequential(down(3, 16), down(16, 24), down(24, 32))  # stride 8
        self.c4 = down(32, 48)  # stride 16
        self.lat3, self.lat4 = nn.Conv2d(32, c, 1), nn.Conv2d(48, c, 1)
        self.out3, self.out4 = nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)

        def tower():
            return nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.GroupNorm(8, c), nn.ReLU())

        self.cls_tower, self.box_tower = tower(), tower()
        self.cls, self.box, self.ctr = (nn.Conv2d(c, n, 3, padding=1) for n in (classes, 4, 1))
        self.scales = nn.Parameter(torch.tensor([1.0, 1.2]))
        self.strides = (8, 16)

    def forward(self, x):
        c3 = self.c3(x)
        c4 = self.c4(c3)
        p4 = self.lat4(c4)
        p3 = self.lat3(c3) + F.interpolate(p4, scale_factor=2.0, mode="nearest")
        boxes, scores = [], []
        for level, p in enumerate((self.out3(p3), self.out4(p4))):
            stride = self.strides[level]
            b, _, h, w = p.shape
            t = self.box_tower(p)
            cls, ctr = self.cls(self.cls_tower(p)), self.ctr(t)
            ltrb = torch.exp(self.scales[level] * self.box(t)) * stride
            ys, xs = torch.meshgrid(
                torch.arange(h, dtype=x.dtype), torch.arange(w, dtype=x.dtype), indexing="ij"
            )
            centres = (torch.stack([xs, ys], -1).view(1, h * w, 2) + 0.5) * stride
            ltrb = ltrb.flatten(2).transpose(1, 2)
            boxes.append(torch.cat([centres - ltrb[..., :2], centres + ltrb[..., 2:]], -1))
            prob = torch.sigmoid(cls) * torch.sigmoid(ctr)
            scores.append(torch.sqrt(prob).flatten(2).transpose(1, 2))
        return torch.cat(boxes, 1), torch.cat(scores, 1)


def fcos_tiny(g):
    """FCOS-like detector on a 64x64 image: raw boxes and scores."""
    settings = {
        "classes": 5,
        "fpn_channels": 24,
        "strides": [8, 16],
        "image": 64,
        "post_processing": "raw boxes [1, N, 4] and scores [1, N, classes]; no NMS",
    }
    return TinyFCOS(), {"image": torch.randn(1, 3, 64, 64, generator=g)}, settings


BUILDERS: dict[str, Callable] = {"raft_tiny": raft_tiny, "fcos_tiny": fcos_tiny}
