"""Sharing device memory and events between processes (issue 16, "Across processes").

* :mod:`.refs` - the exporter's arena of reference slots (how it learns importers are done)
* :mod:`.memory` - :class:`IpcMemHandle`, ``DeviceBuffer.ipc_handle`` / ``from_ipc_handle``
* :mod:`.event` - :class:`IpcEventHandle`, ``Event.ipc_handle`` / ``from_ipc_handle``
* :mod:`.mp` - ``multiprocessing`` queues / pipes send buffers and events as views

This package registers the IPC hooks of :class:`~pyacl_rt.DeviceBuffer` and
:class:`~pyacl_rt.Event` (lower floors), a finalize hook that closes the exports before
memory is freed, and the multiprocessing reductions.

Floor 7 (higher tools): imports floors 1-6.
"""

from __future__ import annotations

import os

from .. import _event
from .. import _runtime as runtime
from .._memory import buffers as _buffers
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


_buffers._ipc_hooks.update(
    handle=memory.handle, open=memory.open_handle, before_close=memory.before_close
)
_event._ipc_hooks.update(handle=event.handle, open=event.open_handle)
runtime.register_release_hook(_release, runtime.PRIORITY_EVENTS - 10)
# after memory: the imported buffers (freed there, first) closed their imports
runtime.register_release_hook(memory.forget_imports, runtime.PRIORITY_MEMORY + 10)
os.register_at_fork(after_in_child=refs.after_fork_in_child)
os.register_at_fork(after_in_child=memory.after_fork_in_child)
os.register_at_fork(after_in_child=event.after_fork_in_child)
mp.install()
