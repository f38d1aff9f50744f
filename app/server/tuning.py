"""Process-wide settings for the server process (`tokenshape serve`), made once at start.

Each was measured on a 1M-record ingest load (4 shippers x 1,000-record batches), where the
event loop parses every body: they are the server's business, not the library's, so tests
and other commands that build the app in their own process keep Python's defaults.
"""

from __future__ import annotations

import gc
import sys

import pyarrow as pa


def tune_server_process() -> None:
    """Switch interval, garbage collector and Arrow allocator for serving."""
    # The writer thread needs the GIL briefly while DuckDB scans Arrow batches; with the
    # default 5 ms switch interval it queues behind parsing threads (a GIL convoy).
    sys.setswitchinterval(0.0005)
    # Parsing a batch makes tens of thousands of short-lived tuples and lists, which set off
    # a young collection every ~700 of them, each traversing the batch's columns: 952 young
    # collections took 0.5 s of the loop, and each full one ~0.15 s through every module,
    # Dash's registry and the app. What is alive now lives as long as the process, so it is
    # frozen out of collections, and the young generation may hold 20,000 objects (garbage
    # without cycles is still freed at once, by reference counts). Measured: ~8% more
    # records/s (medians of 6 alternating runs each).
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 10, 10)
    # Arrow's default allocator here (mimalloc) hands freed pages back to the system and
    # faults them in again, zeroed, for the next batch's arrays: 6% of the server's CPU went
    # to the kernel zeroing pages. jemalloc (or the C library's allocator) keeps them.
    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:  # a pyarrow built without jemalloc
        pa.set_memory_pool(pa.system_memory_pool())
