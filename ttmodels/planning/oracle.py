"""What the planner asks of ttnn (docs/layouts.md "ttnn in the planning loop"), as an interface:
the planning core imports nothing above it. The ttnn-backed oracle (``tools/ttnn_oracle.py``: a
worker process on a mock device, a disk cache) implements ``StepOracle`` and registers how the
default one is made with ``provide`` when ``ttmodels`` is imported; tests pass their own."""
from __future__ import annotations

from typing import Any, Callable, Protocol


class Verdict(Protocol):
    """ttnn's answer on one step, as the planner reads it."""
    accepted: bool
    error: str | None
    memory: str | None        # ttnn's output memory config
    layout: str | None        # its tile layout and dtype
    op_l1: int | None         # ttnn's own per-core L1 figure for the step (op + its L1 inputs)

    @property
    def judged(self) -> bool: ...       # False: ttnn never saw the op (no verdict)

    @property
    def as_planned(self) -> bool: ...   # accepted, with the output the plan expects


class StepOracle(Protocol):
    """An oracle the planner consults: about conv candidates while it plans, then about every
    step of the finished plan (``plan.ttnn``)."""
    asks: bool    # False: it answers nothing (off); the plan then shows every step unconfirmed

    def mark(self) -> Any:
        """Where its counts stand before a plan (given back to ``confirm``)."""

    def judge_candidate(self, g, layer, flat) -> Verdict | None:
        """ttnn's verdict on one conv candidate (a PlannedLayer of graph ``g``; ``flat``: each
        tensor's flat shape), None when ttnn cannot be asked."""

    def judge_layer(self, g, layer, flat) -> Verdict | None:
        """ttnn's verdict on one planned layer (its per-core L1 figure, ``op_l1``), None when
        ttnn cannot be asked."""

    def judge_adapter(self, g, move, flat) -> Verdict | None:
        """ttnn's verdict on one adapter or spill the planner inserts (a ``plans.Adapter`` or
        a ``liveness.Spill``), None when ttnn cannot be asked."""

    def confirm(self, plan, rejected: list[str], since: Any) -> None:
        """Record what ttnn says about every step of ``plan`` as ``plan.ttnn``; ``rejected``:
        the conv candidates it refused while planning."""


class NoOracle:
    """An oracle that asks nothing: none registered (``ttmodels.tools.ttnn_oracle`` not
    imported), the plan records no verdicts. Implementations that are off build on it."""
    asks = False

    def mark(self) -> None:
        return None

    def judge_candidate(self, g, layer, flat) -> None:
        return None

    def judge_layer(self, g, layer, flat) -> None:
        return None

    def judge_adapter(self, g, move, flat) -> None:
        return None

    def confirm(self, plan, rejected, since) -> None:
        plan.ttnn = None


_RESOLVE: list[Callable[[bool | None, str], StepOracle]] = []


def provide(resolve: Callable[[bool | None, str], StepOracle]) -> None:
    """Register how ``plan_graph(oracle=None | True | False)`` finds its oracle for a plan of
    an arch (``ttmodels.arch`` name: the oracle asks that arch's chip)."""
    _RESOLVE[:] = [resolve]


def resolve(oracle, arch: str) -> StepOracle:
    """The oracle ``plan_graph``'s ``oracle`` argument names for a plan of ``arch``: None (the
    default: on unless the environment says off), True, False, or a StepOracle to use as it is."""
    if oracle is None or isinstance(oracle, bool):
        return _RESOLVE[0](oracle, arch) if _RESOLVE else NoOracle()
    return oracle


def over_bank(ans, bank: int) -> bool:
    """ttnn's own per-core figure for the step (op + its L1 inputs, ``Verdict.op_l1``) exceeds
    ``bank``: ttnn accepts the call, and the real run is out of memory."""
    l1 = getattr(ans, "op_l1", None)
    return isinstance(l1, int) and not isinstance(l1, bool) and l1 > bank
