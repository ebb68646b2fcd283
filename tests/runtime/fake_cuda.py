"""A stand-in for `cuda.bindings.driver` that runs kernels with the kernel IR interpreter.

It follows the real API's shapes (every call returns `(CUresult, values...)`, kernel params as
a `void **` address, host memory as integer addresses) and checks what a GPU would: the PTX
defines each kernel asked for, the launch matches the kernel's dimensions, every pointer lies
inside an allocation. So the runtime's memory plan, argument marshalling, graph capture and
copies are exercised without a GPU; the GPU itself is checked by `make gpu-check`.
"""

from __future__ import annotations

import ctypes
import enum
import re
from types import SimpleNamespace
from typing import Any

import numpy as np

from tvmc.codegen.nvptx import PARAM_ALIGN, launch_dims
from tvmc.kernel import Kernel
from tvmc.kernel.interpret import interpret


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_INSUFFICIENT_DRIVER = 35
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_STUB_LIBRARY = 34
    CUDA_ERROR_INVALID_PTX = 218
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_LAUNCH_FAILED = 719


class CUjit_option(enum.IntEnum):  # the values of cuda.h's CUjit_option_enum
    CU_JIT_INFO_LOG_BUFFER = 3
    CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4
    CU_JIT_ERROR_LOG_BUFFER = 5
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
    CU_JIT_LOG_VERBOSE = 12


_LOG_BUFFERS = {  # a log buffer option -> the option giving its size
    CUjit_option.CU_JIT_INFO_LOG_BUFFER: CUjit_option.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
    CUjit_option.CU_JIT_ERROR_LOG_BUFFER: CUjit_option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
}
OK = CUresult.CUDA_SUCCESS
CUdevice_attribute = SimpleNamespace(
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="major",
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR="minor",
)
CUstreamCaptureMode = SimpleNamespace(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL="thread_local")


