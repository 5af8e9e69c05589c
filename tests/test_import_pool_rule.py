"""A ROW_MAJOR pool output's shard width (issue 34: timm ghostnetv2_100 failed verify at its DFC
attention's 2x2 average pool, 80 channels on 2 block columns, where ttnn 0.81.1's output shard is
64 wide and the rule said 48). The rule (``ops.pool.sharding.row_major_shard_width``) was
measured on the mock n150; the numbers below are ttnn's, and the corpus cases of
tests/rules_corpus.py ``pool_rm_width_cases`` are run through ttnn here, output shard included."""
import pytest

import rules_corpus as C
from ttmodels.ops.pool.sharding import (pool_output_memspec, pool_output_padded_shape,
                                        pool_parallel_config_of, row_major_shard_width)
from ttmodels.planning.layout import BLOCK, HEIGHT, WIDTH, MemSpec

# (C, channel shards) -> ttnn 0.81.1's ROW_MAJOR output shard width (avg and max pool, height /
# width / block shards, measured on the mock n150)
MEASURED = {(16, 2): 16, (24, 2): 16, (32, 4): 16, (40, 2): 32, (40, 4): 16, (72, 2): 64,
            (72, 4): 32, (80, 2): 64, (80, 4): 32, (96, 2): 48, (96, 4): 32, (112, 2): 64,
            (144, 2): 96, (144, 4): 64, (160, 2): 80, (160, 4): 64, (176, 2): 96, (176, 4): 64,
            (200, 2): 128, (200, 4): 64,
            # height shards: one channel shard
            (16, 1): 16, (24, 1): 32, (40, 1): 64, (48, 1): 48, (56, 1): 64, (80, 1): 80,
            (200, 1): 224}

# (C, channel shards) -> ttnn's padded C of that ROW_MAJOR output (the shards past C are not
# counted: 40 channels on 4 columns of 16 -> 48)
MEASURED_PADDED = {(16, 2): 16, (24, 4): 32, (40, 2): 64, (40, 4): 48, (48, 4): 48, (72, 4): 96,
                   (80, 2): 128, (144, 4): 192, (160, 2): 160, (200, 4): 256, (40, 1): 64,
                   (200, 1): 224, (80, 1): 80}


@pytest.mark.parametrize("c,cores_c", sorted(MEASURED))
def test_a_row_major_pool_outputs_shard_width_is_ttnns(c, cores_c):
    assert row_major_shard_width(c, cores_c) == MEASURED[c, cores_c]


def _mem(kind, c, cores_c):
    grid = (cores_c, 2) if kind == BLOCK else (cores_c, 1)
    sw = c if kind == HEIGHT else -(-(-(-c // cores_c)) // 8) * 8
    return MemSpec(kind, "l1", grid, grid[0] * grid[1], (32, sw))


@pytest.mark.parametrize("kind", [BLOCK, WIDTH])
def test_ghostnetv2s_dfc_pool_gets_ttnns_64_wide_shards_and_padded_shape(kind):
    mem = _mem(kind, 80, 2)
    out = pool_output_memspec(pool_parallel_config_of(mem), 16, 80, out_tiled=False)
    assert out.shard_shape[1] == 64
    assert pool_output_padded_shape(out, 16, 80, out_tiled=False)[3] == 128
    # a TILE output keeps whole tiles per core (unchanged)
    assert pool_output_memspec(pool_parallel_config_of(mem), 16, 80, out_tiled=True).shard_shape == (32, 64)


@pytest.mark.parametrize("c,cores_c", sorted(MEASURED_PADDED))
def test_a_row_major_pool_outputs_padded_channels_are_ttnns(c, cores_c):
    kind = HEIGHT if cores_c == 1 else BLOCK
    mem = pool_output_memspec(pool_parallel_config_of(_mem(kind, c, cores_c)), 16, c,
                              out_tiled=False)
    assert pool_output_padded_shape(mem, 16, c, out_tiled=False)[3] == MEASURED_PADDED[c, cores_c]


def test_ttnn_gives_the_planned_output_shard_on_the_corpus_cases():
    """Each corpus case runs through the project's pool layer on the mock device; ttnn must
    accept it and return exactly the planned output memory (shard shape and cores)."""
    from ttmodels.backends import mock_device
    from ttmodels.tools.ttnn_compare import describe_key, planned_memory_key

    cases = list(C.pool_rm_width_cases())
    assert len(cases) >= 8
    tt, dev = mock_device.open_device("n150", l1_small_size=32768)
    try:
        got = {c.id: C.ttnn_verdict(c, tt, dev) for c in cases}
    finally:
        tt.close_device(dev)
    bad = [f"{c.id}: planned {describe_key(planned_memory_key(c.output.memory))}, "
           f"ttnn {got[c.id].memory or got[c.id].error}" for c in cases
           if not got[c.id].accepted or not c.rule_violations() == []
           or got[c.id].memory != describe_key(planned_memory_key(c.output.memory))]
    assert not bad, "\n".join(bad)
