"""Loading PTX with the driver's JIT, and saying why when the JIT refuses it.

`load_module` calls `cuModuleLoadDataEx` with error and info log buffers: on failure the
CUDAError carries the first lines of the JIT's error log (what ptxas would print), on success the
info log (registers and spills per kernel) goes to the "tvmc" logger at debug level. Bindings
without the call, or that convert the option values differently, load with `cuModuleLoadData`
as before (no log). A PTX ISA newer than the driver's JIT is explained with the fix.
"""

from __future__ import annotations

import logging
import re
from types import ModuleType
from typing import Any

import numpy as np

from tvmc.codegen.cuda_target import CUDA_ARCHS, CUDATarget
from tvmc.runtime.cuda_driver import CUDAError, Device, error_name

logger = logging.getLogger("tvmc")

ERROR_LOG_BYTES = 16 << 10  # ptxas stops after a few errors; the rest is cut by the driver
INFO_LOG_BYTES = 64 << 10  # verbose info: a few lines per kernel, for --verbose only
MAX_LOG_LINES = 10
MAX_LOG_CHARS = 2000
# The first CUDA release whose driver JIT-compiles each PTX ISA tvmc emits (PTX ISA notes).
ISA_CUDA = {"8.6": "12.8", "8.7": "12.8", "8.8": "12.9", "9.0": "13.0"}
_RENAMED = {"sm_101"}  # sm_110 since CUDA 13: never suggested to a driver that may not know it


class JitLogs:
    """The error and info log buffers the driver's JIT writes into (kept alive by this object)."""

    def __init__(self, error_bytes: int = ERROR_LOG_BYTES, info_bytes: int = INFO_LOG_BYTES):
        self.error = bytearray(error_bytes)
        self.info = bytearray(info_bytes)

    def options(self, drv: ModuleType) -> tuple[list[Any], list[Any]]:
        """cuModuleLoadDataEx's `options` and `optionValues`, as cuda-bindings converts them."""
        jit = drv.CUjit_option
        # cuda-bindings turns a log buffer's value into a char* to a bytes-like object's storage
        # (an int is a TypeError), so a bytearray is what the driver writes into; sizes and
        # flags are plain ints that it passes as the void* value itself.
        options = [jit.CU_JIT_ERROR_LOG_BUFFER, jit.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                   jit.CU_JIT_INFO_LOG_BUFFER, jit.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                   jit.CU_JIT_LOG_VERBOSE]  # fmt: skip
        values = [self.error, len(self.error), self.info, len(self.info), 1]
        return options, values

    @property
    def error_text(self) -> str:
        """What the JIT wrote into the error log (up to its NUL)."""
        return _text(self.error)

    @property
    def info_text(self) -> str:
        """What the JIT wrote into the info log (up to its NUL)."""
        return _text(self.info)


def load_module(drv: ModuleType, ptx: str, device: Device) -> Any:
    """The CUmodule of `ptx` JIT-compiled for `device`, or a CUDAError with the JIT's log."""
    image = np.frombuffer(ptx.encode() + b"\0", np.uint8)  # alive until the call returns
    logs = JitLogs()
    result, call = None, "cuModuleLoadDataEx"
    load_ex = getattr(drv, "cuModuleLoadDataEx", None)
    if load_ex is not None and hasattr(drv, "CUjit_option"):
        options, values = logs.options(drv)
        try:
            result = load_ex(image.ctypes.data, len(options), options, values)
        except TypeError as exc:  # bindings that convert the option values differently
            logger.debug("cuModuleLoadDataEx refused the JIT options (%s); no JIT log", exc)
    if result is None:
        result, call = drv.cuModuleLoadData(image.ctypes.data), "cuModuleLoadData"
    err = result[0] if isinstance(result, tuple) else result
    if logs.info_text:
        logger.debug("the JIT's info log (%s):\n%s", device.name, logs.info_text)
    if err != drv.CUresult.CUDA_SUCCESS:
        raise CUDAError(failure_message(drv, err, call, ptx, device, logs.error_text))
    return result[1]


