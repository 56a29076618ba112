"""Deferred releases: the frees and destroys a finalizer must not do where it runs.

A finalizer (garbage collection, the last reference dropped) runs on whatever thread
happens to trigger it, including pyacl_rt's host-callback report threads
(:mod:`pyacl_rt._callbacks`). There, anything that waits for device work -
synchronizing the streams of a buffer before ``aclrtFree``, destroying a stream or a
context - can deadlock: the stream may be waiting for a host callback that only that
very thread can run. So on a report thread (``_local.st.in_callback``, which is True
for the report thread's whole life) finalizers call :func:`defer` instead, and a
daemon thread, ``pyacl_rt-releaser``, runs the release soon after, where waiting is
safe.

* :func:`defer` is safe inside a finalizer: ``queue.SimpleQueue.put`` takes no
  Python-level lock and is reentrant.
* The releaser thread is started by :func:`start` (the callbacks module starts it
  with the first report thread, from an ordinary call, never from a finalizer).
* :func:`flush` waits until everything deferred so far has run
  (:func:`pyacl_rt.empty_cache` uses it); :func:`drain` runs what is queued
  on the calling thread.
* At :func:`pyacl_rt.finalize` the thread is stopped first (what it had
  queued runs before it stops); later deferrals are drained by the callbacks module
  once the report threads are stopped. A forked child forgets the queue.

Layer 3 (runtime lifecycle) helper: imports :mod:`_runtime` and layer 1 only.
"""

from __future__ import annotations

import gc
import queue
import threading
from collections.abc import Callable

from . import _runtime as runtime
from ._hooks import fork_hooks
from ._log import get_logger

__all__ = ["defer", "drain", "flush", "is_releaser_thread", "start", "stop"]

_log = get_logger("pyacl_rt")

#: Deferred releases (None: stop the thread).
_queue: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_lock = threading.Lock()


def defer(fn: Callable[[], object]) -> None:
    """Run ``fn()`` later on the releaser thread (or at finalize). Never raises; safe
    in a finalizer. ``fn`` must never raise either (it is logged if it does)."""
    _queue.put(fn)


def _call(fn: Callable[[], object]) -> None:
    try:
        fn()
    except BaseException:  # pragma: no cover - release functions never raise
        _log.debug("pyacl_rt: deferred release %r failed", fn, exc_info=True)


def _run(q: queue.SimpleQueue[Callable[[], object] | None]) -> None:
    while True:
        fn = q.get()
        if fn is None:
            return
        _call(fn)
        del fn  # drop the reference before blocking again


def start() -> None:
    """Start the releaser thread if it is not running. Not from a finalizer."""
    global _thread
    t = _thread
    if t is not None and t.is_alive():
        return
    with _lock:
        t = _thread
        if t is not None and t.is_alive():
            return
        t = threading.Thread(target=_run, args=(_queue,), name="pyacl_rt-releaser", daemon=True)
        t.start()
        _thread = t


def is_releaser_thread() -> bool:
    """True on the releaser thread."""
    t = _thread
    return t is not None and t.ident == threading.get_ident()


def drain() -> None:
    """Run every release queued now on the calling thread. Never raises."""
    while True:
        try:
            fn = _queue.get_nowait()
        except queue.Empty:
            return
        if fn is None:  # a stop request nobody consumed: the thread is gone
            continue
        _call(fn)


def flush(timeout: float | None = None) -> bool:
    """Wait until every release deferred so far has run (on the releaser thread, or
    here if it is not running). Returns False on timeout (seconds). Not to be
    called on a report thread or the releaser thread."""
    t = _thread
    if t is None or not t.is_alive() or is_releaser_thread():
        drain()
        return True
    done = threading.Event()
    _queue.put(done.set)
    return done.wait(timeout)


def stop() -> None:
    """Stop the releaser thread after it ran what was queued before; run what is
    still queued on the calling thread. Never raises."""
    global _thread
    with _lock:
        t = _thread
        _thread = None
    if t is not None and t.is_alive() and t.ident != threading.get_ident():
        _queue.put(None)
        t.join(timeout=60.0)
        if t.is_alive():  # pragma: no cover - a release blocked for a minute
            _log.warning("pyacl_rt: the releaser thread did not stop within 60 s")
    drain()


def _after_fork_in_child() -> None:
    # The thread does not exist in the child, and what the parent queued refers to
    # the parent's runtime: forget both.
    global _queue, _thread, _lock
    _queue = queue.SimpleQueue()
    _thread = None
    _lock = threading.Lock()


def _settle() -> None:
    """settle(): collect garbage (finalizers defer releases here), then wait for the
    deferred releases to run."""
    gc.collect()
    if not flush(60):
        raise RuntimeError("pyacl_rt: the releaser thread is stuck (60 s)")


fork_hooks.add(_after_fork_in_child, runtime.PRIORITY_FIRST + 10)
# after the stream layer dropped its pools (their finalizers may defer releases)
runtime.settle_hooks.add(_settle, runtime.PRIORITY_STREAMS + 50)
runtime.register_release_hook(stop, runtime.PRIORITY_FIRST)
