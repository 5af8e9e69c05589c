#!/usr/bin/env python
"""A user's own backbone (examples/my_backbone): ResNet18-style trunk + two-level FPN, run through
ttmodels with the weights of an equivalent torch module, compared output by output.

    python demos/custom_backbone.py [--spec examples/my_backbone/backbone.yaml]
                                    [--input-size H W] [--batch N] [--backend auto|sim|ttnn]
                                    [--device NAME] [--mesh n300|t3000|RxC]

The torch module (examples/my_backbone/torch_model.py) names its parts its own way (``body.*``,
``fpn.*``); its ``KEY_MAP`` renames them to the spec's layer names. Walkthrough: docs/custom_backbones.md.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from a checkout without installing
sys.path.insert(0, str(REPO / "examples" / "my_backbone"))

from torch_model import KEY_MAP, my_backbone, user_key  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(REPO / "examples" / "my_backbone" / "backbone.yaml"))
    ap.add_argument("--input-size", type=int, nargs=2, default=(128, 128), metavar=("H", "W"))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--backend", default="auto", choices=("auto", "sim", "ttnn"))
    ap.add_argument("--mesh", default=None,
                    help="data parallel over n300, t3000 or ROWSxCOLS chips (--batch is the whole "
                         "batch and must divide by the chip count)")
    from ttmodels.tools.cli import device_name
    ap.add_argument("--device", type=device_name, default=None, metavar="NAME",
                    help="the system by name: n150 (default), n300, t3000, galaxy, p150, p150x4; "
                         "a multi-chip one runs data parallel")
    args = ap.parse_args(argv)
    size = tuple(args.input_size)

    import ttmodels
    from ttmodels.weights.reference import pcc

    try:
        ttmodels.register("my_backbone", Path(args.spec))
        print(f"registered my_backbone -> {args.spec}")
        plan = ttmodels.plan("my_backbone", batch_size=args.batch, input_size=size, mesh=args.mesh,
                              device=args.device)
        print(f"plan: {len(plan.graph.nodes)} layers, {len(plan.adapters)} adapters, "
              f"outputs {plan.graph.outputs}")

        import torch
        from ttmodels.weights import random_state_dict

        # No trained checkpoint offline: fill the user's module with seeded, BatchNorm-calibrated
        # random weights (under the user's own key names). With a trained model, skip this.
        module = my_backbone()
        sd = random_state_dict(plan.graph, seed=0)
        module.load_state_dict({user_key(k): v for k, v in sd.items()}, strict=False)

        t0 = time.perf_counter()
        model = ttmodels.build("my_backbone", weights=module, key_map=KEY_MAP,
                               backend=args.backend, batch_size=args.batch, input_size=size,
                               mesh=args.mesh, device=args.device)
        print(f"built on {model.backend_name} in {time.perf_counter() - t0:.1f} s; "
              f"weights: {model.weights_info}")
        if model.mesh is not None:
            print(f"mesh: {model.mesh.describe()}, {plan.per_chip_batch} per chip")
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
