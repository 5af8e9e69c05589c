#!/usr/bin/env python
"""Classify an image with ResNet50 (or another shipped ImageNet classifier) through ttmodels
(sim backend here, ttnn on a card).

    python demos/resnet50.py --image x.jpg [--model resnet50|mobilenet_v2|efficientnet_b0|...]
                             [--weights random|pretrained|FILE]
                             [--backend auto|sim|ttnn] [--batch N] [--topk K]
                             [--device n150|n300|t3000|galaxy|p150|p150x4] [--mesh RxC]

--device names the system; a multi-chip one, or --mesh, runs data parallel over its chips (a ttnn MeshDevice on a card, as many
sim devices on the host): --batch is the whole batch and must divide by the chip count.

Without --image it uses the sample photo that ships with matplotlib.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from a checkout without installing


# The shipped configs that are torchvision ImageNet classifiers (1000 logits, ImageNet input).
CLASSIFIERS = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d",
               "wide_resnet50_2", "mobilenet_v2", "efficientnet_b0")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", help="image file (default: matplotlib's sample photo)")
    ap.add_argument("--model", default="resnet50", choices=CLASSIFIERS,
                    help="shipped ImageNet classifier (torchvision key names)")
    ap.add_argument("--weights", default="auto",
                    help="random | pretrained | FILE (.safetensors/.pth). Default: "
                         "weights/<model>.safetensors if present, else pretrained if it can be "
                         "downloaded, else random")
    ap.add_argument("--backend", default="auto", choices=("auto", "sim", "ttnn"))
    ap.add_argument("--batch", type=int, default=1, help="run the image N times as one batch")
    ap.add_argument("--topk", type=int, default=5)
    ap.add_argument("--profile", default=None, help="precision profile (default or tt-perf)")
    ap.add_argument("--mesh", default=None,
                    help="data parallel over n150, n300, t3000 or ROWSxCOLS chips (default: one chip)")
    from ttmodels.tools.cli import device_name
    ap.add_argument("--device", type=device_name, default=None, metavar="NAME",
                    help="the system by name: n150 (default), n300, t3000, galaxy, p150, p150x4; "
                         "a multi-chip one runs data parallel")
    args = ap.parse_args(argv)
    if args.batch < 1 or args.topk < 1:
        print("error: --batch and --topk must be positive", file=sys.stderr)
        return 2
    from ttmodels.tools.runs import weights_problem
    problem = weights_problem(args.weights)
    if problem:      # before the image is read and the model planned
        print(f"error: {problem}", file=sys.stderr)
        return 2

    import ttmodels
    from ttmodels.tools.images import ImageError, imagenet_tensor, sample_image_path

    try:
        path = Path(args.image) if args.image else sample_image_path()
        x = imagenet_tensor(path)
    except ImageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    import torch
    from torchvision.models import ResNet50_Weights

    weights, note = _choose_weights(args.weights, args.model)
    try:
        t0 = time.perf_counter()
        model = ttmodels.build(args.model, weights=weights, backend=args.backend,
                               batch_size=args.batch, profile=args.profile, mesh=args.mesh,
                               device=args.device)
        build_s = time.perf_counter() - t0
    except ttmodels.Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    batch = x.unsqueeze(0).repeat(args.batch, 1, 1, 1)
    model(batch)  # warm-up (allocators, kernel selection); weights were prepared in build
    t0 = time.perf_counter()
    logits = model(batch)
    batch_s = time.perf_counter() - t0
    per_image = batch_s / args.batch
    model.close()

    labels = ResNet50_Weights.IMAGENET1K_V2.meta["categories"]
    probs = torch.softmax(logits[0].float(), dim=0)
    top = torch.topk(probs, min(args.topk, probs.numel()))
    print(f"model: {args.model}   backend: {model.backend_name}   weights: {note}   "
          f"image: {path.name}")
    if weights == "random":
        print("NOTE: random weights — these predictions are meaningless. Pass --weights FILE "
              "(see weights/README.md) for real ones.")
    for p, i in zip(top.values.tolist(), top.indices.tolist()):
        print(f"  {p:7.2%}  {labels[i]}")
    if model.mesh is not None:
        m = model.mesh
        print(f"mesh: {m.describe()}, batch {args.batch} = {model.plan.per_chip_batch} per chip; "
              f"batch time {batch_s * 1000:.1f} ms ({args.batch / batch_s:.1f} images/s"
              + ("; sim chips run one after another" if model.backend_name == "sim" else "") + ")")
    print(f"time per image: {per_image * 1000:.1f} ms (batch {args.batch}; build {build_s:.2f} s)")
    return 0


def _choose_weights(choice: str, model: str = "resnet50"):
    if choice != "auto":
        return choice, choice
    local = REPO / "weights" / f"{model}.safetensors"
    if local.is_file():
        return str(local), str(local.relative_to(REPO))
    from ttmodels.weights import pretrained_available
    if pretrained_available(model):
        return "pretrained", "pretrained (torchvision)"
    return "random", "random (no pretrained weights available offline)"


if __name__ == "__main__":
    sys.exit(main())
