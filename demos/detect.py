#!/usr/bin/env python
"""Detect objects with YOLOv8 through ttmodels (sim backend here, ttnn on a card), decode the
boxes and run NMS on the host, and write a PNG with the boxes drawn.

    python demos/detect.py --image x.jpg [--model yolov8n|yolov8s] [--weights FILE]
                           [--size 640] [--out detections.png] [--conf 0.25] [--iou 0.45]
                           [--backend auto|sim|ttnn] [--profile tt-perf]

--weights takes an Ultralytics DetectionModel's state dict saved as .safetensors or .pth
(weights_only; key names model.0.conv.weight ...; see weights/README.md for how to save one from
a yolov8n.pt). Without --weights the net has seeded random weights and the boxes mean nothing
(it says so). Without --image it uses the sample photo that ships with matplotlib.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from a checkout without installing

MODELS = ("yolov8n", "yolov8s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", help="image file (default: matplotlib's sample photo)")
    ap.add_argument("--model", default="yolov8n", choices=MODELS)
    ap.add_argument("--weights", default=None,
                    help="FILE (.safetensors/.pth) with Ultralytics key names (default: random)")
    ap.add_argument("--size", type=int, default=640,
                    help="square input size, a multiple of 32 (default: %(default)s)")
    ap.add_argument("--out", default="detections.png", help="PNG to write (default: %(default)s)")
    ap.add_argument("--conf", type=float, default=0.25, help="score threshold (default: %(default)s)")
    ap.add_argument("--iou", type=float, default=0.45, help="NMS IoU threshold (default: %(default)s)")
    ap.add_argument("--max-det", type=int, default=100, help="at most this many boxes")
    ap.add_argument("--backend", default="sim", choices=("auto", "sim", "ttnn"))
    ap.add_argument("--profile", default=None,
                    help="precision profile: bfp8_weights, tt-perf, float32 (default: the spec's)")
    args = ap.parse_args(argv)
    if args.size < 32 or args.size % 32:
        print(f"error: --size {args.size}: give a positive multiple of 32", file=sys.stderr)
        return 2
    if not 0 <= args.conf <= 1 or not 0 <= args.iou <= 1 or args.max_det < 1:
        print("error: --conf and --iou are in [0, 1], --max-det is positive", file=sys.stderr)
        return 2

    from ttmodels.errors import Error
    from ttmodels.planning.plan_plot import check_plot_path
    from ttmodels.tools import yolo
    from ttmodels.tools.images import ImageError, load_rgb, sample_image_path
    from ttmodels.tools.runs import build_and_run, weights_problem

    problem = weights_problem(args.weights)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        # before the model runs: a directory, a missing or unwritable one fails only at the end
        out = Path(check_plot_path(args.out, "--out"))
    except Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    try:
        path = Path(args.image) if args.image else sample_image_path()
        image = load_rgb(path)
    except ImageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    x, box = yolo.letterbox(image, args.size)

    weights = args.weights if args.weights is not None else "random"
    done = build_and_run(args.model, lambda: weights, x.unsqueeze(0), backend=args.backend,
                         input_size=(args.size, args.size), profile=args.profile)
    if isinstance(done, int):
        return done
    model, outputs, build_s, run_s = done

    boxes, scores = yolo.decode(outputs)
    det = yolo.nms(boxes, scores, conf=args.conf, iou=args.iou, max_det=args.max_det)[0]
    det = box.to_original(det)
    yolo.draw(image, det, out)

    print(f"model: {args.model}   backend: {model.backend_name}   weights: {weights}   "
          f"image: {path.name} ({image.size[0]}x{image.size[1]}, input {args.size}x{args.size})")
    if weights == "random":
        print("NOTE: random weights -- these boxes are meaningless. Pass --weights FILE (an "
              "Ultralytics state dict, see weights/README.md) for real ones.")
    for b, s, c in list(zip(det.boxes.tolist(), det.scores.tolist(), det.classes.tolist()))[:10]:
        print(f"  {s:5.2f}  {yolo.COCO_CLASSES[c]:<14} "
              f"[{b[0]:.0f}, {b[1]:.0f}, {b[2]:.0f}, {b[3]:.0f}]")
    if len(det) > 10:
        print(f"  ... {len(det) - 10} more")
    print(f"{len(det)} boxes; wrote {out}; net {run_s:.2f} s, build {build_s:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
