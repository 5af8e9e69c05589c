"""YOLOv8 on the host: letterbox preprocessing, the Detect head's decoding and NMS, drawing.

The shipped ``yolov8n`` / ``yolov8s`` specs end at the Detect head's raw branches: per level
(P3 stride 8, P4 16, P5 32) ``box_pN`` ``[N, 4 * reg_max, H, W]`` (a distribution over reg_max
bins for each of the left, top, right, bottom distances) and ``cls_pN`` ``[N, nc, H, W]`` (class
logits). What Ultralytics' Detect does after them in inference runs here, in float32 torch:

* anchors: the centre of every output cell, ``(x + 0.5, y + 0.5)`` in cells of the level;
* DFL: softmax over the reg_max bins, then the expected bin index (the checkpoint's fixed
  ``dfl.conv.weight`` is ``arange(reg_max)``: ``DFL_WEIGHTS``), a distance in cells;
* boxes: ``(anchor - (l, t), anchor + (r, b)) * stride``, xyxy in input pixels;
* scores: ``sigmoid`` of the class logits; NMS per class (``torchvision.ops.batched_nms``).

``import ttmodels.tools.yolo`` is light: torch / torchvision / PIL are imported inside the functions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import torch

STRIDES = (8, 16, 32)
LEVELS = ("p3", "p4", "p5")
REG_MAX = 16
LETTERBOX_FILL = 114            # Ultralytics' grey padding (0..255)

COCO_CLASSES = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
    "traffic light", "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog",
    "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella",
    "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite",
    "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle",
    "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple", "sandwich", "orange",
    "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch", "potted plant",
    "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard", "cell phone",
    "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase", "scissors",
    "teddy bear", "hair drier", "toothbrush",
)


@dataclass
class Detections:
    """One image's detections, in input (letterboxed) pixels unless mapped back
    (``Letterbox.to_original``): ``boxes`` [K, 4] xyxy, ``scores`` [K], ``classes`` [K] (int)."""
    boxes: "torch.Tensor"
    scores: "torch.Tensor"
    classes: "torch.Tensor"

    def __len__(self) -> int:
        return int(self.scores.numel())


def anchors(shapes: Sequence[tuple[int, int]], strides: Sequence[int] = STRIDES,
            offset: float = 0.5) -> tuple["torch.Tensor", "torch.Tensor"]:
    """Cell centres of every level, in cells, row-major per level: ``([A, 2] (x, y), [A] stride)``
    with A = sum(H * W)."""
    import torch
    pts, st = [], []
    for (h, w), s in zip(shapes, strides):
        ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32) + offset,
                                torch.arange(w, dtype=torch.float32) + offset, indexing="ij")
        pts.append(torch.stack([xs.reshape(-1), ys.reshape(-1)], dim=1))
        st.append(torch.full((h * w,), float(s)))
    return torch.cat(pts), torch.cat(st)


def dfl_distances(box: "torch.Tensor", reg_max: int = REG_MAX) -> "torch.Tensor":
    """``[N, 4 * reg_max, A]`` bin logits -> ``[N, 4, A]`` expected distances (in cells): softmax
    over each side's reg_max bins, weighted by the bin index (the DFL conv's arange weights)."""
    import torch
    n, c, a = box.shape
    if c != 4 * reg_max:
        raise ValueError(f"box branch has {c} channels, expected 4 x reg_max = {4 * reg_max}")
    p = box.float().view(n, 4, reg_max, a).softmax(dim=2)
    bins = torch.arange(reg_max, dtype=torch.float32).view(1, 1, reg_max, 1)
    return (p * bins).sum(dim=2)


def decode(outputs: Mapping[str, "torch.Tensor"], *, strides: Sequence[int] = STRIDES,
           reg_max: int = REG_MAX) -> tuple["torch.Tensor", "torch.Tensor"]:
    """The model's outputs (``box_p3``, ``cls_p3``, ... NCHW) -> ``(boxes [N, A, 4] xyxy in input
    pixels, scores [N, A, nc] class probabilities)``."""
    import torch
    boxes, logits, shapes = [], [], []
    for lvl in LEVELS[:len(strides)]:
        b, c = outputs[f"box_{lvl}"], outputs[f"cls_{lvl}"]
        if b.shape[-2:] != c.shape[-2:] or b.shape[0] != c.shape[0]:
            raise ValueError(f"box_{lvl} {tuple(b.shape)} and cls_{lvl} {tuple(c.shape)} differ")
        shapes.append(tuple(b.shape[-2:]))
        boxes.append(b.float().flatten(2))
        logits.append(c.float().flatten(2))
    dist = dfl_distances(torch.cat(boxes, 2), reg_max)                # [N, 4, A]
    pts, st = anchors(shapes, strides)                                  # [A, 2], [A]
    lt, rb = dist[:, :2].transpose(1, 2), dist[:, 2:].transpose(1, 2)  # [N, A, 2]
    xyxy = torch.cat([pts - lt, pts + rb], dim=2) * st.view(1, -1, 1)
    return xyxy, torch.cat(logits, 2).transpose(1, 2).sigmoid()


def nms(boxes: "torch.Tensor", scores: "torch.Tensor", *, conf: float = 0.25, iou: float = 0.45,
        max_det: int = 300) -> list[Detections]:
    """Per image: the best class of each anchor above ``conf``, then NMS per class at ``iou``
    (torchvision's ``batched_nms``), at most ``max_det`` kept, best first."""
    import torch
    from torchvision.ops import batched_nms
    out = []
    for bx, sc in zip(boxes, scores):
        best, cls = sc.max(dim=1)
        keep = best > conf
        bx, best, cls = bx[keep], best[keep], cls[keep]
        k = batched_nms(bx, best, cls, iou)[:max_det]
        out.append(Detections(bx[k], best[k], cls[k].to(torch.int64)))
    return out


@dataclass
class Letterbox:
    """How an image was fitted into the square input: scaled by ``scale``, then padded by
    ``pad`` (left, top) pixels."""
    scale: float
    pad: tuple[int, int]
    size: tuple[int, int]          # the original (width, height)

    def to_original(self, det: Detections) -> Detections:
        b = det.boxes.clone()
        b[:, [0, 2]] = (b[:, [0, 2]] - self.pad[0]) / self.scale
        b[:, [1, 3]] = (b[:, [1, 3]] - self.pad[1]) / self.scale
        w, h = self.size
        b[:, [0, 2]] = b[:, [0, 2]].clamp(0, w)
        b[:, [1, 3]] = b[:, [1, 3]].clamp(0, h)
        return Detections(b, det.scores.clone(), det.classes.clone())


def letterbox(image, size: int) -> tuple["torch.Tensor", Letterbox]:
    """A PIL RGB image -> ``([3, size, size] float in [0, 1], Letterbox)``: the long side scaled
    to ``size`` (bilinear), centred on grey (114), as Ultralytics feeds its models (RGB, no mean or
    std normalisation)."""
    import numpy as np
    import torch
    from PIL import Image
    w, h = image.size
    scale = size / max(w, h)
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    canvas = Image.new("RGB", (size, size), (LETTERBOX_FILL,) * 3)
    left, top = (size - nw) // 2, (size - nh) // 2
    canvas.paste(image.resize((nw, nh), Image.BILINEAR), (left, top))
    x = torch.from_numpy(np.asarray(canvas, dtype=np.float32).copy()).permute(2, 0, 1) / 255.0
    return x, Letterbox(scale, (left, top), (w, h))


def draw(image, det: Detections, path, *, names: Sequence[str] = COCO_CLASSES) -> None:
    """Draw ``det`` (in the image's pixels) on a copy of ``image`` and save it as PNG."""
    from PIL import ImageDraw
    im = image.copy()
    d = ImageDraw.Draw(im)
    palette = ((255, 56, 56), (72, 249, 10), (0, 194, 255), (255, 157, 151), (146, 204, 23),
               (255, 178, 29), (132, 56, 255), (82, 0, 133))
    width = max(1, round(max(im.size) / 320))
    for box, score, cls in zip(det.boxes.tolist(), det.scores.tolist(), det.classes.tolist()):
        colour = palette[int(cls) % len(palette)]
        d.rectangle(box, outline=colour, width=width)
        name = names[int(cls)] if 0 <= int(cls) < len(names) else str(int(cls))
        label = f"{name} {score:.2f}"
        x0, y0 = box[0], max(0.0, box[1] - 11)
        d.rectangle(d.textbbox((x0, y0), label), fill=colour)
        d.text((x0, y0), label, fill=(255, 255, 255))
    im.save(path, format="PNG")
