"""A Spark task's Python worker keeps the memory it frees for its next batches.

A tstream task allocates and frees about its input's size in buffers as it goes: Spark's Arrow
batches as they arrive, each segment's share of a batch, Parquet pages, numpy stamps (sink); row
groups decoded and shaped for Spark (source). By default both allocators involved hand freed
memory back to the kernel at once — pyarrow's mimalloc purges freed pages after 10 ms, and
glibc's ``malloc`` (numpy's arrays) unmaps large blocks and trims its heap — so the next batch
faults the same amount in again, each page zeroed by the kernel. Measured in Spark workers
(``bench_spark.py``, 5M rows on 2 cores): 15,000–35,000 page faults per 1.25M-row sink task and
0.09–0.15 s of its kernel CPU; with freed memory kept, 1,500 faults and 0.05–0.08 s (the rest is
writing the chunk files). A source query's 8 tasks: 25,000–35,000 faults, 2,600 kept.

:func:`keep_freed_memory` runs once per worker process, where a Spark task starts, and only
there (a library call never changes the allocator of a user's own process): glibc keeps freed
blocks below :data:`MMAP_THRESHOLD` in its heap and trims it only past :data:`TRIM_THRESHOLD`,
and pyarrow's default pool becomes the system allocator (glibc), so Arrow's buffers are kept the
same way. A worker's memory then stays near its peak until Spark ends the worker (after a minute
idle): the peak is what the task needed anyway, so memory limits are met as before.

Linux with glibc only; elsewhere, and when the worker's environment sets
``TSTREAM_TASK_MEMORY=default``, nothing changes. A pool chosen with Arrow's own
``ARROW_DEFAULT_MEMORY_POOL`` is left as it is.
"""

from __future__ import annotations

import functools
import os
import sys

#: The environment variable that turns this off (``default``: leave the allocators as they are).
ENV = "TSTREAM_TASK_MEMORY"
#: glibc serves blocks below this from its heap (kept when freed) instead of a mapping of their
#: own (unmapped when freed). Larger blocks are rare in a task: a row group's column at most.
MMAP_THRESHOLD = 64 << 20
#: glibc returns its heap's free top to the kernel only past this.
TRIM_THRESHOLD = 1 << 30
#: glibc grows its heap by this much more than asked, so growing costs few system calls.
TOP_PAD = 64 << 20
# mallopt parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


@functools.cache
def keep_freed_memory() -> bool:
    """Make this worker process keep freed memory for reuse (once per process; see the module).

    Returns whether it is in effect. Never raises: a worker that cannot tune its allocators
    runs as before.
    """
    if os.environ.get(ENV, "keep").strip().lower() == "default" or not sys.platform.startswith("linux"):
        return False
    import ctypes  # here: the source's driver imports this module too, and never calls it

    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # glibc answers 1 for each parameter it takes; musl's stub answers 0 (and keeps nothing)
    if not all(mallopt(param, value) == 1 for param, value in (
            (_M_MMAP_THRESHOLD, MMAP_THRESHOLD), (_M_TRIM_THRESHOLD, TRIM_THRESHOLD), (_M_TOP_PAD, TOP_PAD))):
        return False
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return True  # a pool the worker's owner chose: glibc's settings only (numpy's arrays)
    import pyarrow as pa

    # buffers allocated before keep their own pool; only new ones come from glibc
    pa.set_memory_pool(pa.system_memory_pool())
    return True
