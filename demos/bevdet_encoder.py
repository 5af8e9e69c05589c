#!/usr/bin/env python
"""Run BEVDet-R50's image encoder (ResNet50 + CustomFPN) on six camera images, or with --bev its
BEV encoder (CustomResNet + FPN_LSS) on a BEV feature map, through ttmodels.

    python demos/bevdet_encoder.py [--images CAM0 ... CAM5 | --dir DIR] [--weights random|FILE]
                                   [--backend auto|sim|ttnn] [--out features.png]
                                   [--input-size H W] [--device NAME] [--mesh n300|RxC]
    python demos/bevdet_encoder.py --bev [--bev-input FILE.npy] [--batch N] [--weights random|FILE]
                                   [--backend auto|sim|ttnn] [--out bev_features.png]

--bev runs bevdet_r50_bev_encoder on the view transformer's output, a [N, 64, 128, 128] BEV
feature: a synthetic one (smooth random maps, --batch N of them, default 1) or --bev-input
FILE.npy holding [64, H, W] or [N, 64, H, W] floats (H, W multiples of 8). The view transformer
itself (depth net + BEV pooling) is not part of ttmodels. It prints the input, stage and neck
shapes and the time, and saves a PNG with each sample's input and output channel-mean maps.

Images, in BEVDet's camera order CAM_FRONT_LEFT, CAM_FRONT, CAM_FRONT_RIGHT, CAM_BACK_LEFT,
CAM_BACK, CAM_BACK_RIGHT:
  --images   six files, in that order;
  --dir      a directory holding files named after the cameras (CAM_FRONT.jpg, cam_back_left.png,
             ...; any image extension, case-insensitive), otherwise its first six image files
             sorted by name, taken in camera order;
  neither    matplotlib's sample photo for all six cameras.
Any image mode works (grayscale, RGBA, 16-bit, CMYK, palette). A missing or unreadable file is
reported in one line and the demo exits with status 2.

Each image is prepared as BEVDet's test pipeline does (ttmodels.tools.bevdet.preprocess): resize by
fW / W (keeping the aspect ratio), keep the bottom fH rows and the centred fW columns, then mmcv
normalisation mean (123.675, 116.28, 103.53), std (58.395, 57.12, 57.375) with BEVDet's to_rgb
channel swap. Default input size 256 x 704.

Weights: "random" (default; seeded, BatchNorm calibrated: the features are then meaningless, only
the shapes and the pipeline are real) or a BEVDet checkpoint / state dict (.pth or .safetensors);
keys outside img_backbone./img_neck. (view transformer, BEV encoder, heads) are ignored and counted.

Prints the backend, the output shape, per-camera statistics of the neck output and the time, and
saves a PNG with each camera's input above its feature map (mean over the 512 channels), and
under them the encoder's plan: L1 per core of every layer, output layouts and adapters (the same
picture as `ttmodels plan bevdet_r50_encoder --batch 6 --input-size 256 704 --plot p.png`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from ttmodels.tools.runs import build_and_run  # noqa: E402  (after the path)

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".gif", ".ppm",
                  ".pgm", ".jp2")


def find_camera_files(directory: Path, cameras) -> list[Path]:
    """The six files for ``cameras`` in ``directory`` (see the module docstring). Raises
    ImageError with one line when that is impossible."""
    from ttmodels.tools.images import ImageError

    if not directory.is_dir():
        raise ImageError(f"--dir {directory}: not a directory")
    files = sorted(p for p in directory.iterdir()
                   if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    by_stem = {p.stem.upper(): p for p in files}
    named = [by_stem.get(cam.upper()) for cam in cameras]
    if all(named):
        return named
    if any(named):
        missing = [cam for cam, p in zip(cameras, named) if p is None]
        raise ImageError(f"--dir {directory}: has some camera-named images but not "
                         f"{', '.join(missing)}")
    if len(files) < len(cameras):
        raise ImageError(f"--dir {directory}: needs {len(cameras)} images (named after the "
                         f"cameras, or any six), found {len(files)}")
    return files[:len(cameras)]


def camera_preview(im, input_size):
    """The part of the image the encoder sees (BEVDet's resize + crop), for the figure."""
    from ttmodels.tools.bevdet import eval_transform

    t = eval_transform(im.height, im.width, input_size)
    return im.resize(t.resize_dims).crop(t.crop)


def save_figure(path: Path, cameras, previews, neck, title: str, plan=None) -> None:
    """Each camera's input above its feature map; with ``plan``, the encoder's plan strip (L1 per
    core per layer, output layouts, adapters: ttmodels.planning.plan_plot) underneath."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heat = neck.float().mean(dim=1)            # [6, h, w] channel mean
    width, cams_h = 3.2 * len(cameras), 3.4
    if plan is None:
        fig, axes = plt.subplots(2, len(cameras), figsize=(width, cams_h), squeeze=False)
        cells = [[axes[r, i] for i in range(len(cameras))] for r in range(2)]
    else:
        from ttmodels.planning.plan_plot import draw_plan, margins, plot_data

        data = plot_data(plan)
        m = margins(data)
        strip_h = 4.6
        height = 0.5 + cams_h + 0.7 + strip_h + m["bottom"]
        fig = plt.figure(figsize=(width, height))
        fig.subplots_adjust(left=m["left"] / width, right=1 - m["right"] / width,
                            bottom=m["bottom"] / height, top=1 - 0.5 / height, hspace=0.0)
        outer = fig.add_gridspec(3, 1, height_ratios=[cams_h, 0.7, strip_h])
        top = outer[0].subgridspec(2, len(cameras), hspace=0.35, wspace=0.25)
        cells = [[fig.add_subplot(top[r, i]) for i in range(len(cameras))] for r in range(2)]
        draw_plan(fig, data, outer[2])
    for i, cam in enumerate(cameras):
        cells[0][i].imshow(previews[i])
        cells[0][i].set_title(cam, fontsize=9)
        im = cells[1][i].imshow(heat[i].numpy(), cmap="viridis")
        cells[1][i].set_title(f"mean {float(heat[i].mean()):+.3f}", fontsize=8)
        fig.colorbar(im, ax=cells[1][i], fraction=0.046, pad=0.02)
        for ax in (cells[0][i], cells[1][i]):
            ax.set_xticks([])
            ax.set_yticks([])
    fig.suptitle(title, fontsize=10)
    if plan is None:
        fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


BEV_CHANNELS = 64          # bevdet-r50 numC_Trans


def load_bev_input(path: Path):
    """[N, 64, H, W] float32 from a .npy file ([64, H, W] gets a batch of 1). Raises ValueError
    with one line naming the file when it cannot be used."""
    import numpy as np
    import torch

    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"--bev-input {path}: cannot read a .npy array ({e})") from None
    if a.ndim == 3:
        a = a[None]
    if a.ndim != 4 or a.shape[1] != BEV_CHANNELS:
        raise ValueError(f"--bev-input {path}: expected [{BEV_CHANNELS}, H, W] or "
                         f"[N, {BEV_CHANNELS}, H, W], got shape {list(a.shape)}")
    if a.shape[2] % 8 or a.shape[3] % 8 or min(a.shape[2:]) < 8:
        raise ValueError(f"--bev-input {path}: H and W must be multiples of 8, got "
                         f"{a.shape[2]}x{a.shape[3]}")
    if not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
        raise ValueError(f"--bev-input {path}: dtype {a.dtype} is not a real number type")
    t = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"--bev-input {path}: contains NaN or infinite values")
    return t


def save_bev_figure(path: Path, bev, neck, title: str, max_samples: int = 4) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = min(bev.shape[0], max_samples)
    fig, axes = plt.subplots(2, n, figsize=(3.6 * n, 6.6), squeeze=False)
    for i in range(n):
        for row, (t, what) in enumerate(((bev, f"input {tuple(bev.shape[1:])}"),
                                         (neck, f"neck {tuple(neck.shape[1:])}"))):
            m = t[i].float().mean(dim=0)
            im = axes[row, i].imshow(m.numpy(), cmap="viridis", origin="lower")
            axes[row, i].set_title(f"sample {i}: {what} channel mean", fontsize=8)
            fig.colorbar(im, ax=axes[row, i], fraction=0.046, pad=0.02)
            axes[row, i].set_xticks([])
            axes[row, i].set_yticks([])
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def bev_main(args) -> int:
    import ttmodels
    from ttmodels.weights import random_state_dict, synthetic_images

    spec = "bevdet_r50_bev_encoder"
    if args.images or args.dir:
        print("error: --bev takes a BEV feature (--bev-input FILE.npy), not camera images",
              file=sys.stderr)
        return 2
    if args.bev_input:
        try:
            x = load_bev_input(Path(args.bev_input))
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        source = Path(args.bev_input).name
    else:
        if args.batch < 1:
            print(f"error: --batch {args.batch}: must be at least 1", file=sys.stderr)
            return 2
        x = synthetic_images(args.batch, BEV_CHANNELS, 128, 128, seed=2024)
        source = "synthetic BEV feature"
    batch, size = x.shape[0], tuple(x.shape[2:])
    if args.weights != "random" and not Path(args.weights).is_file():
        print(f"error: weights file not found: {args.weights}", file=sys.stderr)
        return 2
    def weights():
        if args.weights != "random":
            return args.weights
        # BN calibration on 4 synthetic maps: the default (sized for 224x224 images) would run
        # 25 128x128 maps through the float32 reference
        return random_state_dict(ttmodels.load_graph(spec, input_size=size), calibration_batch=4)
    done = build_and_run(spec, weights, x, backend=args.backend, batch_size=batch,
                         input_size=size, device=args.device)
    if isinstance(done, int):
        return done
    model, outputs, build_s, run_s = done
    neck = outputs["neck"]
    print(f"backend: {model.backend_name}   weights: {model.weights_info or args.weights}")
    print(f"input: {tuple(x.shape)} ({source})")
    for name, t in outputs.items():
        print(f"  {name:<8} {tuple(t.shape)}  mean {float(t.float().mean()):+.4f}  "
              f"std {float(t.float().std()):.4f}")
    if args.weights == "random":
        print("NOTE: random weights - these features are meaningless (only shapes and the "
              "pipeline are real).")
    print(f"time: {run_s:.2f} s for batch {batch} (build {build_s:.2f} s)")
    out = Path(args.out)
    try:
        save_bev_figure(out, x, neck, f"BEVDet-R50 BEV encoder, {model.backend_name} backend\n"
                        f"{'random weights' if args.weights == 'random' else Path(args.weights).name}, "
                        f"{source}")
    except OSError as e:
        print(f"error: cannot write {out}: {e}", file=sys.stderr)
        return 2
    print(f"saved {out}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--images", nargs=6, metavar="IMG",
                     help="six image files in camera order (see below)")
    src.add_argument("--dir", help="directory of camera images (see below)")
    ap.add_argument("--weights", default="random",
                    help="random | FILE (.pth BEVDet checkpoint or .safetensors). Default: random")
    ap.add_argument("--backend", default="auto", choices=("auto", "sim", "ttnn"))
    ap.add_argument("--out", default=None,
                    help="PNG to write (default features.png, with --bev bev_features.png)")
    ap.add_argument("--bev", action="store_true",
                    help="run the BEV encoder (CustomResNet + FPN_LSS) instead of the image encoder")
    ap.add_argument("--bev-input", metavar="FILE.npy",
                    help="with --bev: the BEV feature [64, H, W] or [N, 64, H, W] (default: synthetic)")
    ap.add_argument("--batch", type=int, default=1,
                    help="with --bev and no --bev-input: how many synthetic BEV maps (default 1)")
    ap.add_argument("--input-size", nargs=2, type=int, metavar=("H", "W"), default=(256, 704),
                    help="network input size (default 256 704, BEVDet-R50's)")
    ap.add_argument("--mesh", default=None,
                    help="data parallel over the chips of n300 (3 cameras per chip) or ROWSxCOLS; "
                         "the six cameras must divide over them (default: one chip)")
    from ttmodels.tools.cli import device_name
    ap.add_argument("--device", type=device_name, default=None, metavar="NAME",
                    help="the system by name: n150 (default), n300, t3000, galaxy, p150, p150x4; "
                         "a multi-chip one runs data parallel (the six cameras must divide)")
    args = ap.parse_args(argv)
    from ttmodels.errors import Error
    from ttmodels.planning.plan_plot import check_plot_path
    from ttmodels.tools.runs import weights_problem
    problem = weights_problem(args.weights)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        # before minutes of building: savefig would write DIR.png for --out DIR
        args.out = check_plot_path(args.out or ("bev_features.png" if args.bev else
                                                "features.png"), "--out")
    except Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.bev:
        return bev_main(args)
    if args.bev_input:
        print("error: --bev-input needs --bev", file=sys.stderr)
        return 2
    size = tuple(args.input_size)
    if min(size) < 32:
        print(f"error: --input-size {size[0]} {size[1]}: both must be at least 32", file=sys.stderr)
        return 2

    from ttmodels.tools.bevdet import CAMERA_ORDER, preprocess_cameras
    from ttmodels.tools.images import ImageError, load_rgb, sample_image_path

    try:
        if args.images:
            paths = [Path(p) for p in args.images]
        elif args.dir:
            paths = find_camera_files(Path(args.dir), CAMERA_ORDER)
        else:
            paths = [sample_image_path()] * len(CAMERA_ORDER)
        images = [load_rgb(p) for p in paths]
    except ImageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.weights != "random" and not Path(args.weights).is_file():
        print(f"error: weights file not found: {args.weights}", file=sys.stderr)
        return 2

    x = preprocess_cameras(images, size)
    done = build_and_run("bevdet_r50_encoder", lambda: args.weights, x, backend=args.backend,
                         batch_size=len(CAMERA_ORDER), input_size=size, mesh=args.mesh,
                         device=args.device)
    if isinstance(done, int):
        return done
    model, outputs, build_s, run_s = done
    names = list(outputs)
    neck = outputs[names[0]]

    print(f"backend: {model.backend_name}   weights: {model.weights_info or args.weights}")
    print(f"input: {tuple(x.shape)} (6 cameras, BEVDet order)   "
          f"output '{names[0]}': {tuple(neck.shape)}")
    for n in names[1:]:
        print(f"  also '{n}': {tuple(outputs[n].shape)}")
    if args.weights == "random":
        print("NOTE: random weights - these features are meaningless (only shapes and the "
              "pipeline are real). Pass --weights FILE with a BEVDet-R50 checkpoint for real ones.")
    print(f"{'camera':<16} {'image':<28} {'mean':>9} {'std':>9} {'min':>9} {'max':>9}")
    for i, cam in enumerate(CAMERA_ORDER):
        f = neck[i].float()
        print(f"{cam:<16} {paths[i].name[:28]:<28} {float(f.mean()):9.4f} {float(f.std()):9.4f} "
              f"{float(f.min()):9.4f} {float(f.max()):9.4f}")
    if model.mesh is not None:
        print(f"mesh: {model.mesh.describe()}, {model.plan.per_chip_batch} cameras per chip")
    print(f"time: {run_s:.2f} s for 6 cameras (build {build_s:.2f} s)")

    out = Path(args.out)
    previews = [camera_preview(im, size) for im in images]
    weights_note = "random weights: features meaningless" if args.weights == "random" \
        else f"weights {Path(args.weights).name}"
    try:
        save_figure(out, CAMERA_ORDER, previews, neck,
                    f"BEVDet-R50 encoder, {model.backend_name} backend, {weights_note}; "
                    f"top: network input crop, bottom: channel mean of {names[0]} "
                    f"{tuple(neck.shape[1:])}; below: the encoder's plan",
                    plan=model.plan)
    except OSError as e:
        print(f"error: cannot write {out}: {e}", file=sys.stderr)
        return 2
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
