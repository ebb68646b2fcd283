"""Auto-tuning: tasks, knob spaces, measurement, tuners, and the records file that joins tuning
to compilation.

In: tvmc.graph, tvmc.ops (templates and their spaces), tvmc.lower, tvmc.codegen, tvmc.runtime.
Out: `extract_tasks`, `Task`, `Record`, `read_records`, `append_records`, `best_records`;
measurers: `local.LocalMeasurer` (this machine), `dask_engine.DaskMeasurer` (a Dask cluster,
the optional extra tvmc[dist]), both routing a target through its backend (`backends.BACKENDS`:
`measure_cpu`, `measure_cuda` over the shared `measure`); tuners by name in `tuners.TUNERS`.
The names below are imported on first use (`tvmc.lazy`): reading records loads no op templates.
"""

from typing import TYPE_CHECKING

from tvmc.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(["ERROR_NAMES", "FAILED_COST", "Record", "append_records", "best_records",
                     "read_records"], "tvmc.autotune.records"),
    **dict.fromkeys(["Task", "extract_tasks", "task_args", "task_name"], "tvmc.autotune.task"),
}  # fmt: skip
__all__ = [
    "ERROR_NAMES",
    "FAILED_COST",
    "Record",
    "Task",
    "append_records",
    "best_records",
    "extract_tasks",
    "read_records",
    "task_args",
    "task_name",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from tvmc.autotune.records import (
        ERROR_NAMES,
        FAILED_COST,
        Record,
        append_records,
        best_records,
        read_records,
    )
    from tvmc.autotune.task import Task, extract_tasks, task_args, task_name
