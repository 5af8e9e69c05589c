"""Reading files the user names without hanging on what is not a regular file."""
from __future__ import annotations

import os
import stat


def irregular(path) -> str | None:
    """What ``path`` is when it is not a regular file ("a FIFO (named pipe)", "a directory"),
    None for a regular file (symlinks followed). Opening a FIFO blocks until a writer comes and
    a device may never end (/dev/zero), so readers check this first. Raises OSError as
    ``os.stat`` does (missing, unreadable, name too long) and ValueError on an embedded NUL."""
    mode = os.stat(path).st_mode
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return None if stat.S_ISREG(mode) else "not a regular file"
