"""Type stubs for pyacl_rt._dlpack_c (DLPack capsules; used by pyacl_rt._dlpack)."""

from collections.abc import Callable
from typing import Any

DLPACK_MAJOR: int
DLPACK_MINOR: int

class Imported:
    """Ownership of an imported DLPack tensor: ``release()`` calls its deleter once."""

    @property
    def released(self) -> bool: ...
    @property
    def own_release(self) -> Any: ...
    def release(self) -> None: ...

def make_capsule(
    data: int,
    device_type: int,
    device_id: int,
    shape: tuple[int, ...],
    code: int,
    bits: int,
    lanes: int,
    flags: int,
    versioned: bool,
    release: Callable[[], object],
    /,
) -> Any: ...
def consume(capsule: object, /) -> tuple[Imported, tuple[Any, ...]]: ...
def live_exports() -> int: ...
