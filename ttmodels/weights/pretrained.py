"""Pretrained weights: torchvision's for the graph's model name."""
from __future__ import annotations

from typing import Any

from ..errors import WeightsError
from ..language.graph import Graph


# torchvision's weights for a graph name; the rest of the family uses the enum's DEFAULT.
PRETRAINED = {"resnet50": "ResNet50_Weights.IMAGENET1K_V2"}


# ---------------------------------------------------------------------------------------------
# pretrained (torchvision)
# ---------------------------------------------------------------------------------------------

def pretrained_weights_name(graph: Graph) -> str:
    """torchvision's weights enum entry for the graph ("ResNet50_Weights.IMAGENET1K_V2")."""
    name = graph.name
    if name in PRETRAINED:
        return PRETRAINED[name]
    try:
        import torchvision
        return str(torchvision.models.get_model_weights(name).DEFAULT)
    except Exception as e:
        raise WeightsError(
            f"no pretrained weights known for '{name}': 'pretrained' covers torchvision's models "
            f"(resnet18 ... resnet152, resnext, wide_resnet). For BEVDet download the checkpoint "
            f"(see weights/README.md) and pass its path, e.g. weights='weights/bevdet-r50.pth'") from e


def pretrained_state_dict(graph: Graph) -> tuple[dict[str, Any], str]:
    """Download (or take from torch.hub's cache) torchvision's weights for the graph."""
    wname = pretrained_weights_name(graph)
    import torchvision
    try:
        weights = torchvision.models.get_weight(wname)
    except Exception as e:
        raise WeightsError(f"torchvision has no weights '{wname}': {e}") from e
    try:
        sd = weights.get_state_dict(progress=False, check_hash=True)
    except Exception as e:
        fname = f"{graph.name}.safetensors"
        raise WeightsError(
            f"could not download torchvision's {wname} from {weights.url} "
            f"({type(e).__name__}: {e}). Without internet access, on a machine that has it run:\n"
            f"  python -c \"import torchvision; from safetensors.torch import save_file; "
            f"m = torchvision.models.get_model('{graph.name}', weights='{wname.split('.')[-1]}'); "
            f"save_file({{k: v.contiguous() for k, v in m.state_dict().items()}}, '{fname}')\"\n"
            f"then copy {fname} here (e.g. to weights/{fname}) and pass "
            f"weights='weights/{fname}' (see weights/README.md)") from e
    return dict(sd), f"torchvision {wname}"


def pretrained_available(name: str) -> bool:
    """True when torchvision's pretrained weights for model ``name`` are already on this machine
    (torch.hub's checkpoint cache), so "pretrained" will load without a download. Never touches
    the network: the demos use it to pick a default without hanging on a closed network."""
    import os

    try:
        import torch
        import torchvision

        weights = torchvision.models.get_weight(PRETRAINED[name]) if name in PRETRAINED else \
            torchvision.models.get_model_weights(name).DEFAULT
        path = os.path.join(torch.hub.get_dir(), "checkpoints", os.path.basename(weights.url))
        return os.path.isfile(path)
    except Exception:
        return False
