"""Build script: builds the bundled mock runtime and the extension modules.

All metadata lives in pyproject.toml.  ``pip install .`` / ``pip install -e .`` /
``python -m build`` run build_ext, which first configures, builds and installs
mock_libascendcl with its own CMakeLists.txt (build_support/mockbuild.py) into
pyacl_rt/_mock/ (in the source tree for editable installs; CANN layout: set_env.sh, lib64/,
include/, ...),
then builds the cffi module ``<RAW_PACKAGE>._lowlevel_cffi`` (declared by
``_lowlevel_build.py``) and the hand-written fast-call module ``<RAW_PACKAGE>._fastcall``
(``_fastcall.c``), which calls through the cffi module's dispatch table (neither links
libascendcl), pyacl_rt._dlpack_c (pyacl_rt/_dlpack_c.c: DLPack capsules, no ACL calls) and
pyacl_rt._cachecore (pyacl_rt/_cachecore.c: the caching allocator's bookkeeping) and
pyacl_rt._memcore (pyacl_rt/_memcore.c: allocation records and the buffer base types; both
share pyacl_rt/_cacheapi.h) and pyacl_rt._reportcore (pyacl_rt/_reportcore.c: the report
threads' GIL-free loop and the await completion inboxes). CC,
CFLAGS and LDFLAGS from the environment reach every build; no shared object gets a run
path other than ``$ORIGIN`` (the wheel stays relocatable).
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from build_support.mockbuild import build_mock  # noqa: E402
from build_support.runpath import without_absolute_rpath  # noqa: E402

# The package holding the raw layer's build inputs (_lowlevel_build.py, _fastcall.c) and
# its two extension modules: the one place to change when they move.
RAW_PACKAGE = "pyacl_rt._raw"
RAW_DIR = RAW_PACKAGE.replace(".", "/")

MOCK_SOURCE = ROOT / "mock_libascendcl"
MOCK_PREFIX = Path("pyacl_rt") / "_mock"  # install prefix of the bundled mock (package-relative)


class BuildExtWithMock(build_ext):
    def _root(self) -> Path:
        return ROOT if self.inplace else Path(self.build_lib)

    def run(self) -> None:
        # In-place (editable) builds keep the mock's CMake tree, so a rebuild after a C
        # change recompiles only what changed; wheel builds use the throwaway build_temp.
        cmake_build = ROOT / "build" / "mock" if self.inplace else Path(self.build_temp) / "mock"
        # a wheel cannot hold the prefix's <arch>-linux links (build_support/mockbuild.py)
        build_mock(MOCK_SOURCE, self._root() / MOCK_PREFIX, cmake_build, symlinks=self.inplace)
        self._remove_stale_extensions()
        super().run()

    def build_extensions(self) -> None:
        # No absolute run path from the interpreter's LDSHARED (see build_support/runpath.py).
        for attr in ("linker_so", "linker_so_cxx"):
            command = getattr(self.compiler, attr, None)
            if isinstance(command, list):
                setattr(self.compiler, attr, without_absolute_rpath(command))
        super().build_extensions()

    def _remove_stale_extensions(self) -> None:
        # An old build directory (or an earlier in-place build) may hold an extension under
        # another ABI suffix (e.g. .abi3.so); Python would import whichever it finds first,
        # so keep only the file this build produces.
        for ext in self.extensions:
            current = self._root() / self.get_ext_filename(ext.name)
            for old in current.parent.glob(ext.name.rsplit(".", 1)[-1] + ".*.so"):
                if old.name != current.name:
                    old.unlink()

    def get_outputs(self) -> list[str]:
        outputs = list(super().get_outputs())
        mock = self._root() / MOCK_PREFIX
        if mock.exists():
            outputs += [str(p) for p in mock.rglob("*") if p.is_file()]
        return outputs


setup(
    packages=find_packages(include=["pyacl_rt", "pyacl_rt.*"]),
    # The bundled mock (libraries, headers, CMake package) is added by build_ext.
    include_package_data=False,
    package_data={"": ["py.typed", "*.pyi"]},
    cffi_modules=[f"{RAW_DIR}/_lowlevel_build.py:ffibuilder"],
    ext_modules=[
        Extension(
            f"{RAW_PACKAGE}._fastcall",
            sources=[f"{RAW_DIR}/_fastcall.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"],
        ),
        Extension(
            "pyacl_rt._cachecore",
            sources=["pyacl_rt/_cachecore.c"],
            depends=["pyacl_rt/_cacheapi.h"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"],
        ),
        Extension(
            "pyacl_rt._memcore",
            sources=["pyacl_rt/_memcore.c"],
            depends=["pyacl_rt/_cacheapi.h"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"],
        ),
        Extension(
            "pyacl_rt._reportcore",
            sources=["pyacl_rt/_reportcore.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"],
        ),
        Extension(
            "pyacl_rt._dlpack_c",
            sources=["pyacl_rt/_dlpack_c.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"],
        ),
    ],
    cmdclass={"build_ext": BuildExtWithMock},
    zip_safe=False,
)
