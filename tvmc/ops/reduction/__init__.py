"""Row reductions: Reduce* and ArgMax/ArgMin (`reduce`), Softmax/LogSoftmax/Hardmax (`softmax`).

Each op is one template building one `reduction_kernel` (tvmc.ops.schedule.reduction) on either
target, tunable on CUDA in `reduce_threads`. Registered here.
"""

from tvmc.ops.reduction import reduce, softmax
from tvmc.ops.registry import register

for _opdef in (*reduce.DEFINITIONS, *softmax.DEFINITIONS):
    register(_opdef)