def failure_message(
    drv: ModuleType, err: Any, call: str, ptx: str, device: Device, log: str
) -> str:
    """The error line of a failed load, its fix, then the first lines of the JIT's log."""
    name = error_name(drv, err)
    message = f"loading the PTX on {device.name} ({call}: the driver's JIT) failed: {name}; "
    if name == "CUDA_ERROR_UNSUPPORTED_PTX_VERSION":
        message += ptx_version_fix(drv, ptx, device)
    else:
        message += f"`ptxas -arch={device.arch}` on the --dump-code ptx file shows why"
    lines = log_excerpt(log)
    if lines:
        message += ("\nthe JIT's error log (its line numbers are the --dump-code ptx file's):\n"
                    + "\n".join(f"  {line}" for line in lines))  # fmt: skip
    return message


def ptx_version_fix(drv: ModuleType, ptx: str, device: Device) -> str:
    """What to do when the driver's JIT is older than the PTX ISA the code declares."""
    found = re.search(r"^\s*\.version\s+(\d+\.\d+)", ptx, re.MULTILINE)
    isa = found.group(1) if found else "?"
    has = driver_cuda_version(drv)
    needs = ISA_CUDA.get(isa)
    fix = (f"the PTX declares ISA {isa}, newer than this NVIDIA driver"
           f"{f' (CUDA {has})' if has else ''} compiles: update the NVIDIA driver"
           f"{f' to one for CUDA {needs} or newer' if needs else ''}")  # fmt: skip
    older = older_arch(device.capability, isa) if found else None
    if older:
        fix += (f", or compile for an older arch, whose PTX declares an older ISA "
                f"(--target \"cuda -arch={older}\")")  # fmt: skip
    return fix


def older_arch(capability: tuple[int, int], isa: str) -> str | None:
    """The newest arch this GPU runs whose PTX declares an ISA older than `isa`, if any."""
    limit = _isa_tuple(isa)
    fits = [a for a in CUDA_ARCHS if not a.endswith("a") and a not in _RENAMED
            and CUDATarget(a).compute_capability <= capability
            and _isa_tuple(CUDATarget(a).ptx_version[3:]) < limit]  # fmt: skip
    return fits[-1] if fits else None


def driver_cuda_version(drv: ModuleType) -> str | None:
    """`12.4` for a driver of CUDA 12.4 (cuDriverGetVersion), None when it cannot say."""
    try:
        status, version = drv.cuDriverGetVersion()
        if status != drv.CUresult.CUDA_SUCCESS:
            return None
        return f"{int(version) // 1000}.{int(version) % 1000 // 10}"
    except Exception:  # the version only decorates a message: never fail on it
        return None


def log_excerpt(
    log: str, max_lines: int = MAX_LOG_LINES, max_chars: int = MAX_LOG_CHARS
) -> list[str]:
    """The log's first non-blank lines, at most `max_lines` and `max_chars` in all."""
    lines = [line.rstrip() for line in log.splitlines() if line.strip()]
    kept: list[str] = []
    used = 0
    for line in lines[:max_lines]:
        room = max_chars - used
        if room <= 0:
            break
        kept.append(line if len(line) <= room else line[: max(room - 3, 0)] + "...")
        used += len(kept[-1])
    if len(kept) < len(lines):
        kept.append(f"... ({len(lines) - len(kept)} more lines)")
    return kept


def _text(buffer: bytearray) -> str:
    return bytes(buffer).split(b"\0", 1)[0].decode(errors="replace").strip()


def _isa_tuple(isa: str) -> tuple[int, int]:
    """`8.6` or `86` (from `ptx86`) as (8, 6)."""
    digits = isa.replace(".", "")
    return int(digits[:-1]), int(digits[-1])
