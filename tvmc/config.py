"""Environment variables tvmc reads, declared once (documented in docs/environment.md)."""

from __future__ import annotations

import os

from tvmc.errors import UsageError

# Number of worker threads for compiled code; default: the machine's physical cores.
NUM_THREADS_ENV = "TVMC_NUM_THREADS"
# Processes generating code for one compile (1: all in the compiling process); default: the
# physical cores. Programs of fewer than 8 kernels always compile in one process.
CODEGEN_JOBS_ENV = "TVMC_CODEGEN_JOBS"
# Set to any value to disable colour (https://no-color.org); Rich honours it as well.
NO_COLOR_ENV = "NO_COLOR"


def env_int(name: str) -> int | None:
    """An integer environment variable, or None when unset or empty; a UsageError otherwise."""
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"${name} must be an integer, got {value!r}") from None


# An executor times its runs and uses fewer threads while that has lately been faster (a busy
# machine; tvmc/runtime/thread_choice.py); set to 0 to run every inference on the full count.
ADAPTIVE_THREADS_ENV = "TVMC_ADAPTIVE_THREADS"


def env_on(name: str, default: bool = False) -> bool:
    """Whether a switch is on: 1, true, yes, on; or 0, false, no, off; unset or empty:
    `default`; a UsageError for anything else."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"${name} must be 1 or 0 (true/false, yes/no, on/off), got {value!r}")


# Which threads run parallel loops: unset, tvmc's own pool (tvmc/codegen/pool.c: the caller works
# too, chunks claimed dynamically, so a late worker holds nobody up on a busy machine); `gomp`,
# libgomp's static split and full join (the old behaviour; it collapses under oversubscription).
THREAD_POOL_ENV = "TVMC_THREAD_POOL"
# Microseconds an idle pool worker (or a caller waiting for a claimed chunk) spins before it
# sleeps on a futex; default 100: back-to-back loops of one inference find workers awake (a
# whole number, at most 1,000,000).
POOL_SPIN_US_ENV = "TVMC_POOL_SPIN_US"
# Microseconds of the time slice pool workers ask the kernel for (Linux 6.12 on, SCHED_OTHER);
# default 100: woken for a loop beside busy neighbours, a worker runs at once instead of queueing
# behind a neighbour's slice (its share of the CPU stays the same); 0 keeps the kernel's default
# (a whole number; over 100,000 the kernel's longest).
POOL_SLICE_US_ENV = "TVMC_POOL_SLICE_US"


def check_pool_environment() -> None:
    """pool.c reads $TVMC_POOL_SPIN_US and $TVMC_POOL_SLICE_US itself when it loads, and takes
    its default for a value that is not all digits: a UsageError for one instead (digits only,
    as pool.c parses them: no sign, no spaces). Checked at the CLI's start (tune's runner
    processes load the pool, not the command's) and where the pool loads (the Python API)."""
    for name in (POOL_SPIN_US_ENV, POOL_SLICE_US_ENV):
        value = os.environ.get(name, "")
        if value and not (value.isascii() and value.isdigit()):
            raise UsageError(f"${name} must be a whole number of microseconds, got {value!r}")


# libgomp's idle worker threads spin unless told otherwise, which steals cores from the rest of
# the process between inferences. Set before libgomp loads (xgboost and TVMC_THREAD_POOL=gomp).
OMP_WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
os.environ.setdefault(OMP_WAIT_POLICY_ENV, "PASSIVE")

# After a parallel loop, libgomp workers spin this many iterations (about a millisecond here)
# before sleeping (xgboost's, and TVMC_THREAD_POOL=gomp's). Fully passive waiting costs ~1 ms per
# wake-up in a VM, which cancels the second thread on kernels under ~5 ms; a bounded spin keeps
# that gain and still sleeps when idle.
GOMP_SPINCOUNT_ENV = "GOMP_SPINCOUNT"
os.environ.setdefault(GOMP_SPINCOUNT_ENV, "1000000")

# The fp32 peak (GFLOP/s) tuning summaries compare with; default: one core's, the best of the
# first three processes' measurements per CPU model by an FMA kernel (tvmc.runtime.peak), cached
# (a benchmark's faster peak bursts raise it), times the physical cores used.
PEAK_GFLOPS_ENV = "TVMC_PEAK_GFLOPS"
# Where tvmc caches what it measures or builds for this machine (the peak, the thread pool, the
# CPU as LLVM names it); default: ~/.cache/tvmc.
CACHE_DIR_ENV = "TVMC_CACHE_DIR"
# The most bytes (package and inputs) a remote run sends to, or a device worker accepts from, a
# client; default: 2 GiB. Read by each side, so a worker can refuse what its memory cannot hold.
REMOTE_MAX_BYTES_ENV = "TVMC_REMOTE_MAX_BYTES"
REMOTE_RUN_TIMEOUT = 600.0  # seconds a remote run may take on the worker before it is killed
