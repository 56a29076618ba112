"""Graph-private pools of the caching allocator (torch's graph memory pools).

While a stream captures a graph, the buffers allocated on it come from the graph's
:class:`GraphPool`: segments of the device cache under a key of their own (never a
stream handle), which no other stream adopts and no trim or ``empty_cache`` releases
while a graph uses the pool. A replay therefore never writes into memory handed to
someone else. Blocks freed during the capture go back to the pool at once (the graph's
own task order protects them) and serve later allocations of the same capture; graphs
given the same pool (``pool=g.pool()`` / :func:`pyacl_rt.graph_pool_handle`) share
it. When the last graph using the pool is reset or deleted (its replays finished), the
pool's wholly free segments are released; blocks still held by live buffers go back to
the cache as an ordinary, releasable key when those buffers are freed.

Floor 7 (allocator): imports floors 1-6 and ``_device``.
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING

from .. import _capture
from .._log import get_logger

if TYPE_CHECKING:
    from .._memory.records import Mem
    from ._device import DeviceAllocator

_log = get_logger("pyacl_rt")
#: pool keys live above every stream handle (user-space addresses stay below 2**63)
KEY_BASE = 1 << 63
_ids = itertools.count(1)


class GraphPool:
    """One graph-private pool on one device (also the releaser of its blocks)."""

    __slots__ = ("alloc", "core", "key", "lock", "users")

    def __init__(self, alloc: DeviceAllocator) -> None:
        self.alloc = alloc
        self.core = alloc.core
        self.key = KEY_BASE + next(_ids)
        #: graphs (captured or capturing) that use this pool
        self.users = 0
        self.lock = threading.Lock()

    def acquire(self) -> None:
        """A graph starts using the pool."""
        with self.lock:
            self.users += 1
            self.alloc.graph_keys.add(self.key)

    def drop(self) -> int:
        """A graph stopped using the pool (its replays have finished). The last one
        releases the pool's wholly free segments; returns bytes released."""
        with self.lock:
            self.users -= 1
            if self.users > 0:
                return 0
            self.users = 0
            self.alloc.graph_keys.discard(self.key)
        with self.alloc.lock:
            return self.alloc.release_pool(self.key)

    def release(self, m: Mem, base: int) -> None:
        """Give a pool block back (the releaser of buffers allocated in capture).
        Streams capturing into this pool need no guard; other streams that used the
        block get one (e.g. the stream a graph was replayed on). Never raises."""
        try:
            refs = m.streams
            if refs:
                others = [
                    s
                    for s in self.alloc.other_streams(refs, self.key)
                    if _capture.find(s.handle) is None
                ]
                if others:
                    self.alloc.free_guarded(base, others, self.key)
                    return
            if not self.core.free(base):
                _log.warning("pyacl_rt allocator: freeing unknown pool block 0x%x", base)
        except BaseException:  # pragma: no cover - defensive (finalizer context)
            _log.debug("pyacl_rt allocator: graph pool release failed", exc_info=True)

    def __repr__(self) -> str:
        return f"<GraphPool 0x{self.key - KEY_BASE:x} device={self.alloc.index} users={self.users}>"
