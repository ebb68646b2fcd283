"""Resize (ONNX Resize and Upsample): the rule and reference (`definition`), the compute
(`compute`: one expression per output element) and the template every target lowers it by
(`template`: an integer upsample of the last axis as contiguous vectors on a CPU, the
compute's loop nest elsewhere). Registered here."""

from tvmc.ops.registry import OPAQUE, OpDef, register
from tvmc.ops.resize.definition import RESIZE_ATTRS, resize, resize_rule
from tvmc.ops.resize.template import RESIZE

register(
    OpDef(
        "Resize",
        resize_rule,
        resize,
        {"cpu": RESIZE, "cuda": RESIZE},
        RESIZE_ATTRS,
        OPAQUE,
    )
)
