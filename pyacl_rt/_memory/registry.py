"""The memory registry: the process-wide bookkeeping of the memory layer and the caching
allocator in one object, :data:`memory` (the role :data:`pyacl_rt._runtime.runtime` plays
for the lifecycle state).

* ``live_lock`` - orders the Python-side lists (deferred frees, DLPack tokens);
  re-entrant: a garbage-collection finalizer may run while it is held;
* ``deferred`` - allocation records whose free waits for the releaser thread (freed on a
  host-callback thread); the compiled :mod:`pyacl_rt._memcore` holds this very list, so
  it is cleared, never replaced;
* ``peers`` - (context, peer device) pairs with peer access enabled (the copy engine);
* ``stranded`` - foreign objects of a synchronous copy whose wait failed, kept referenced
  rather than let the device write into freed memory;
* ``raw_owner`` - address -> stream cache of blocks ``caching_allocator_alloc`` handed out.

A forked child forgets all of it in one call, :meth:`MemoryRegistry.reset` (run by the
memory layer's fork hook, ``_memory.records``). Release hooks empty the parts that
finalize frees (``peers``, ``raw_owner``, ``deferred``).

Layer 6 (part of :mod:`pyacl_rt._memory`, before ``records``): imports nothing of the
package.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from .records import Mem

__all__: list[str] = []


class MemoryRegistry:
    """The memory layer's process-wide state (one instance, :data:`memory`)."""

    __slots__ = ("deferred", "live_lock", "peers", "raw_owner", "stranded")

    def __init__(self) -> None:
        self.live_lock = threading.RLock()
        self.deferred: list[Mem] = []
        self.peers: set[tuple[object, int]] = set()
        self.stranded: list[object] = []
        # values are _allocator.StreamPool (a layer above: not imported here)
        self.raw_owner: dict[int, Any] = {}

    def reset(self) -> None:
        """Forget everything (a forked child: no lock another thread may have held, no
        parent's memory). The lists keep their identity (``deferred`` is bound in C)."""
        self.live_lock = threading.RLock()
        self.deferred.clear()
        self.peers.clear()
        self.stranded.clear()
        self.raw_owner.clear()


#: The one memory registry.
memory: Final = MemoryRegistry()
