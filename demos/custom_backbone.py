#!/usr/bin/env python
"""A user's own backbone (examples/my_backbone): ResNet18-style trunk + two-level FPN, run through
ttmodels with the weights of an equivalent torch module, compared output by output.

    python demos/custom_backbone.py [--spec examples/my_backbone/backbone.yaml]
                                    [--input-size H W] [--batch N] [--backend auto|sim|ttnn]

The torch module (``MyBackbone`` below) names its parts its own way (``body.*``, ``fpn.*``);
``KEY_MAP`` renames them to the spec's layer names. Walkthrough: docs/custom_backbones.md.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from a checkout without installing

# user key prefix -> spec key prefix (see "key_map" in docs/custom_backbones.md)
KEY_MAP = {
    "body.": "",                        # body.layer1.0.conv1.weight -> layer1.0.conv1.weight
    "fpn.inner_blocks.0.": "neck.lateral_convs.0.conv.",
    "fpn.inner_blocks.1.": "neck.lateral_convs.1.conv.",
    "fpn.layer_blocks.0.": "neck.fpn_convs.0.conv.",
    "fpn.layer_blocks.1.": "neck.fpn_convs.1.conv.",
}


def my_backbone(fpn_channels: int = 128):
    """The user's torch model: torchvision-style ResNet-18 body returning C4, C5, and an FPN."""
    import torch.nn.functional as F
    from torch import nn

    class BasicBlock(nn.Module):
        def __init__(self, cin, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU()
            self.downsample = None
            if stride != 1 or cin != planes:
                self.downsample = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False),
                                                nn.BatchNorm2d(planes))

        def forward(self, x):
            y = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            return self.relu(y + (x if self.downsample is None else self.downsample(x)))

    class Body(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU()
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            cin = 64
            for i, planes in enumerate((64, 128, 256, 512), 1):
                setattr(self, f"layer{i}", nn.Sequential(
                    BasicBlock(cin, planes, 1 if i == 1 else 2), BasicBlock(planes, planes)))
                cin = planes

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            c4 = self.layer3(self.layer2(self.layer1(x)))
            return c4, self.layer4(c4)

    class FPN(nn.Module):
        def __init__(self, out):
            super().__init__()
            self.inner_blocks = nn.ModuleList([nn.Conv2d(256, out, 1), nn.Conv2d(512, out, 1)])
            self.layer_blocks = nn.ModuleList([nn.Conv2d(out, out, 3, padding=1),
                                               nn.Conv2d(out, out, 3, padding=1)])

        def forward(self, c4, c5):
            top = self.inner_blocks[1](c5)
            merged = self.inner_blocks[0](c4) + F.interpolate(top, size=c4.shape[-2:],
                                                              mode="nearest")
            return self.layer_blocks[0](merged), self.layer_blocks[1](top)

    class MyBackbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = Body()
            self.fpn = FPN(fpn_channels)

        def forward(self, x):
            p4, p5 = self.fpn(*self.body(x))
            return {"p4": p4, "p5": p5}

    return MyBackbone().eval()


def _user_key(spec_key: str) -> str:
    for up, sp in sorted(KEY_MAP.items(), key=lambda kv: -len(kv[1])):
        if spec_key.startswith(sp):
            return up + spec_key[len(sp):]
    raise KeyError(spec_key)


def pcc(a, b) -> float:
    import torch
    x = a.detach().reshape(-1).to(torch.float64)
    y = b.detach().reshape(-1).to(torch.float64)
    x, y = x - x.mean(), y - y.mean()
    den = float(x.norm() * y.norm())
    return float(x @ y) / den if den else float(torch.equal(x, y))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(REPO / "examples" / "my_backbone" / "backbone.yaml"))
    ap.add_argument("--input-size", type=int, nargs=2, default=(128, 128), metavar=("H", "W"))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--backend", default="auto", choices=("auto", "sim", "ttnn"))
    args = ap.parse_args(argv)
    size = tuple(args.input_size)

    import ttmodels

    try:
        ttmodels.register("my_backbone", Path(args.spec))
        print(f"registered my_backbone -> {args.spec}")
        plan = ttmodels.plan("my_backbone", batch_size=args.batch, input_size=size)
        print(f"plan: {len(plan.graph.nodes)} layers, {len(plan.adapters)} adapters, "
              f"outputs {plan.graph.outputs}")

        import torch
        from ttmodels.weights import random_state_dict

        # No trained checkpoint offline: fill the user's module with seeded, BatchNorm-calibrated
        # random weights (under the user's own key names). With a trained model, skip this.
        module = my_backbone()
        sd = random_state_dict(plan.graph, seed=0)
        module.load_state_dict({_user_key(k): v for k, v in sd.items()}, strict=False)

        t0 = time.perf_counter()
        model = ttmodels.build("my_backbone", weights=module, key_map=KEY_MAP,
                               backend=args.backend, batch_size=args.batch, input_size=size)
        print(f"built on {model.backend_name} in {time.perf_counter() - t0:.1f} s; "
              f"weights: {model.weights_info}")
        x = torch.randn(args.batch, 3, *size, generator=torch.Generator().manual_seed(0))
        t0 = time.perf_counter()
        outputs = model.run(x)
        print(f"ran in {time.perf_counter() - t0:.1f} s")
    except ttmodels.Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    with torch.no_grad():
        ref = module(x)
    worst = 1.0
    for name, y in outputs.items():
        p = pcc(y, ref[name])
        worst = min(worst, p)
        print(f"  {name}: {tuple(y.shape)}  PCC vs torch {p:.5f}")
    print("OK" if worst >= 0.99 else f"PCC below 0.99 ({worst:.5f})")
    return 0 if worst >= 0.99 else 1


if __name__ == "__main__":
    sys.exit(main())
