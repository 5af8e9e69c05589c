"""Weight sources, strict key checks, BatchNorm folding.

    sd = load_state_dict("weights/resnet50.safetensors", graph)   # spec key -> float32 tensor
    params = prepare_parameters(graph, sd)                         # node -> {"weight", "bias"}

Sources (``load_state_dict``):
  * a state dict (any ``Mapping[str, Tensor]``), an ``nn.Module`` (its ``state_dict()``);
  * a path to ``.safetensors`` (``safetensors.torch.load_file``) or ``.pth`` / ``.pt`` / ``.bin`` /
    ``.ckpt`` (``torch.load(..., map_location="cpu", weights_only=True)``; a checkpoint dict holding
    ``"state_dict"`` (mmcv / BEVDet) or ``"model"`` is unwrapped);
  * ``"random"`` (or None): seeded He-init weights with BatchNorm statistics calibrated on
    synthetic images (``random_state_dict``);
  * ``"pretrained"``: torchvision's weights for the graph's model name (``ResNet50_Weights.IMAGENET1K_V2``
    for resnet50), downloaded through torchvision's weights API.

``key_map`` (renaming, reshaping or dropping the user's keys; applied before prefix filtering):
  * callable ``f(user_key) -> spec_key | (spec_key, shape) | None``: every user key goes through
    ``f``; a ``(spec_key, shape)`` pair also reshapes the tensor (``torch.reshape``: one ``-1``
    allowed); ``None`` drops the key (it is counted as ignored, never an error).
  * dict: each entry is either
      - a *prefix rename* ``{user_prefix: spec_prefix}`` when the entry's key is ``""`` or ends
        with ``"."``: a user key starting with ``user_prefix`` gets it replaced by ``spec_prefix``
        (``{"module.": ""}`` strips DataParallel's prefix, ``{"backbone.": "img_backbone."}``
        renames a stage). The longest matching prefix wins; ``""`` matches every key;
      - an *exact rename* ``{spec_key: user_key}``: the spec's ``spec_key`` is read from the user's
        ``user_key``. The reverse direction ``{user_key: spec_key}`` is accepted when unambiguous
        (left side is a user key and right side a spec key);
      - a *drop* ``{user_key_or_prefix: None}``: the key (or every key under the prefix, a key
        ending with ``"."``) is dropped (counted as ignored);
      - a *reshape* ``{spec_key: {"from": user_key, "reshape": [d0, d1, ...]}}``: the spec's key
        is read from ``user_key`` (default: ``spec_key`` itself) reshaped (one ``-1`` allowed).
        A tensor whose element count does not fit the shape is a WeightsError naming both keys.
    Exact renames, drops and reshapes are applied first; a key taken by one is not prefix-renamed.
    Keys no entry matches keep their name. Entries that match nothing are listed in the report
    (and in the error message if loading fails), keys that still fit no spec key are reported as
    unexpected. ``ttmodels compare --key-map FILE`` reads the dict form from a YAML or JSON file
    (``null`` drops).

Filtering (after key_map, on spec-side names): ``select_prefix`` (a prefix or a list of them;
``"auto"`` = the top-level names the graph uses, e.g. ``img_backbone.``/``img_neck.`` for BEVDet's
encoder) keeps only keys under those prefixes; ``ignore`` (a prefix or a list: ``build(ignore=...)``,
``--ignore PREFIX``) drops keys under those. Dropped
keys are counted in ``result.report`` and logged ("ignored 1234 keys outside img_backbone./img_neck.").

Strict check: missing, unexpected and mis-shaped keys, and keys with invalid values (non-float,
NaN/Inf, negative BatchNorm variance, sparse), are all listed in one ``WeightsError``. ``{bn}.num_batches_tracked`` is accepted and ignored.
Nothing the user gave is modified: every returned tensor is a fresh float32 copy.

Modules: ``sources`` (reading a source), ``keys`` (key_map, filtering, the strict check),
``loader`` (``load_state_dict``), ``pretrained`` (torchvision's weights), ``random_init``
(random weights, BatchNorm calibration, synthetic images), ``prepare`` (the layers' host
parameters). This package re-exports their public names.
"""
from __future__ import annotations

from ..ops.conv2d import batchnorm_scale_shift, fold_batchnorm  # noqa: F401  (the BN math lives with its facts)
from .keys import (HUGE_WEIGHT, SHOW, apply_key_map, check_key_types, check_state_dict,
                   graph_prefixes, warn_huge)
from .loader import LoadedStateDict, LoadReport, load_state_dict
from .prepare import prepare_parameters, prepared_shapes
from .pretrained import (PRETRAINED, pretrained_available, pretrained_state_dict,
                         pretrained_weights_name)
from .random_init import (IMAGENET_MEAN, IMAGENET_STD, RANDOM_INIT_VERSION, RandomInit,
                          activation_names, calibration_batch_size, random_state_dict,
                          synthetic_images)
from .sources import PTH_SUFFIXES, SafetensorsFile, describe_source, read_file, read_source
from .sources import _is_module  # noqa: F401  (cache.py reads it)

__all__ = ["load_state_dict", "LoadReport", "LoadedStateDict", "read_source", "read_file",
           "describe_source", "SafetensorsFile", "apply_key_map", "check_state_dict",
           "check_key_types", "graph_prefixes", "warn_huge", "pretrained_weights_name",
           "pretrained_state_dict", "pretrained_available", "random_state_dict", "RandomInit",
           "synthetic_images", "calibration_batch_size", "activation_names", "prepare_parameters",
           "prepared_shapes", "fold_batchnorm", "batchnorm_scale_shift", "RANDOM_INIT_VERSION",
           "HUGE_WEIGHT", "SHOW", "PTH_SUFFIXES", "PRETRAINED", "IMAGENET_MEAN", "IMAGENET_STD"]
