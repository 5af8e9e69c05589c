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
    was violated at run time (sim backend). Names the layer and, for budgets, the bytes; from the
    planner also the spec file and line of the layer (``file``/``line``, None when unknown)."""

    def __init__(self, message: str, *, layer: str | None = None, rule: str | None = None,
                 file: str | None = None, line: int | None = None, loc: str | None = None):
        if loc is not None and file is None:          # "file:line" (str(SourceLoc)) or "file"
            head, _, tail = loc.rpartition(":")
            file, line = (head, int(tail)) if head and tail.isdigit() else (loc, None)
        self.layer, self.rule, self.reason, self.file, self.line = layer, rule, message, file, line
        where = f"{file}:{line}" if file is not None and line is not None else file
        self.loc = where
        prefix = ", ".join(p for p in (where, f"layer '{layer}'" if layer else None) if p)
        suffix = f" [rule {rule}]" if rule else ""
        super().__init__(f"{prefix + ': ' if prefix else ''}{message}{suffix}")

    def at(self, file: str | None, line: int | None) -> "LayoutError":
        """The same error located at a spec position (kept as it is if it already has one)."""
        if self.file is not None or file is None:
            return self
        return LayoutError(self.reason, layer=self.layer, rule=self.rule, file=file, line=line)

    def located(self, loc: str) -> "LayoutError":
        """The same error with the spec location (``file:line``) of its layer in front."""
        return LayoutError(self.reason, layer=self.layer, rule=self.rule, loc=loc)


class WeightsError(Error):
    """Weights that do not fit the spec: missing, unexpected or mis-shaped keys, keys with invalid
    values (NaN/Inf, negative BatchNorm variance, sparse or non-float tensors), unreadable files."""

    def __init__(self, message: str, *, missing=(), unexpected=(), mismatched=(), invalid=()):
        self.missing, self.unexpected, self.mismatched = list(missing), list(unexpected), list(mismatched)
        self.invalid = list(invalid)
        super().__init__(message)


class DeviceError(Error):
    """A Tenstorrent device was asked for and cannot be used."""
