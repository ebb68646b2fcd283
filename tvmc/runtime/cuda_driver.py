"""The CUDA driver API through `cuda-bindings`, imported lazily, every CUresult checked.

`driver()` is `cuda.bindings.driver` (the `cuda` extra); `check(result, what)` turns a failed
CUresult into a `CUDAError` naming the call and the CUDA error; `device()` initialises the
driver once per process and makes the first GPU's primary context current. Each missing piece
(the package, libcuda, a GPU) is a clear error naming the fix.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from tvmc.codegen.cuda_target import CUDATarget
from tvmc.errors import TVMCError

INSTALL_HINT = "install with pip install 'tvmc[cuda]' (the cuda-bindings package)"
CPU_HINT = "run on a machine with an NVIDIA GPU, or compile for the CPU (--target llvm)"


class CUDAError(TVMCError):
    """The CUDA runtime cannot do what was asked: no package, driver or GPU, or a CUDA error."""

    exit_code = 4


def driver() -> ModuleType:
    """`cuda.bindings.driver` (cuda-python's older `cuda.cuda`), else a CUDAError with the fix."""
    try:
        from cuda.bindings import driver as module
    except ImportError:
        try:
            from cuda import cuda as module  # type: ignore[no-redef]  # cuda-python < 12.6
        except ImportError:
            raise CUDAError(f"the CUDA runtime is not installed: {INSTALL_HINT}") from None
    return module


def error_name(drv: ModuleType, err: Any) -> str:
    """`CUDA_ERROR_INVALID_VALUE`-style name of a CUresult (the enum's name if the call fails)."""
    try:
        status, name = drv.cuGetErrorName(err)
        if status == drv.CUresult.CUDA_SUCCESS and name:
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # the name only decorates a message: never fail on it
        pass
    return getattr(err, "name", str(err))


def check(result: Any, what: str) -> Any:
    """The values a driver call returned after its CUresult, or a CUDAError naming `what`."""
    drv = driver()
    if isinstance(result, tuple):
        err, values = result[0], result[1:]
    else:
        err, values = result, ()
    if err != drv.CUresult.CUDA_SUCCESS:
        raise CUDAError(f"{what} failed: {error_name(drv, err)}")
    if not values:
        return None
    return values[0] if len(values) == 1 else values


@dataclass(frozen=True)
class Device:
    """The GPU this process runs on: its ordinal, name, compute capability and context."""

    ordinal: int
    name: str
    capability: tuple[int, int]
    handle: Any
    context: Any

    @property
    def arch(self) -> str:
        """The arch tvmc compiles for on this GPU (`sm_90` on an H100/H200)."""
        return CUDATarget.for_capability(*self.capability).arch


_INIT_ERRORS = {
    "CUDA_ERROR_NO_DEVICE": f"no CUDA GPU found; {CPU_HINT}",
    "CUDA_ERROR_INSUFFICIENT_DRIVER": "the NVIDIA driver is older than this CUDA needs: update "
    "the driver, or install the cuda-bindings of its CUDA version",
    "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER": "the NVIDIA driver is older than this CUDA needs: "
    "update the driver, or install the cuda-bindings of its CUDA version",
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": "the NVIDIA kernel driver and libcuda differ in "
    "version: reboot, or reinstall the driver",
    "CUDA_ERROR_STUB_LIBRARY": "libcuda here is the CUDA toolkit's stub, not a driver: install "
    f"the NVIDIA driver, or {CPU_HINT}",
}


@functools.cache
def device(ordinal: int = 0) -> Device:
    """Initialise the driver and make GPU `ordinal`'s primary context current (once)."""
    drv = driver()
    try:
        status = drv.cuInit(0)
    except Exception as exc:  # libcuda.so missing: cuda-bindings raises when loading it
        raise CUDAError(
            f"no NVIDIA driver here (libcuda cannot be loaded: {_first_line(exc)}); "
            f"install the NVIDIA driver, or {CPU_HINT}"
        ) from None
    err = status[0] if isinstance(status, tuple) else status
    if err != drv.CUresult.CUDA_SUCCESS:
        name = error_name(drv, err)  # by name: the enum's members differ between versions
        raise CUDAError(f"{_INIT_ERRORS.get(name, 'initialising the CUDA driver failed')} "
                        f"(cuInit: {name})")  # fmt: skip
    count = check(drv.cuDeviceGetCount(), "counting GPUs (cuDeviceGetCount)")
    if count < 1:
        raise CUDAError(f"no CUDA GPU found; {CPU_HINT}")
    if not 0 <= ordinal < count:
        raise CUDAError(f"no GPU {ordinal}: this machine has {count} (0 to {count - 1})")
    handle = check(drv.cuDeviceGet(ordinal), "cuDeviceGet")
    attr = drv.CUdevice_attribute
    major = check(
        drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle),
        "cuDeviceGetAttribute",
    )
    minor = check(
        drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle),
        "cuDeviceGetAttribute",
    )
    raw = check(drv.cuDeviceGetName(128, handle), "cuDeviceGetName")
    name = raw.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    context = check(drv.cuDevicePrimaryCtxRetain(handle), "retaining the GPU's context")
    check(drv.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    return Device(ordinal, name, (int(major), int(minor)), handle, context)


def present_arch() -> str | None:
    """The arch of this machine's first GPU, or None when there is none (or no driver/package)."""
    try:
        return device().arch
    except CUDAError:
        return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]
