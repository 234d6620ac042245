"""A process that ``fastworker dev`` starts ends when ``fastworker dev`` ends, however it
ends (SIGKILL included).

Its children run in sessions of their own, so that the terminal's Ctrl-C reaches only
``fastworker dev``, which stops them in order; nothing sent to its process group reaches
them either. So each child asks the kernel (Linux's ``PR_SET_PDEATHSIG``) for a SIGTERM
when its parent dies, and drains as if stopped by hand. The parent's pid comes in
``FASTWORKER_DEV_PARENT``; a child whose parent is already gone stops at once.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PARENT_ENV = "FASTWORKER_DEV_PARENT"
_PR_SET_PDEATHSIG = 1


def follow_parent() -> bool:
    """Arrange to get SIGTERM when the ``fastworker dev`` that started this process dies;
    ``False`` if it has died already. The variable is not passed on to our own children."""
    parent = os.environ.pop(PARENT_ENV, None)
    if parent is None or not parent.isdigit():
        return True
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):
            return True
    return os.getppid() == int(parent)  # checked after: a death before it went unseen
