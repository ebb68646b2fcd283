"""The op registry: every op complete, one table routes lowerings, families independent."""

from __future__ import annotations

import importlib
import pathlib

import pytest

import tvmc.ops
from tvmc.errors import UnsupportedModelError
from tvmc.frontend.converters import CONVERTER_ONLY, CONVERTERS, FAMILIES
from tvmc.graph import TensorType
from tvmc.ops import OPS
from tvmc.ops.lowering import TARGET_KINDS, Compute, LoweringTarget, Template, computed
from tvmc.ops.registry import OpDef, register

ROOT = pathlib.Path(tvmc.ops.__file__).parent
OURS = sorted(n for n, d in OPS.items() if d.reference.__module__.startswith("tvmc."))  # no probes


@pytest.mark.parametrize("name", OURS)
def test_every_op_is_complete(name):
    """Shape rule, reference, doc, and a lowering table naming every target kind."""
    opdef = OPS[name]
    assert opdef.name == name
    assert callable(opdef.infer) and callable(opdef.reference)
    assert opdef.doc, f"{name} has no doc (docs/ops.md shows it)"
    low, high = opdef.num_inputs
    assert 0 <= low <= high
    assert set(opdef.lowerings) == set(TARGET_KINDS)
    for kind, lowering in opdef.lowerings.items():
        assert lowering is None or isinstance(lowering, Compute | Template), (name, kind)
    assert all(0 <= i < high for i in opdef.weights), "weights name inputs the op can have"


def test_heavy_ops_count_flops_and_name_their_weights():
    conv, matmul = OPS["Conv"], OPS["MatMul"]
    x, w = TensorType((1, 8, 10, 10), "float32"), TensorType((16, 8, 3, 3), "float32")
    attrs = conv.normalize_attrs(
        {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1]}, ""
    )
    (out,) = conv.infer(attrs, [x, w])
    assert conv.count_flops(attrs, [x, w], [out]) == 2 * 8 * 9 * out.size
    assert conv.weights == (1, 2) and matmul.weights == (1,)
    a, b = TensorType((4, 32), "float32"), TensorType((32, 8), "float32")
    assert matmul.count_flops({}, [a, b], matmul.infer({}, [a, b])) == 2 * 4 * 8 * 32
    assert OPS["Relu"].count_flops({}, [a], [a]) == 0


def test_the_table_routes_by_target_kind():
    """A template per kind, a missing kind an unsupported-op error, spaces per kind."""
    seen: list[str] = []

    def build(kind):
        return lambda ctx, attrs, inputs, outputs, epilogue: seen.append(kind) or []

    opdef = OpDef(
        "_Routed", lambda attrs, types: types[:1], lambda attrs, x: x,
        {"cpu": Template(build("cpu"), lambda *a: None), "cuda": None},
    )  # fmt: skip
    from tvmc.ops.lowering import LowerContext

    opdef.build(LowerContext(LoweringTarget()), {}, [], [], None)
    assert seen == ["cpu"]
    with pytest.raises(UnsupportedModelError, match="_Routed.*cuda"):
        opdef.build(LowerContext(LoweringTarget(kind="cuda")), {}, [], [], None)
    assert opdef.is_template and not opdef.is_compute
    assert not opdef.tunable("cuda") and opdef.tunable("cpu")


def test_a_table_must_name_every_kind_and_one_form():
    with pytest.raises(AssertionError, match="lowering table"):
        OpDef("_Bad", lambda a, t: t, lambda a, x: x, {"cpu": Compute(lambda *a: [])})
    mixed = {"cpu": Compute(lambda *a: []), "cuda": Template(lambda *a: [])}
    with pytest.raises(AssertionError, match="same way"):
        OpDef("_Bad", lambda a, t: t, lambda a, x: x, mixed)


def test_an_op_registers_once():
    with pytest.raises(AssertionError, match="twice"):
        register(OpDef("Relu", lambda a, t: t, lambda a, x: x, computed(lambda *a: [])))


def test_every_converter_family_has_an_op_family():
    """Converter modules mirror the op families, except the listed decompositions (converter
    only: transformer blocks, recurrences, control flow), which must not shadow an op family."""
    ops_families = {p.stem for p in ROOT.iterdir() if (p / "__init__.py").exists() or (
        p.suffix == ".py" and p.stem not in ("__init__", "common", "interpret", "lowering",
                                              "registry", "space", "window"))}  # fmt: skip
    ops_families.discard("schedule")
    frontend = {m.__name__.rsplit(".", 1)[1] for m in FAMILIES}
    converter_only = {m.__name__.rsplit(".", 1)[1] for m in CONVERTER_ONLY}
    assert converter_only == {"attention", "control_flow", "recurrent", "transformer"}
    assert converter_only <= frontend and not converter_only & ops_families
    assert frontend - converter_only == ops_families
    assert "Conv" in CONVERTERS and "Gemm" in CONVERTERS


@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_registration_does_not_depend_on_import_order(order, monkeypatch):
    """Families register their own complete ops: any order gives the same registry."""
    families = list(tvmc.ops.FAMILIES)
    if order == "reversed":
        families.reverse()
    fresh: dict[str, OpDef] = {}
    monkeypatch.setattr("tvmc.ops.registry.OPS", fresh)
    for family in families:
        importlib.reload(family)  # runs its registrations again, into `fresh`
        assert family.__doc__, f"{family.__name__} says what it holds"
    assert set(fresh) == set(OURS)
    for name in OURS:  # reloading a one-module family makes new function objects
        kinds = {k: type(v) for k, v in OPS[name].lowerings.items()}
        assert {k: type(v) for k, v in fresh[name].lowerings.items()} == kinds
