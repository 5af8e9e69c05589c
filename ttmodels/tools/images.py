"""Image loading and the preprocessing the demos and `compare` use (ImageNet and BEVDet)."""
from __future__ import annotations

import warnings
from pathlib import Path

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# 89,478,485 pixels: PIL's own Image.MAX_IMAGE_PIXELS default (a 1 GB-ish decoded bomb guard)
MAX_PIXELS = 1024 * 1024 * 1024 // 4 // 3
# ImageNet preprocessing resizes the short side to 256: a 1x20000 strip would become
# 256 x 5,120,000 pixels (~4 GB) before the crop, so longer-than-this aspect ratios are refused.
MAX_ASPECT = 16


class ImageError(Exception):
    """An image file is missing or unreadable (the demos print it as one line and exit 2)."""


def sample_image_path() -> Path:
    """The Grace Hopper photo that ships with matplotlib (a ttnn dependency)."""
    import matplotlib

    path = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    if not path.is_file():
        raise ImageError(f"matplotlib's sample photo is missing ({path}); pass --image")
    return path


def load_rgb(path) -> "PIL.Image.Image":
    """Open any PIL-readable image as 8-bit RGB: grayscale, 16-bit, palette, RGBA (composited on
    white), CMYK all work. Raises ImageError with one clear line otherwise."""
    from PIL import Image, UnidentifiedImageError

    p = Path(path)
    if not p.exists():
        raise ImageError(f"image not found: {p}")
    if not p.is_file():
        raise ImageError(f"not a file: {p}")
    try:
        with warnings.catch_warnings():
            # PIL warns between its pixel limit and twice it; the size check below decides
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = Image.open(p)
        with im:
            # Image.open reads only the header: refuse what would be too big to decode before
            # decoding it (PIL only warns between its limit and twice its limit)
            w, h = im.size
            if w * h > MAX_PIXELS:
                raise ImageError(f"image {p} is {w}x{h} pixels, more than the {MAX_PIXELS} "
                                 "this preprocessing decodes; downscale it first")
            im.load()
            return to_rgb(im)
    except Image.DecompressionBombError as e:
        raise ImageError(f"image {p} is too large to decode safely: {e}") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as e:
        raise ImageError(f"cannot read image {p}: {e}") from None


def to_rgb(im) -> "PIL.Image.Image":
    from PIL import Image

    if im.mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        # 16-bit and 32-bit grayscale: scale the full range into 8 bits instead of clipping.
        import numpy as np

        a = np.asarray(im, dtype=np.float64)
        hi = 65535.0 if im.mode.startswith("I;16") else max(float(a.max()), 1.0)
        lo = 0.0 if im.mode.startswith("I;16") else min(float(a.min()), 0.0)
        a = np.clip((a - lo) / (hi - lo) * 255.0 + 0.5, 0, 255).astype("uint8")
        im = Image.fromarray(a, mode="L")
    if im.mode == "P":
        im = im.convert("RGBA")
    if im.mode in ("RGBA", "LA", "PA"):
        im = im.convert("RGBA")
        background = Image.new("RGBA", im.size, (255, 255, 255, 255))
        im = Image.alpha_composite(background, im)
    return im.convert("RGB")


def imagenet_tensor(path, *, resize: int = 256, crop: int = 224):
    """Standard ImageNet evaluation preprocessing -> float tensor [3, crop, crop]:
    resize the short side to 256 (bilinear), center crop 224, scale to [0, 1], normalise."""
    im = load_rgb(path)
    w, h = im.size
    if max(w, h) > MAX_ASPECT * min(w, h):
        raise ImageError(f"image {path} is {w}x{h} pixels: an aspect ratio over {MAX_ASPECT}:1 "
                         "cannot be center-cropped to a square meaningfully; crop it first")
    import torch
    from torchvision.transforms import functional as F

    im = F.resize(im, resize, interpolation=F.InterpolationMode.BILINEAR, antialias=True)
    im = F.center_crop(im, [crop, crop])
    t = F.to_tensor(im)
    return F.normalize(t, IMAGENET_MEAN, IMAGENET_STD).to(torch.float32)
