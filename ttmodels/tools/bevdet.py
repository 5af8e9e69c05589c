"""BEVDet-specific helpers: camera order, test-time image preprocessing, checkpoint keys.

The shipped spec ``bevdet_r50_encoder`` is BEVDet-R50's image encoder (``img_backbone`` ResNet50
with out_indices (2, 3) + ``img_neck`` CustomFPN). Its input is the six nuScenes cameras as one
batch ``[6, 3, 256, 704]`` in ``CAMERA_ORDER``, each image prepared by ``preprocess``.

Preprocessing (BEVDet ``mmdet3d/datasets/pipelines/loading.py``, ``PrepareImageInputs`` at test
time: ``sample_augmentation(is_train=False)`` + ``img_transform_core`` + ``mmlabNormalize``), for
an RGB image of width W, height H and ``input_size = (fH, fW)``:

  1. resize = fW / W + resize_test            (``resize_test`` is 0.0 in BEVDet's dev2.x configs;
                                               for nuScenes' 1600x900 images this is 0.44, the
                                               same as max(fH / H, fW / W))
  2. resize_dims = (int(W * resize), int(H * resize)) = (newW, newH); PIL ``Image.resize`` with
     its default filter (bicubic for RGB)
  3. crop_h = int((1 - mean(crop_h_range)) * newH) - fH     (crop_h_range (0.0, 0.0): keep the
                                                             bottom fH rows)
     crop_w = int(max(0, newW - fW) / 2)                    (horizontally centred)
     PIL ``crop((crop_w, crop_h, crop_w + fW, crop_h + fH))``; parts of that box outside the
     resized image (an image wider than fW/fH) come out black, as in BEVDet
  4. no flip, no rotation at test time
  5. mmcv ``imnormalize(img, mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
     to_rgb=True)`` on the 0..255 float pixels, then HWC -> CHW.

``to_rgb=True`` applies OpenCV's BGR->RGB swap to an image PIL already decoded as RGB, so BEVDet
actually feeds its network B, G, R planes, normalised with the (R, G, B) mean/std in that
position order (BEVDet issue #274). Checkpoints were trained that way, so ``preprocess``
reproduces it by default; ``swap_rb=False`` gives true RGB planes instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from PIL import Image

# BEVDet's data_config['cams'] for nuScenes (configs/bevdet/*.py): the batch order of the encoder.
CAMERA_ORDER = ("CAM_FRONT_LEFT", "CAM_FRONT", "CAM_FRONT_RIGHT",
                "CAM_BACK_LEFT", "CAM_BACK", "CAM_BACK_RIGHT")
INPUT_SIZE = (256, 704)          # data_config['input_size'] (fH, fW)
MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)

# Top-level names of a BEVDet checkpoint that belong to the image encoder; everything else
# (img_view_transformer, img_bev_encoder_*, pts_bbox_head, ...) is ignored when loading it.
ENCODER_PREFIXES = ("img_backbone.", "img_neck.")


@dataclass(frozen=True)
class EvalTransform:
    """The resize/crop BEVDet applies to one image at test time (see the module docstring)."""
    resize: float
    resize_dims: tuple[int, int]     # (newW, newH), PIL order
    crop: tuple[int, int, int, int]  # (left, top, right, bottom) in the resized image


def eval_transform(height: int, width: int, input_size=INPUT_SIZE, *, resize_test: float = 0.0,
                   crop_h_range=(0.0, 0.0)) -> EvalTransform:
    """BEVDet's ``sample_augmentation`` for ``is_train=False`` on an H x W source image."""
    fH, fW = (int(s) for s in input_size)
    if height <= 0 or width <= 0 or fH <= 0 or fW <= 0:
        raise ValueError(f"image size ({height}, {width}) and input_size ({fH}, {fW}) must be positive")
    resize = float(fW) / float(width) + float(resize_test)
    new_w, new_h = int(width * resize), int(height * resize)
    crop_h = int((1 - (float(crop_h_range[0]) + float(crop_h_range[1])) / 2) * new_h) - fH
    crop_w = int(max(0, new_w - fW) / 2)
    return EvalTransform(resize, (new_w, new_h), (crop_w, crop_h, crop_w + fW, crop_h + fH))


def preprocess(image: "Image.Image", input_size=INPUT_SIZE, *, resize_test: float = 0.0,
               crop_h_range=(0.0, 0.0), swap_rb: bool = True) -> "torch.Tensor":
    """One camera image (PIL, any mode) -> float32 tensor ``[3, fH, fW]`` exactly as BEVDet's
    test pipeline prepares it (steps in the module docstring). ``image`` is not modified."""
    import numpy as np
    import torch

    from .images import to_rgb

    im = image if image.mode == "RGB" else to_rgb(image)
    tf = eval_transform(im.height, im.width, input_size, resize_test=resize_test,
                        crop_h_range=crop_h_range)
    # Pillow's Image.resize default for RGB is bicubic (since Pillow 7); explicit so it can't drift.
    from PIL import Image as _Image
    im = im.resize(tf.resize_dims, resample=_Image.Resampling.BICUBIC).crop(tf.crop)
    a = np.asarray(im, dtype=np.float32)                     # H, W, 3 in R, G, B
    if swap_rb:
        a = a[..., ::-1]                                     # mmcv to_rgb on an RGB image
    mean = np.asarray(MEAN, dtype=np.float64).reshape(1, 1, 3)
    stdinv = 1.0 / np.asarray(STD, dtype=np.float64).reshape(1, 1, 3)
    a = ((a - mean) * stdinv).astype(np.float32)
    return torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1)))


def preprocess_cameras(images: "Mapping[str, Image.Image] | Iterable[Image.Image]",
                       input_size=INPUT_SIZE, **kw) -> "torch.Tensor":
    """Six camera images -> ``[6, 3, fH, fW]`` in ``CAMERA_ORDER``. A mapping is keyed by camera
    name (all six required); a sequence is taken to be in ``CAMERA_ORDER`` already."""
    import torch

    if isinstance(images, Mapping):
        missing = [c for c in CAMERA_ORDER if c not in images]
        if missing:
            raise ValueError(f"missing camera image(s) {missing}; need all of {list(CAMERA_ORDER)}")
        ordered = [images[c] for c in CAMERA_ORDER]
    else:
        ordered = list(images)
        if len(ordered) != len(CAMERA_ORDER):
            raise ValueError(f"need {len(CAMERA_ORDER)} camera images ({', '.join(CAMERA_ORDER)}), "
                             f"got {len(ordered)}")
    return torch.stack([preprocess(im, input_size, **kw) for im in ordered])


def is_encoder_key(key: str) -> bool:
    return key.startswith(ENCODER_PREFIXES)


def split_checkpoint_keys(keys: Iterable[str]) -> tuple[list[str], list[str]]:
    """(image-encoder keys, other keys) of a BEVDet checkpoint's state dict."""
    enc, other = [], []
    for k in keys:
        (enc if is_encoder_key(k) else other).append(k)
    return enc, other