class FakeDriver:
    """One fake GPU (compute capability 9.0 unless told) running `kernels` by name."""

    CUresult = CUresult
    CUdevice_attribute = CUdevice_attribute
    CUstreamCaptureMode = CUstreamCaptureMode
    CUjit_option = CUjit_option

    def __init__(self, kernels: list[Kernel], init_result: CUresult = OK, devices: int = 1):
        self.kernels = {k.name: k for k in kernels}
        self.init_result = init_result
        self.devices = devices
        self.memory: dict[int, np.ndarray] = {}  # base address -> bytes
        self.next_address = 0x7000_0000
        self.capturing: list[Any] | None = None
        self.graphs: dict[int, list[Any]] = {}
        self.launched = 0  # kernels run
        self.graph_launches = 0
        self.fail: dict[str, CUresult] = {}  # call name -> the error it returns
        self.jit_error_log = ""  # what the JIT writes into an error log buffer when a load fails
        self.jit_info_log = ""  # what it writes into an info log buffer
        self.jit_options: dict[CUjit_option, Any] = {}  # those of the last cuModuleLoadDataEx
        self.driver_version = 13000  # CUDA 13.0

    # ---- device and context ----------------------------------------------------------------------
    def cuGetErrorName(self, err: CUresult) -> tuple[CUresult, bytes]:
        return OK, CUresult(err).name.encode()

    def cuInit(self, flags: int) -> tuple[CUresult]:
        return (self.init_result,)

    def cuDriverGetVersion(self) -> tuple[CUresult, int]:
        return OK, self.driver_version

    def cuDeviceGetCount(self) -> tuple[CUresult, int]:
        return OK, self.devices

    def cuDeviceGet(self, ordinal: int) -> tuple[CUresult, int]:
        return OK, ordinal

    def cuDeviceGetAttribute(self, attr: str, dev: int) -> tuple[CUresult, int]:
        return OK, {"major": 9, "minor": 0}[attr]

    def cuDeviceGetName(self, length: int, dev: int) -> tuple[CUresult, bytes]:
        return OK, b"Fake H200\0\0\0"

    def cuDevicePrimaryCtxRetain(self, dev: int) -> tuple[CUresult, str]:
        return OK, "context"

    def cuCtxSetCurrent(self, ctx: str) -> tuple[CUresult]:
        return (OK,)

    # ---- modules ---------------------------------------------------------------------------------
    def cuModuleLoadData(self, image: int) -> tuple[CUresult, Any]:
        if "cuModuleLoadData" in self.fail:
            return self.fail["cuModuleLoadData"], None
        ptx = ctypes.string_at(image).decode()
        return OK, set(re.findall(r"\.entry (\w+)\(", ptx))

    def cuModuleLoadDataEx(
        self, image: int, count: int, options: list[Any], values: list[Any]
    ) -> tuple[CUresult, Any]:
        """Checks the option arrays as cuda-bindings converts them; writes the logs like the JIT."""
        assert count == len(options) == len(values), "numOptions must match both lists"
        given = {CUjit_option(option): value for option, value in zip(options, values)}
        self.jit_options = given
        for option, value in given.items():
            if option in _LOG_BUFFERS:
                if not isinstance(value, (bytes, bytearray)):  # as cuda-bindings: a char*
                    raise TypeError(f"expected bytes, {type(value).__name__} found")
                assert isinstance(value, bytearray), "the JIT would write into immutable bytes"
            elif not isinstance(value, int):
                raise TypeError(f"an integer is required for {option.name}")
        error = self.fail.get("cuModuleLoadDataEx", OK)
        self._write_log(given, CUjit_option.CU_JIT_INFO_LOG_BUFFER, self.jit_info_log)
        if error != OK:
            self._write_log(given, CUjit_option.CU_JIT_ERROR_LOG_BUFFER, self.jit_error_log)
            return error, None
        ptx = ctypes.string_at(image).decode()
        return OK, set(re.findall(r"\.entry (\w+)\(", ptx))

    @staticmethod
    def _write_log(given: dict[CUjit_option, Any], option: CUjit_option, text: str) -> None:
        """Copy `text` (cut to the stated size, NUL-terminated) to the buffer's address."""
        if option not in given:
            return
        buffer, size = given[option], given[_LOG_BUFFERS[option]]
        assert 0 < size <= len(buffer), "the stated size overruns the buffer"
        data = text.encode()[: size - 1] + b"\0"
        address = ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))
        ctypes.memmove(address, data, len(data))

    def cuModuleGetFunction(self, module: set[str], name: bytes) -> tuple[CUresult, Any]:
        if name.decode() not in module or name.decode() not in self.kernels:
            return CUresult.CUDA_ERROR_NOT_FOUND, None
        return OK, name.decode()

    def cuModuleUnload(self, module: Any) -> tuple[CUresult]:
        return (OK,)

    # ---- memory ----------------------------------------------------------------------------------
    def cuMemAlloc(self, nbytes: int) -> tuple[CUresult, int]:
        address = self.next_address
        self.memory[address] = np.full(nbytes, 0xFF, np.uint8)  # NaN-like garbage
        self.next_address += (nbytes + 511) // 256 * 256
        return OK, address

    def cuMemFree(self, address: int) -> tuple[CUresult]:
        del self.memory[int(address)]
        return (OK,)

    def region(self, address: int, nbytes: int) -> np.ndarray:
        """The bytes at a device address, which must lie inside one allocation."""
        for base, data in self.memory.items():
            if base <= address and address + nbytes <= base + data.size:
                return data[address - base : address - base + nbytes]
        raise AssertionError(f"device pointer {address:#x} (+{nbytes}) is in no allocation")

    def cuMemcpyHtoD(self, dst: int, src: int, nbytes: int) -> tuple[CUresult]:
        ctypes.memmove(self.region(dst, nbytes).ctypes.data, src, nbytes)
        return (OK,)

    def cuMemcpyHtoDAsync(self, dst: int, src: int, nbytes: int, stream: Any) -> tuple[CUresult]:
        assert self.capturing is None, "copies are not captured"
        return self.cuMemcpyHtoD(dst, src, nbytes)

    def cuMemcpyDtoHAsync(self, dst: int, src: int, nbytes: int, stream: Any) -> tuple[CUresult]:
        ctypes.memmove(dst, self.region(src, nbytes).ctypes.data, nbytes)
        return (OK,)

    # ---- launches, streams, graphs, events -------------------------------------------------------
    def cuLaunchKernel(self, f: str, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        kernel = self.kernels[f]
        dims = launch_dims(kernel)[1]
        assert ((gx, gy, gz), (bx, by, bz), shared) == (dims.grid, dims.block, dims.shared_bytes)
        arrays = []
        for i, buf in enumerate(kernel.params):
            slot = ctypes.c_uint64.from_address(params + 8 * i).value
            address = ctypes.c_uint64.from_address(slot).value
            # the PTX declares every param 16-byte aligned (float4 accesses rely on it)
            assert address % PARAM_ALIGN == 0, f"{f}: {buf.name} at {address:#x} misaligned"
            nbytes = buf.size * np.dtype(buf.dtype).itemsize
            arrays.append(self.region(address, nbytes).view(buf.dtype).reshape(buf.shape))

        def run() -> None:
            self.launched += 1
            interpret(kernel, *arrays)

        if self.capturing is not None:
            self.capturing.append(run)
        else:
            run()
        return (OK,)

    def cuStreamCreate(self, flags: int) -> tuple[CUresult, str]:
        return OK, "stream"

    def cuStreamDestroy(self, stream: Any) -> tuple[CUresult]:
        return (OK,)

    def cuStreamSynchronize(self, stream: Any) -> tuple[CUresult]:
        return (self.fail.get("cuStreamSynchronize", OK),)

    def cuStreamBeginCapture(self, stream: Any, mode: str) -> tuple[CUresult]:
        self.capturing = []
        return (OK,)

    def cuStreamEndCapture(self, stream: Any) -> tuple[CUresult, int]:
        graph = len(self.graphs) + 1
        self.graphs[graph], self.capturing = self.capturing or [], None
        return OK, graph

    def cuGraphInstantiate(self, graph: int, flags: int) -> tuple[CUresult, int]:
        return OK, graph

    def cuGraphLaunch(self, graph: int, stream: Any) -> tuple[CUresult]:
        self.graph_launches += 1
        for run in self.graphs[graph]:
            run()
        return (OK,)

    def cuGraphDestroy(self, graph: int) -> tuple[CUresult]:
        return (OK,)

    def cuGraphExecDestroy(self, graph: int) -> tuple[CUresult]:
        return (OK,)

    def cuEventCreate(self, flags: int) -> tuple[CUresult, dict]:
        return OK, {}

    def cuEventRecord(self, event: dict, stream: Any) -> tuple[CUresult]:
        event["launched"] = self.launched  # the fake clock: 0.1 ms per kernel run
        return (OK,)

    def cuEventSynchronize(self, event: Any) -> tuple[CUresult]:
        return (OK,)

    def cuEventElapsedTime(self, start: dict, end: dict) -> tuple[CUresult, float]:
        return OK, 0.1 * (end["launched"] - start["launched"]) + 0.001

    def cuEventDestroy(self, event: Any) -> tuple[CUresult]:
        return (OK,)
