"""Resize (ONNX Resize and Upsample): the rule and reference (`definition`) and the compute
(`compute`, every target). Registered here."""

from tvmc.ops.lowering import computed
from tvmc.ops.registry import OPAQUE, OpDef, register
from tvmc.ops.resize.compute import resize_compute, resize_element_cost
from tvmc.ops.resize.definition import RESIZE_ATTRS, resize, resize_rule

register(
    OpDef(
        "Resize",
        resize_rule,
        resize,
        computed(resize_compute, resize_element_cost),
        RESIZE_ATTRS,
        OPAQUE,
    )
)
