"""Which backend ``"auto"`` means here: the real card when one is present, else the host sim."""
from __future__ import annotations

import logging
import os
from pathlib import Path

from ..errors import DeviceError

log = logging.getLogger("ttmodels")

BACKENDS = ("auto", "sim", "ttnn", "ttnn-mock")
# The Tenstorrent kernel driver (tt-kmd) exposes one character device per card here.
DEVICE_DIR = Path("/dev/tenstorrent")


def card_present(device_dir: Path | str | None = None) -> bool:
    """True when the Tenstorrent kernel driver lists at least one card."""
    d = Path(device_dir) if device_dir is not None else DEVICE_DIR
    try:
        return d.is_dir() and any(d.iterdir())
    except OSError:
        return False


def no_card_message(device_dir: Path | str | None = None) -> str:
    d = Path(device_dir) if device_dir is not None else DEVICE_DIR
    why = "the directory does not exist" if not d.exists() else "it lists no device"
    return (f"no Tenstorrent device found: backend='ttnn' needs a card driven by tt-kmd "
            f"({d} is where cards appear; {why}). Use backend='sim' to run on the host, or "
            f"backend='auto' to pick whichever is available.")


def resolve(name: str = "auto", *, device_dir: Path | str | None = None) -> str:
    """``"sim"`` or ``"ttnn"`` for a requested backend name. ``TTMODELS_BACKEND`` overrides
    ``"auto"`` (useful on a machine with a card to force the sim)."""
    if name not in BACKENDS:
        raise DeviceError(f"unknown backend {name!r}; expected one of {list(BACKENDS)}")
    if name == "auto":
        forced = os.environ.get("TTMODELS_BACKEND", "").strip().lower()
        if forced in ("sim", "ttnn"):
            log.info("ttmodels backend: %s (TTMODELS_BACKEND)", forced)
            name = forced
        elif card_present(device_dir):
            log.info("ttmodels backend: ttnn (Tenstorrent card found in %s)",
                     device_dir or DEVICE_DIR)
            return "ttnn"
        else:
            log.info("ttmodels backend: sim (no Tenstorrent card found in %s; running the "
                     "host model of TTNN)", device_dir or DEVICE_DIR)
            return "sim"
    if name == "ttnn-mock":
        return name   # the installed ttnn on a mock device (ttmodels.backends.mock_device): no card needed
    if name == "ttnn" and not card_present(device_dir):
        raise DeviceError(no_card_message(device_dir))
    return name
