"""Device and pinned host memory, and copies between any two buffers (private package;
the names are exported by :mod:`pyacl_rt`).

* :class:`DeviceBuffer` owns an ``aclrtMalloc`` allocation on one device; slicing
  (``buf[a:b]``) gives views that share the memory and keep the parent alive.
* :class:`HostBuffer` owns page-locked host memory (``aclrtMallocHost``) and exports
  it zero-copy to numpy and ``memoryview`` (see "Buffer protocol" below).
* :func:`copy`, :func:`copy_2d`, :func:`memset` work between any pair of
  DeviceBuffer / HostBuffer / bytes-like objects (numpy arrays, bytearray,
  memoryview, bytes as a source); :func:`memcpy_async` is the fast path between
  owned buffers.

Checks before C
---------------
Every size, offset and pitch is validated in Python before any pointer reaches the
runtime: ints only (``__index__`` integers such as ``numpy.int64`` accepted, ``bool``
refused: see :mod:`pyacl_rt._args`), no negatives, nothing past the end of either
side, ``width <= pitch``, ``(height - 1) * pitch + width`` inside the buffer.
Non-contiguous numpy arrays are refused (``ValueError``); writing into a read-only
object (``bytes``, a read-only memoryview, a numpy array with ``writeable=False``)
raises ``TypeError``. Messages name the argument. Use after ``close()`` raises
:class:`~pyacl_rt.errors.ObjectClosedError`; after :func:`pyacl_rt.finalize`
:class:`~pyacl_rt.errors.RuntimeFinalizedError`.

Streams and ordering
--------------------
Every copy that touches device memory is issued on a stream: ``stream`` if given,
else the calling thread's current stream of the device doing the copy (the
destination's device for H2D / D2D, the source's for D2H). ``non_blocking=False``
(the default) waits for that stream afterwards, like ``tensor.copy_()`` in
torch_npu; ``non_blocking=True`` returns at once. Host-to-host copies never go
through the runtime (ACL refuses asynchronous H2H on hosts with attached devices):
they are a plain ``memmove`` done at once, after waiting for the given ``stream``
and for pending async work on the owned buffers involved. (Pending async writes into
a *foreign* host object, e.g. a numpy array, are not tracked for H2H: synchronize
first.) Device-to-device copies across devices enable peer access between the two
devices once (``aclrtDeviceEnablePeerAccess``); between devices that cannot access
each other, :func:`copy` stages through pinned host memory (synchronously) and
:func:`copy_2d` raises :class:`~pyacl_rt.errors.FeatureNotSupportedError`.

Lifetime of memory used by async work
-------------------------------------
* **Foreign objects** (numpy arrays, bytearray, ...) given to an async copy are kept
  alive until the copy completed on the device (``Stream.keep_alive``: a per-stream
  watch list released by a marker event). ``copy(dev, arr, stream=s,
  non_blocking=True); del arr`` is safe.
* **Owned buffers** remember the streams they were used on. With the default caching
  allocator (:mod:`pyacl_rt._allocator`, plugged in through
  :mod:`pyacl_rt._memory.backend`), freeing one gives its block back to the cache
  without waiting: it is reused in stream order by its allocation stream, and only once
  events recorded on the other streams that used it have completed (pinned blocks: once
  every stream that used them has). The rest of this paragraph describes
  ``PYACL_RT_ALLOCATOR=native`` (and buffers that bypass the cache: explicit Contexts,
  non-default ``policy``). Freeing one
  (``close()``, garbage collection, finalize) first *synchronizes those streams*,
  then calls ``aclrtFree`` / ``aclrtFreeHost``: memory is never released under a
  pending copy (ACL's ``aclrtFree`` does not wait, acl_abi.md section 5.6). So
  ``close()`` blocks like ``cudaFree`` when the buffer still has queued work, and
  the memory is back in the pool when it returns. This costs nothing on the hot
  path (no event per copy). A buffer freed on a host-callback (report) thread -
  inside a callback, or by garbage collection that happens to run there - is freed
  soon after by pyacl_rt's releaser thread (a synchronize there could deadlock);
  :func:`empty_cache` waits for such pending frees.

Threads and host callbacks
--------------------------
Buffers work from any thread (each operation makes the buffer's device context
current; no ``set_device`` needed). A synchronous :func:`copy` / :func:`copy_2d` /
:func:`memset` marks the owned buffers it uses as in use until it no longer touches
them from the host (host-to-host ``memmove`` and host ``memset`` run without the
GIL): ``close()`` on another thread meanwhile raises ``BufferError`` and the buffer
stays open, the same rule as for live exports (like ``bytearray`` resizing). Once a
device operation is enqueued, the buffer only remembers its stream and ``close()``
waits for that stream instead. The :func:`memcpy_async` fast path takes no mark (it
stays lock- and allocation-free): closing a buffer while another thread is in the
middle of enqueueing it there is a race in the program, as with ``cudaFree``.
Inside a host callback, synchronous copies and memsets raise
:class:`~pyacl_rt.errors.CallbackContextError` (they would wait for the stream
running the callback); asynchronous copies between owned buffers are fine. An
async copy of *pageable* memory (numpy, bytearray) completes before returning (ACL
semantics), so from a callback it must not target a stream that is waiting for that
callback.

Buffer protocol (HostBuffer)
----------------------------
* ``memoryview(h)``, ``h.memoryview()`` and ``numpy.asarray(h)`` are zero-copy on
  every supported version: HostBuffer derives from ``pyacl_rt._memcore.HostBase``, a C
  base type whose buffer protocol (``getbuffer`` / ``releasebuffer``; on 3.12+ also
  ``__buffer__`` / ``__release_buffer__``) exports the pinned memory itself and counts
  the exports explicitly (the view's ``obj`` is the HostBuffer, which it keeps alive).
  Reference-count arithmetic is not used: CPython 3.14 no longer counts borrowed
  stack references. ``numpy.asarray(h)`` also has ``__array__``. ``bytes(h)`` /
  ``h.tobytes()`` copy.
* Exports keep the memory valid: while a memoryview or numpy array of ``h`` is
  alive, ``h.close()`` raises ``BufferError`` (like ``bytearray``/``mmap``). An export
  keeps ``h`` alive, so garbage collection frees the memory only after the last
  export went away. :func:`pyacl_rt.finalize` cannot keep exported pinned
  memory alive (``aclFinalize`` reclaims it), so it raises ``BufferError`` listing
  the exported buffers and finalizes nothing (release the views, then finalize
  again). At interpreter exit, where the views can no longer be used, it logs a
  warning and proceeds.

Cost of a buffer
----------------
The allocation record, the registry and counters, ``close()`` and the freeing of a
collected buffer are C (:mod:`pyacl_rt._memcore`, base types of DeviceBuffer and
HostBuffer). When the caching allocator can serve a buffer from its cache (a block of the
allocation stream's cache, or an idle pinned block), creating, closing and collecting it
run no Python code and take no lock (the C steps are atomic under the GIL): the thread's
device, current stream and context are compared by identity, the runtime's current
context is checked with one ``aclrtGetCurrentContext`` (a foreign switch is noticed),
and the block comes from the cache's C bookkeeping. Everything else - a miss, the
native backend, an explicit Context, a non-default policy, arguments of other types,
pending frees from callback threads, memory used on other streams, exports, operations
in flight, history recording, a finalized runtime - goes through the Python code of
this package, with all its rules. ``scripts/bench_allocator.py`` measures the life
against the runtime's own allocate + free pair.

Finalize
--------
A release hook (priority ``PRIORITY_MEMORY``, after events and streams) synchronizes
each device that still has buffers, then frees them; the Python objects become inert.
:func:`~pyacl_rt.finalize` first refuses (``BufferError``, nothing released)
while a HostBuffer is exported or a buffer is in use by a synchronous operation on
another thread, like ``close()``. Closing an explicit
:class:`~pyacl_rt.Context` frees the buffers allocated in it the same way.

Modules, lowest first (each imports only the ones before it; the package re-exports
the public names):

* ``records`` - one :class:`~pyacl_rt._memory.records.Mem` per allocation: stream
  tracking, ordered freeing, registry and counters, finalize/context/fork hooks;
* ``torchstats`` - torch's statistics keys, the native numbers, the summary table;
* ``backend`` - where buffer memory comes from: ``native`` or a backend registered from
  above (the caching allocator, :mod:`pyacl_rt._allocator`);
* ``args`` - copy arguments to checked addresses (sizes, offsets, buffer exports) and
  :class:`~pyacl_rt._memory.args.ReleaseOnExit`, which releases them;
* ``keepalive`` - what an operation leaves behind: the streams owned memory was used
  on, foreign objects kept alive until async work completed, host-side waits;
* ``engine`` - the copy engine: :func:`copy`, :func:`copy_2d`, :func:`memset`,
  :func:`memcpy_async`, stream choice, peer access, staging;
* ``buffers`` - :class:`DeviceBuffer` and :class:`HostBuffer`;
* ``stats`` - the torch_npu-style statistics (:func:`memory_allocated`,
  :func:`memory_stats`, :func:`memory_summary` ...).

DLPack (``__dlpack__``, ``from_dlpack``) lives in :mod:`pyacl_rt._dlpack`, a higher
layer that fills the ``_hooks.factories.dlpack_*`` slots the buffers call.

Layer 6: imports layers 1-5 only.
"""

from __future__ import annotations

from .buffers import DeviceBuffer, HostBuffer
from .engine import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEM_MALLOC_HUGE_ONLY,
    ACL_MEM_MALLOC_NORMAL_ONLY,
    ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
    BufferLike,
    copy,
    copy_2d,
    memcpy_async,
    memset,
)
from .stats import (
    empty_cache,
    host_memory_allocated,
    max_memory_allocated,
    max_memory_reserved,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)

__all__ = [
    "ACL_MEMCPY_DEVICE_TO_DEVICE",
    "ACL_MEMCPY_DEVICE_TO_HOST",
    "ACL_MEMCPY_HOST_TO_DEVICE",
    "ACL_MEMCPY_HOST_TO_HOST",
    "ACL_MEM_MALLOC_HUGE_FIRST",
    "ACL_MEM_MALLOC_HUGE_ONLY",
    "ACL_MEM_MALLOC_NORMAL_ONLY",
    "BufferLike",
    "DeviceBuffer",
    "HostBuffer",
    "copy",
    "copy_2d",
    "empty_cache",
    "host_memory_allocated",
    "max_memory_allocated",
    "max_memory_reserved",
    "memcpy_async",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "memset",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
]
