"""Large values give their memory back to the system once freed.

glibc's malloc serves a block above its mmap threshold with a mapping of its own, which
goes back to the system when the block is freed. But each time such a block is freed it
raises the threshold to that block's size (up to 32 MiB), so the next 16 MB argument comes
from the heap instead, where freed memory stays resident: a control plane that had run a
dozen 16 MB tasks one after another kept ~60 MiB it no longer used (~115 MiB on a busy
machine). Setting the threshold once, as ``MALLOC_MMAP_THRESHOLD_`` would, turns that
adjustment off. A threshold the operator set in the environment is left alone; other C
libraries (musl) are left as they are.
"""

from __future__ import annotations

import ctypes
import os
import sys

MMAP_THRESHOLD = 1024 * 1024  # blocks from 1 MiB up get mappings of their own
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h


def return_large_blocks_to_the_system() -> bool:
    """Fix glibc's mmap threshold at ``MMAP_THRESHOLD``; True if it was set here."""
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def give_free_memory_back() -> bool:
    """Return the free pages of glibc's heaps to the system (``malloc_trim``): freed
    small blocks stay resident otherwise, however many there are. True if any was."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    malloc_trim.argtypes = [ctypes.c_size_t]
    malloc_trim.restype = ctypes.c_int
    return bool(malloc_trim(0))
