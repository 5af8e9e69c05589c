import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("TT_LOGGER_LEVEL", "error")
os.environ.setdefault("LOGURU_LEVEL", "WARNING")
# Tests never read or write the user's prepared-weight cache (nor its mock-device runtime).
os.environ["TTMODELS_CACHE_DIR"] = tempfile.mkdtemp(prefix="ttmodels-test-cache-")
# Without a card, ttnn runs on a mock Wormhole n150: its host tile conversions (test_formats)
# and the mock device (test_verify) both need tt-metal pointed at the mock runtime before ttnn
# initialises, which happens once per process.
from ttmodels import mock_device  # noqa: E402

mock_device.prepare("n150")




def pytest_collection_modifyitems(config, items):
    from ttmodels.backends.select import card_present
    if card_present():
        return
    skip = pytest.mark.skip(reason="needs a Tenstorrent card (no /dev/tenstorrent device found)")
    for item in items:
        if "device" in item.keywords:
            item.add_marker(skip)
