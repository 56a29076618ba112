# ascendc.cmake - the Ascend C kernel build functions of a CANN toolkit
# (tikcpp/ascendc_kernel_cmake), as installed with mock_libascendcl, a host simulator of
# the CANN runtime.
#
# Including this file works, so a CMake project that includes it and builds only host
# code configures and builds against the mock. Compiling Ascend C kernels needs the
# device compiler of a real CANN toolkit, which the mock does not have: ascendc_library()
# and the functions that configure such a library stop the configuration with a message
# that says so. In CI without an Ascend card, give each kernel a host twin instead (a host
# implementation the mock runs under the kernel's name; see the mock_libascendcl README)
# and build the kernel library only where the CANN toolkit is installed, e.g.
#
#     if(NOT ASCENDC_MOCK)
#       ascendc_library(kernels STATIC add_custom.cpp)
#     endif()
include_guard(GLOBAL)

# TRUE: this is the mock's ascendc.cmake (no device compiler).
set(ASCENDC_MOCK TRUE)
set(_ASCENDC_MOCK_DIR "${CMAKE_CURRENT_LIST_DIR}")

function(_ascendc_mock_needs_device_compiler function target)
  message(FATAL_ERROR
    "${function}(${target}): Ascend C kernels need the device compiler of a CANN toolkit, "
    "and ${_ASCENDC_MOCK_DIR} belongs to mock_libascendcl, a host simulator "
    "of the CANN runtime without one. Build the kernel library where the CANN toolkit is "
    "installed (skip it when ASCENDC_MOCK is set), and register a host twin of each kernel "
    "with the mock to run the host code in CI (mock_libascendcl README).")
endfunction()

function(ascendc_library target)
  _ascendc_mock_needs_device_compiler(ascendc_library "${target}")
endfunction()
function(ascendc_fatbin_library target)
  _ascendc_mock_needs_device_compiler(ascendc_fatbin_library "${target}")
endfunction()
function(ascendc_compile_definitions target)
  _ascendc_mock_needs_device_compiler(ascendc_compile_definitions "${target}")
endfunction()
function(ascendc_compile_options target)
  _ascendc_mock_needs_device_compiler(ascendc_compile_options "${target}")
endfunction()
function(ascendc_include_directories target)
  _ascendc_mock_needs_device_compiler(ascendc_include_directories "${target}")
endfunction()
