"""Build script: compiles the bundled mock runtime and the cffi extension.

All metadata lives in pyproject.toml.  ``pip install .`` / ``pip install -e .`` /
``python -m build`` run build_ext, which first builds mock_libascendcl into
pyacl_rt/_mock/ (in the source tree for editable installs) and then the cffi
module pyacl_rt._raw._lowlevel_cffi (declared by pyacl_rt/_raw/_lowlevel_build.py) and
the hand-written fast-call module pyacl_rt._raw._fastcall (pyacl_rt/_raw/_fastcall.c),
which calls through the cffi module's dispatch table (no link dependency on libascendcl
either), and pyacl_rt._dlpack_c (pyacl_rt/_dlpack_c.c: DLPack capsules, no ACL calls).
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from build_support.mockbuild import build_mock  # noqa: E402


class BuildExtWithMock(build_ext):
    def run(self) -> None:
        pkg_dir = ROOT / "pyacl_rt" if self.inplace else Path(self.build_lib) / "pyacl_rt"
        build_mock(ROOT / "mock_libascendcl", pkg_dir, Path(self.build_temp))
        self._remove_stale_extensions(pkg_dir)
        super().run()

    def _remove_stale_extensions(self, pkg_dir: Path) -> None:
        # An old build directory (or an earlier in-place build) may hold the extension
        # under another ABI suffix (e.g. .abi3.so); Python would import whichever it
        # finds first, so keep only the file this build produces.
        for ext in self.extensions:
            current = Path(self.get_ext_filename(ext.name)).name
            *subpackages, stem = ext.name.split(".")[1:]
            for old in pkg_dir.joinpath(*subpackages).glob(stem + ".*.so"):
                if old.name != current:
                    old.unlink()

    def get_outputs(self) -> list[str]:
        outputs = list(super().get_outputs())
        base = ROOT / "pyacl_rt" if self.inplace else Path(self.build_lib) / "pyacl_rt"
        mock = base / "_mock"
        if mock.exists():
            outputs += [str(p) for p in mock.rglob("*") if p.is_file()]
        return outputs


setup(
    packages=find_packages(include=["pyacl_rt", "pyacl_rt.*"]),
    # The compiled mock libraries and headers are added by build_ext (not globbed).
    include_package_data=False,
    package_data={"pyacl_rt": ["py.typed", "*.pyi"], "pyacl_rt._raw": ["*.pyi"]},
    cffi_modules=["pyacl_rt/_raw/_lowlevel_build.py:ffibuilder"],
    ext_modules=[
        Extension(
            "pyacl_rt._raw._fastcall",
            sources=["pyacl_rt/_raw/_fastcall.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"],
        ),
        Extension(
            "pyacl_rt._cachecore",
            sources=["pyacl_rt/_cachecore.c"],
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
