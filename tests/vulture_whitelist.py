# ruff: noqa
"""Names vulture reports as unused in pyacl_rt that are used, with the reason
(tests/test_dead_code.py runs ``vulture pyacl_rt tests/vulture_whitelist.py``).
A new entry needs a reason; dead code is deleted instead."""

# Public API (pyacl_rt.__all__, pyacl_rt.lowlevel, pyacl_rt.mock): used by applications.
_.set_current  # Device.set_current
_.free_memory  # Device.free_memory
_.soc_name  # DeviceProperties.soc_name, MockControl.soc_name
_.is_recorded  # Event.is_recorded
_.elapsed_time  # Event.elapsed_time
_.fill  # DeviceBuffer.fill
_.as_dlpack  # buffers' as_dlpack
_.record_stream  # DeviceBuffer.record_stream
_.device_index  # DeviceBuffer / Stream.device_index
_.is_view  # DeviceBuffer.is_view
_.copy_from_host  # DeviceBuffer
_.copy_from_host_async
_.copy_to_host
_.copy_to_host_async
_.supports  # BackendInfo.supports
_.cann_at_least  # BackendInfo.cann_at_least
_.priority_range  # Stream.priority_range
_.npu_stream  # Stream.npu_stream (torch_npu's name)
_.acl_priority  # Stream.acl_priority
_.add_callback  # Stream.add_callback
_.ipc_handle  # DeviceBuffer / Event.ipc_handle
_.from_ipc_handle  # DeviceBuffer / Event.from_ipc_handle
_.library_handle  # lowlevel.library_handle
_.take_missing  # lowlevel.take_missing
_.counts  # MockControl.counts and the other mock_control() methods
_.config
_.inject_fault
_.clear_faults
_.fault_hits
_.set_device_lost
_.device_lost
_.physical_device
_.leak_report
_.registered  # _hooks.Hook.registered (the handle of register_release_hook)
_.priorities  # PriorityHooks.priorities (diagnostics)

# Protocols: the signature is fixed by Python.
memo  # __deepcopy__(self, memo)
tb  # __exit__(self, exc_type, exc, tb)
_.__doc__  # lowlevel's generated stubs get a docstring
__getattr__  # module __getattr__ / __dir__ (PEP 562): lowlevel's lazy names
__dir__

# Fields read by name through a dataclass / the C extension / argparse.
_.ascend_home_path  # Options fields (ENV_VARS table, pyacl-rt info)
_.ascend_toolkit_home
_.required  # argparse subparsers.required
_._owner  # holds the explicit Context alive while the object lives (never read)
_.keep  # _Mem.keep: a C slot that keeps exported objects alive

# Test hooks (tests/conftest.py, test_stream.py, test_threads.py): no runtime caller.
_._watch_pending  # Stream._watch_pending: keep-alive entries still held
_._drain_pools  # _stream._drain_pools: the leak check empties stream pools
