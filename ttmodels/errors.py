"""The library's error types. All are ValueErrors so callers can catch bad input generically."""
from __future__ import annotations


class Error(ValueError):
    """Base class of every error ttmodels raises about the user's input."""


class SpecError(Error):
    """A defect in a model spec. The message names the file, the line and the layer."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 layer: str | None = None):
        self.file, self.line, self.layer, self.reason = file, line, layer, message
        where = []
        if file is not None:
            where.append(f"{file}:{line}" if line is not None else file)
        elif line is not None:
            where.append(f"line {line}")
        if layer is not None:
            where.append(f"layer '{layer}'")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class LayoutError(Error):
    """No memory layout satisfies a layer (L1 budget, shard grid, op rules), or an op's layout rule
    was violated at run time (sim backend). Names the layer and, for budgets, the bytes."""

    def __init__(self, message: str, *, layer: str | None = None, rule: str | None = None,
                 loc: str | None = None):
        self.layer, self.rule, self.reason, self.loc = layer, rule, message, loc
        where = [w for w in (loc, f"layer '{layer}'" if layer else None) if w]
        prefix = f"{', '.join(where)}: " if where else ""
        suffix = f" [rule {rule}]" if rule else ""
        super().__init__(f"{prefix}{message}{suffix}")

    def located(self, loc: str) -> "LayoutError":
        """The same error with the spec location (``file:line``) of its layer in front."""
        return LayoutError(self.reason, layer=self.layer, rule=self.rule, loc=loc)


class WeightsError(Error):
    """Weights that do not fit the spec: missing, unexpected or mis-shaped keys, unreadable files."""

    def __init__(self, message: str, *, missing=(), unexpected=(), mismatched=()):
        self.missing, self.unexpected, self.mismatched = list(missing), list(unexpected), list(mismatched)
        super().__init__(message)


class DeviceError(Error):
    """A Tenstorrent device was asked for and cannot be used."""
