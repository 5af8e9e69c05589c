"""Ultralytics-style initial weights for YOLOv8, rebuilt without Ultralytics (issue 33).

Ultralytics' ``DetectionModel`` keeps torch's default Conv2d initialisation (kaiming-uniform with
a = sqrt(5): weights and biases uniform in +-1/sqrt(fan_in)), BatchNorm at weight 1, bias 0, eps
1e-3 (``initialize_weights``), and ``Detect.bias_init`` sets the last box conv's bias to 2 and the
last class conv's to log(5 / nc / (640 / stride)^2). ``init_state_dict`` draws the same
distributions, one seeded generator per key (so the result does not depend on torch's global
RNG or module order). BatchNorm running statistics are not drawn: they come from a calibration
(``tests/data/yolov8n_ultralytics.pt`` holds Ultralytics' own, measured in a scratch environment;
DEVELOPERS.md, "Ultralytics fixture"). Ultralytics is never imported here.
"""
from __future__ import annotations

import hashlib
import math

import torch

NC = 80
BOX_BIAS = 2.0          # Detect.bias_init of Ultralytics 8.4 (older releases: 1.0)
STRIDES = (8, 16, 32)


def _seed(seed: int, key: str) -> int:
    return seed * 1_000_003 + int.from_bytes(hashlib.sha256(key.encode()).digest()[:6], "little")


def init_state_dict(shapes: dict[str, tuple[int, ...]], seed: int = 0) -> dict[str, torch.Tensor]:
    """Parameters (no BatchNorm running statistics) for the keys and shapes of ``shapes`` (a
    YOLOv8 state dict's ``{key: shape}``), drawn as Ultralytics initialises them."""
    out: dict[str, torch.Tensor] = {}
    weight_shape = {k[:-len(".weight")]: s for k, s in shapes.items() if k.endswith(".weight")}
    for key, shape in shapes.items():
        mod, _, leaf = key.rpartition(".")
        if leaf in ("running_mean", "running_var", "num_batches_tracked"):
            continue
        if ".dfl." in key:          # DFL's fixed 0..15 weights
            out[key] = torch.arange(shape[1], dtype=torch.float32).view(*shape)
            continue
        if ".bn." in key or mod.endswith(".bn"):
            out[key] = torch.ones(shape) if leaf == "weight" else torch.zeros(shape)
            continue
        ws = weight_shape[mod]
        fan_in = int(math.prod(ws[1:]))
        bound = 1.0 / math.sqrt(fan_in)
        g = torch.Generator().manual_seed(_seed(seed, key))
        out[key] = (torch.rand(shape, generator=g) * 2 - 1) * bound
    for i, s in enumerate(STRIDES):
        out[f"model.22.cv2.{i}.2.bias"] = torch.full_like(out[f"model.22.cv2.{i}.2.bias"], BOX_BIAS)
        cls = out[f"model.22.cv3.{i}.2.bias"]
        out[f"model.22.cv3.{i}.2.bias"] = torch.full_like(cls, math.log(5 / NC / (640 / s) ** 2))
    return out


def digest(sd: dict[str, torch.Tensor]) -> str:
    """sha256 prefix of the float32 bytes of ``sd``'s tensors in key order (pins the recipe)."""
    h = hashlib.sha256()
    for k in sorted(sd):
        h.update(k.encode())
        h.update(sd[k].detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]
