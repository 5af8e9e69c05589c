import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# ttnn's host tile conversions need a cluster descriptor; without a card we give it a mock n150.
os.environ.setdefault("TT_METAL_MOCK_CLUSTER_DESC_PATH",
                      str(REPO / "ttmodels" / "data" / "wormhole_n150_mock_cluster.yaml"))
os.environ.setdefault("TT_LOGGER_LEVEL", "error")
os.environ.setdefault("LOGURU_LEVEL", "WARNING")
# Tests never read or write the user's prepared-weight cache.
os.environ["TTMODELS_CACHE_DIR"] = tempfile.mkdtemp(prefix="ttmodels-test-cache-")


def _card_present() -> bool:
    # Tenstorrent kernel driver exposes one node per card.
    return Path("/dev/tenstorrent").exists() and any(Path("/dev/tenstorrent").iterdir())


def pytest_collection_modifyitems(config, items):
    if _card_present():
        return
    skip = pytest.mark.skip(reason="needs a Tenstorrent card (no /dev/tenstorrent device found)")
    for item in items:
        if "device" in item.keywords:
            item.add_marker(skip)
