# Type stub for the compiled cffi module (built from pyacl_rt/_raw/_lowlevel_build.py).
from typing import Any

ffi: Any
lib: Any
