#!/usr/bin/env python
"""Classify an image with ResNet50 through ttmodels (sim backend here, ttnn on a card).

    python demos/resnet50.py --image x.jpg [--weights random|pretrained|FILE]
                             [--backend auto|sim|ttnn] [--batch N] [--topk K]

Without --image it uses the sample photo that ships with matplotlib.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from a checkout without installing


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", help="image file (default: matplotlib's sample photo)")
    ap.add_argument("--weights", default="auto",
                    help="random | pretrained | FILE (.safetensors/.pth). Default: "
                         "weights/resnet50.safetensors if present, else pretrained if it can be "
                         "downloaded, else random")
    ap.add_argument("--backend", default="auto", choices=("auto", "sim", "ttnn"))
    ap.add_argument("--batch", type=int, default=1, help="run the image N times as one batch")
    ap.add_argument("--topk", type=int, default=5)
    ap.add_argument("--profile", default=None, help="precision profile (default or tt-perf)")
    args = ap.parse_args(argv)
    if args.batch < 1 or args.topk < 1:
        print("error: --batch and --topk must be positive", file=sys.stderr)
        return 2

    import ttmodels
    from ttmodels.images import ImageError, imagenet_tensor, sample_image_path

    try:
        path = Path(args.image) if args.image else sample_image_path()
        x = imagenet_tensor(path)
    except ImageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    import torch
    from torchvision.models import ResNet50_Weights

    weights, note = _choose_weights(args.weights)
    try:
        t0 = time.perf_counter()
        model = ttmodels.build("resnet50", weights=weights, backend=args.backend,
                               batch_size=args.batch, profile=args.profile)
        build_s = time.perf_counter() - t0
    except ttmodels.Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    batch = x.unsqueeze(0).repeat(args.batch, 1, 1, 1)
    model(batch)  # warm-up (allocators, kernel selection); weights were prepared in build
    t0 = time.perf_counter()
    logits = model(batch)
    per_image = (time.perf_counter() - t0) / args.batch
    model.close()

    labels = ResNet50_Weights.IMAGENET1K_V2.meta["categories"]
    probs = torch.softmax(logits[0].float(), dim=0)
    top = torch.topk(probs, min(args.topk, probs.numel()))
    print(f"backend: {model.backend_name}   weights: {note}   image: {path.name}")
    if weights == "random":
        print("NOTE: random weights — these predictions are meaningless. Pass --weights FILE "
              "(see weights/README.md) for real ones.")
    for p, i in zip(top.values.tolist(), top.indices.tolist()):
        print(f"  {p:7.2%}  {labels[i]}")
    print(f"time per image: {per_image * 1000:.1f} ms (batch {args.batch}; build {build_s:.2f} s)")
    return 0


def _choose_weights(choice: str):
    if choice != "auto":
        return choice, choice
    local = REPO / "weights" / "resnet50.safetensors"
    if local.is_file():
        return str(local), str(local.relative_to(REPO))
    from ttmodels.weights import pretrained_available
    if pretrained_available("resnet50"):
        return "pretrained", "pretrained (torchvision IMAGENET1K_V2)"
    return "random", "random (no pretrained weights available offline)"


if __name__ == "__main__":
    sys.exit(main())
