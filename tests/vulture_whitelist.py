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
_.to_json  # pyacl_rt.dump.DumpConfig.to_json
_.array  # pyacl_rt.dump.DumpRecord.array
_.collecting  # pyacl_rt.profiler profile session: collecting
_.trace_files  # pyacl_rt.profiler profile session: trace_files
_.task_id  # pyacl_rt.errors.RaceAccess.task_id (a report field read by users)
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
_._hold  # IpcMemHandle._hold: keeps the exported buffer alive while the handle lives (never read)
_.keep  # Mem.keep: a C slot that keeps exported objects alive

# Test hooks (tests/conftest.py, test_stream.py, test_threads.py): no runtime caller.
_._watch_pending  # Stream._watch_pending: keep-alive entries still held
_._drain_pools  # _stream._drain_pools: the leak check empties stream pools

# Kernels, graphs, Python twins, the pytest plugin (merged from main).
# Public API (pyacl_rt.ObjectCode / Kernel / LaunchConfig / NPUGraph / RandomGenerator /
# pyacl_rt.testing): used by applications, the README and tests/test_kernels*.py etc.
_.debug_dump  # NPUGraph.debug_dump
_.uniform  # RandomGenerator.uniform / normal / truncated_normal / dropout_mask
_.normal
_.truncated_normal
_.dropout_mask
_.attributes  # LaunchConfig.attributes, Kernel.attributes
_.cfg_address  # LaunchConfig.cfg_address (the aclrtLaunchKernelCfg for lowlevel launches)
_.from_file  # ObjectCode.from_file
_.get_kernel  # ObjectCode.get_kernel
_.object_code  # Kernel.object_code
_.num_arguments  # Kernel.num_arguments
_.arguments_info  # Kernel.arguments_info
_.ratio  # KernelType.ratio (a NamedTuple field)
_.inject  # testing npu_faults.inject / lose_device (fixture API)
_.lose_device
# Fields of cffi structs written for the runtime (read in C, never in Python).
_.isAddr  # aclrtRandomNumTaskInfo / aclrtReduce... task structs (_kernels.builtin)
_.dataType
_.funcType
_.randomResultAddr
_.randomCounterAddr
_.timeoutLow  # aclrtLaunchKernelAttr value (_kernels.config)
_.timeoutHigh
_.numAttrs  # aclrtLaunchKernelCfg
_.magic  # aclrtBinaryLoadOptions (_kernels.objectcode)
_.numOpt
_.numParams  # the mock's kernel-twin descriptor (_twins)
# Kept alive on purpose: C structs / strings the runtime holds pointers to.
_._cd  # LaunchConfig._cd: the attribute array and cfg struct behind cfg_address
_.cdata  # _twins: the kernel name, parameter array and descriptor the mock reads
# Set for their effect, not read in Python.
_.__cause__  # _twins chains the Python twin's exception into the AclError
_.writeable  # numpy flags: read-only views of kernel inputs (_twins)
# Names fixed by a signature the caller defines.
user  # _twins: the mock's kernel-twin callback signature (block, idx, dim, user)
nextitem  # pytest_runtest_protocol(item, nextitem): pytest passes it by name
_.pytest_collectreport  # pytest hook of the plugin's child-process mode
