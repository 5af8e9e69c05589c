"""Image loading and the preprocessing the demos and `compare` use (ImageNet and BEVDet)."""
from __future__ import annotations

from pathlib import Path

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


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
        with Image.open(p) as im:
            im.load()
            return to_rgb(im)
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
    import torch
    from torchvision.transforms import functional as F

    im = load_rgb(path)
    im = F.resize(im, resize, interpolation=F.InterpolationMode.BILINEAR, antialias=True)
    im = F.center_crop(im, [crop, crop])
    t = F.to_tensor(im)
    return F.normalize(t, IMAGENET_MEAN, IMAGENET_STD).to(torch.float32)
