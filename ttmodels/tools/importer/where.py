"""Where something happened, in the user's terms: a source path without the machine's part, the
first line of an exception's message, the innermost frame of its traceback outside torch and
ttmodels (the line of the user's or the model library's code)."""
from __future__ import annotations

import os


def _short_path(path: str) -> str:
    """A source path without the machine's part: relative to site-packages or the cwd."""
    p = path.replace(os.sep, "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in p:
            return p.split(marker, 1)[1]
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            return rel.replace(os.sep, "/")
    except ValueError:
        pass
    return os.path.basename(path)


def _first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[0][:300] if lines else "(no message)"


def _user_frame(e: BaseException) -> str:
    """`` (at file.py:N)``: the innermost frame of ``e``'s traceback outside torch and ttmodels,
    the line of the user's (or the model library's) code that failed."""
    import traceback

    import torch
    skip = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep)
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not os.path.abspath(f.filename).startswith(skip) and
              not f.filename.startswith("<")]
    if not frames:
        return ""
    return f" (at {_short_path(frames[-1].filename)}:{frames[-1].lineno})"
