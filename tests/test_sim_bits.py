"""The sim's output bits are pinned (tests/sim_pins.py, tests/data/sim_bits.json): resnet50 and
bevdet_r50_encoder, default and tt-perf profiles, fixed seeds, torch pinned to ``THREADS``
thread(s) inside the test (sim bits depend on the thread count at the ulp level).

A failure means the sim now computes different values. If that is intended (a modelling fix, not
an optimisation), regenerate with ``scripts/pin_sim_bits.py`` and say why in the commit."""
import pytest
import torch

import sim_pins


@pytest.fixture(scope="module")
def pins():
    env = sim_pins.environment()
    p = sim_pins.load_pins().get(env)
    if p is None:
        pytest.skip(f"no sim bit pins for this environment ({env}); make them on known-good code "
                    "with scripts/pin_sim_bits.py")
    return p


@pytest.mark.parametrize("case", sim_pins.CASES, ids=lambda c: c.name)
def test_sim_output_bits_are_pinned(pins, case):
    threads = torch.get_num_threads()
    got = sim_pins.run_case(case)
    assert torch.get_num_threads() == threads          # the pin does not leak into other tests
    assert case.name in pins, f"no pin for {case.name}: run scripts/pin_sim_bits.py"
    known = sim_pins.variants(pins[case.name])
    assert got in known, (got, known)


def test_digest_sees_one_ulp():
    x = torch.linspace(-3, 3, 1000)
    y = x.clone()
    y.view(torch.int32)[500] += 1
    assert sim_pins.digest(x) != sim_pins.digest(y)
    assert sim_pins.digest(x) == sim_pins.digest(x.clone())
