"""Sharing device memory and events between processes (issue 16, "Across processes").

* :mod:`.refs` - the exporter's arena of reference slots (how it learns importers are done)
* :mod:`.memory` - :class:`IpcMemHandle`, ``DeviceBuffer.ipc_handle`` / ``from_ipc_handle``
* :mod:`.event` - :class:`IpcEventHandle`, ``Event.ipc_handle`` / ``from_ipc_handle``
* :mod:`.mp` - ``multiprocessing`` queues / pipes send buffers and events as views

This package registers the IPC hooks of :class:`~pyacl_rt.DeviceBuffer` and
:class:`~pyacl_rt.Event` (lower floors), a finalize hook that closes the exports before
memory is freed, and the multiprocessing reductions.

Layer 7 (higher tools): imports layers 1-6.
"""

from __future__ import annotations

from .. import _runtime as runtime
from .._hooks import factories, fork_hooks
from . import event, memory, mp, refs
from .event import IpcEventHandle
from .memory import IpcMemHandle, ipc_pid

__all__ = ["IpcEventHandle", "IpcMemHandle", "ipc_collect", "ipc_pid"]


def ipc_collect() -> int:
    """Let go the buffers and events this process exported whose importers are all
    done (torch's ``ipc_collect``); pyacl_rt also does this at each new export, at
    ``close()`` of an exported buffer and at finalize. Returns how many were let go."""
    return memory.collect() + event.collect()


def _release() -> None:
    """Finalize / exit (before events and memory are released): close the export keys
    and remove the arena."""
    event.release_all()
    memory.release_all()


factories.ipc_mem_handle.set(memory.handle)
factories.ipc_mem_open.set(memory.open_handle)
factories.ipc_mem_before_close.set(memory.before_close)
factories.ipc_event_handle.set(event.handle)
factories.ipc_event_open.set(event.open_handle)
runtime.register_release_hook(_release, runtime.PRIORITY_EVENTS - 10)
# after memory: the imported buffers (freed there, first) closed their imports
runtime.register_release_hook(memory.forget_imports, runtime.PRIORITY_MEMORY + 10)
fork_hooks.add(refs.after_fork_in_child, runtime.PRIORITY_MEMORY + 70)
fork_hooks.add(memory.after_fork_in_child, runtime.PRIORITY_MEMORY + 71)
fork_hooks.add(event.after_fork_in_child, runtime.PRIORITY_MEMORY + 72)
mp.install()
