import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("TT_LOGGER_LEVEL", "error")
os.environ.setdefault("LOGURU_LEVEL", "WARNING")
# Tests never read or write the user's prepared-weight cache (nor its mock-device runtime).
os.environ["TTMODELS_CACHE_DIR"] = tempfile.mkdtemp(prefix="ttmodels-test-cache-")
# The planner asks ttnn nothing unless a test says so (plan_graph(..., oracle=True),
# tests/test_ttnn_oracle.py): hundreds of plans would otherwise each start a mock-device worker.
os.environ["TTMODELS_TTNN_ORACLE"] = "0"
# Without a card, ttnn runs on a mock Wormhole n150: its host tile conversions (test_formats)
# and the mock device (test_verify) both need tt-metal pointed at the mock runtime before ttnn
# initialises, which happens once per process.
from ttmodels.backends import mock_device  # noqa: E402

mock_device.prepare("n150")




def pytest_collection_modifyitems(config, items):
    from ttmodels.backends.select import card_present
    if card_present():
        return
    skip = pytest.mark.skip(reason="needs a Tenstorrent card (no /dev/tenstorrent device found)")
    for item in items:
        if "device" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def real_run():
    """``real_run(spec, addresses=True, **load_graph kwargs) -> (plan, verify report)``: the plan
    run for real on the mock n150, once per session whichever test module asks (each run is a
    few seconds to a minute on two cores)."""
    from ttmodels.planning.planner import plan_graph
    from ttmodels.language.spec import load_graph
    from ttmodels.tools.verify import verify
    cache = {}

    def get(spec, addresses=True, **kw):
        key = (str(spec), addresses, tuple(sorted(kw.items())))
        if key not in cache:
            plan = plan_graph(load_graph(spec, **kw), addresses=addresses)
            cache[key] = (plan, verify(None, plan=plan))
        return cache[key]
    return get
