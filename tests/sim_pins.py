"""Pinned sim output bits: the cases, their seeded weights and inputs, and the hash of the outputs.

``tests/test_sim_bits.py`` recomputes every case and compares with ``tests/data/sim_bits.json``,
which ``scripts/pin_sim_bits.py`` writes. The pins say what the sim computes, bit for bit, so a
speed-up of the sim cannot silently change its results.

Everything a case depends on is fixed here, not borrowed from code that may legitimately change:
- weights: drawn from a seeded torch Generator per state-dict key (no BN calibration, which runs
  the float32 reference model and so would pin that too); BatchNorm statistics are random but
  fixed, so BN folding is exercised;
- inputs: seeded ``torch.randn``;
- torch's thread count: ``THREADS`` (the sim's float32 sums depend on it at the ulp level, because
  torch picks a different conv algorithm / blocking per thread count);
- the weight cache is off.
torch's kernels also differ per CPU instruction set and torch version, so a pin is stored per
``environment()``; the test skips (saying how to make pins) on an environment without one. Two
CPUs with the same torch capability can still differ (oneDNN picks kernels per
microarchitecture: bevdet's float32 sums differ between the machine the pins were first made on
and an AMD EPYC with AVX512-BF16), so a case may hold several known-good variants, each made on
known-good code (``scripts/pin_sim_bits.py --add-variant``); the output must equal one of them.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

PINS = Path(__file__).resolve().parent / "data" / "sim_bits.json"
THREADS = 1


@dataclass(frozen=True)
class Case:
    name: str
    spec: object
    batch: int
    size: tuple[int, int]
    profile: str | None


# resnet50's shipped default is `precision: auto` (issue 33), resolved per layer from weights that
# may be re-resolved; the pins keep the bfloat16 activations / bfloat8_b weights / HiFi2 default
# they were made at, so that they pin the sim, not that choice.
RESNET50 = {"extends": "resnet50",
            "defaults": {"layout": "auto", "precision": {"activations": "bfloat16",
                                                         "weights": "bfloat8_b",
                                                         "math_fidelity": "HiFi2"}},
            "outputs": {"logits": "fc", **{s: s for s in ("layer1", "layer2", "layer3", "layer4")}}}

# Rounding to bfloat16 / bfloat8_b hides most float32-level changes (a different summation
# order moves a sum by an ulp of float32, which rarely changes its bfloat16 rounding), so the
# float32 profile is pinned too: there every float32 bit of every sum shows.
BEVDET_F32 = {"extends": "bevdet_r50_encoder",
              "profiles": {"float32": {"activations": "float32", "weights": "float32",
                                       "math_fidelity": "HiFi4", "fp32_accum": True}}}

CASES = (
    Case("resnet50-b1-224-float32", RESNET50, 1, (224, 224), "float32"),
    Case("bevdet_r50_encoder-b1-128x352-float32", BEVDET_F32, 1, (128, 352), "float32"),
    Case("resnet50-b1-224-default", RESNET50, 1, (224, 224), None),
    Case("resnet50-b1-224-tt-perf", RESNET50, 1, (224, 224), "tt-perf"),
    Case("resnet50-b2-128-default", RESNET50, 2, (128, 128), None),
    Case("bevdet_r50_encoder-b1-128x352-default", "bevdet_r50_encoder", 1, (128, 352), None),
    Case("bevdet_r50_encoder-b1-128x352-tt-perf", "bevdet_r50_encoder", 1, (128, 352), "tt-perf"),
)


def variants(pin) -> list:
    """The known-good outputs of one case: a pin is one output dict, or a list of them."""
    return pin if isinstance(pin, list) else [pin]


def environment() -> str:
    """What torch's float32 results depend on besides the thread count."""
    import torch
    return f"torch {torch.__version__.split('+')[0]}, cpu {torch.backends.cpu.get_cpu_capability()}"


@contextlib.contextmanager
def pinned_threads(n: int = THREADS):
    import torch
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def state_dict(graph, seed: int = 0) -> dict:
    """Seeded weights for every key the graph reads (He-normal convs, small residual-end BN scales
    so that the deep net stays well conditioned, random BN statistics)."""
    import torch
    from ttmodels.weights.reference import expected_parameters
    g = torch.Generator().manual_seed(seed)
    sd = {}
    for key, shape in expected_parameters(graph).items():
        n = len(shape)
        if key.endswith(".weight") and n == 4:
            sd[key] = torch.randn(shape, generator=g) * math.sqrt(2.0 / math.prod(shape[1:]))
        elif key.endswith(".weight") and n == 2:
            sd[key] = torch.randn(shape, generator=g) / math.sqrt(shape[1])
        elif key.endswith("running_var"):
            sd[key] = 0.5 + torch.rand(shape, generator=g)
        elif key.endswith("running_mean"):
            sd[key] = 0.1 * torch.randn(shape, generator=g)
        elif key.endswith(".weight"):           # BN scale; bn3 ends a bottleneck's branch
            lo, hi = (0.05, 0.2) if key.split(".")[-2] == "bn3" else (0.5, 1.0)
            sd[key] = lo + (hi - lo) * torch.rand(shape, generator=g)
        else:
            sd[key] = 0.1 * torch.randn(shape, generator=g)
    return sd


def digest(t) -> str:
    import torch
    t = t.detach().to(torch.float32).contiguous()
    return hashlib.sha256(t.numpy().tobytes()).hexdigest()[:32]


def run_case(case: Case) -> dict[str, str]:
    """Output name -> sha256 prefix of its float32 bytes (shape included in the name's value)."""
    import torch
    import ttmodels
    with pinned_threads():
        graph = ttmodels.load_graph(case.spec, batch_size=case.batch, input_size=case.size)
        sd = state_dict(graph)
        x = torch.randn(case.batch, 3, *case.size, generator=torch.Generator().manual_seed(1))
        with ttmodels.build(case.spec, weights=sd, backend="sim", batch_size=case.batch,
                            input_size=case.size, profile=case.profile, cache=False) as m:
            outs = m.run(x)
    return {k: f"{list(v.shape)} {digest(v)}" for k, v in sorted(outs.items())}


def load_pins() -> dict:
    if not PINS.exists():
        return {}
    return json.loads(PINS.read_text())
