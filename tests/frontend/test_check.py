"""The model checker and the bounds while converting: each malformed model is a ModelError (or
UnsupportedModelError) naming what is wrong, before anything is allocated."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend import convert_model
from tvmc.frontend.bounds import check_size
from tvmc.frontend.check import check_name
from tvmc.memory import human_bytes, memory_limit

F32 = TensorProto.FLOAT
X = helper.make_tensor_value_info("x", F32, [1, 3])
Y = helper.make_tensor_value_info("y", F32, None)
XC = helper.make_tensor_value_info("x", F32, [1, 1, 4, 4])
W = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")


def model(nodes, inputs=(X,), outputs=(Y,), inits=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def relu(name: str = "relu", source: str = "x") -> onnx.NodeProto:
    return helper.make_node("Relu", [source], ["y"], name)


def init(name: str, array: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def _dims_mismatch() -> onnx.ModelProto:
    w = init("w", np.ones(3, np.float32))
    w.dims[:] = [5]
    return model([helper.make_node("Add", ["x", "w"], ["y"])], inits=[w])


def _group_tensor() -> onnx.ModelProto:
    node = helper.make_node("Conv", ["x", "w"], ["y"])
    node.attribute.append(helper.make_attribute("group", init("g", np.array(1, np.int64))))
    return model([node], [XC], inits=[W])


def _const_of_shape(shape: list[int], dtype=np.int64) -> onnx.ModelProto:
    return model([helper.make_node("ConstantOfShape", ["s"], ["y"])], [],
                 inits=[init("s", np.array(shape, dtype))])  # fmt: skip


def _one_input(op: str, inputs: dict[str, np.ndarray], attrs=None) -> onnx.ModelProto:
    node = helper.make_node(op, ["x", *inputs], ["y"], **(attrs or {}))
    return model([node], inits=[init(k, v) for k, v in inputs.items()])


def _if_branch(node: onnx.NodeProto) -> onnx.ModelProto:
    """`node` inside the then-branch of an If on a constant condition (reads 'x' and 'w' from
    the outer scope)."""
    then = helper.make_graph([node], "then", [], [helper.make_tensor_value_info("y", F32, None)])
    other = helper.make_graph([relu(source="x")], "else", [], [Y])
    cond = init("c", np.array(True))
    outer = helper.make_node("If", ["c"], ["z"], "pick", then_branch=then, else_branch=other)
    return model([outer], [XC], [helper.make_tensor_value_info("z", F32, None)], [W, cond])


# (build, error class, pattern): the attacker's list and what the fuzzer found since.
CASES: dict[str, tuple[Callable[[], onnx.ModelProto], type, str]] = {
    "dims disagree with data": (_dims_mismatch, ModelError, r"dims \[5\] hold 5 .* 12 bytes"),
    "ConstantOfShape of 512 GiB": (lambda: _const_of_shape([1 << 37]), ModelError,
                                   r"ConstantOfShape.*\[137438953472\].*needs 512 GiB"),
    "negative input dim": (lambda: model([relu()], [helper.make_tensor_value_info(
        "x", F32, [1, -3])]), ModelError, r"input 'x' has a negative dimension"),
    "STRING initializer": (lambda: model([helper.make_node("Add", ["x", "w"], ["y"])], inits=[
        helper.make_tensor("w", TensorProto.STRING, [1], [b"a"])]), UnsupportedModelError,
        r"initializer 'w' has element type STRING"),
    "elem_type 999": (lambda: model([relu()], [helper.make_tensor_value_info("x", 999, [1])]),
                      ModelError, r"element type 999, which is not an ONNX element type"),
    "input named ''": (lambda: model([relu(source="")], [helper.make_tensor_value_info(
        "", F32, [1])]), ModelError, r"an input with an empty name"),
    "Conv with one input": (lambda: model([helper.make_node("Conv", ["x"], ["y"])], [XC]),
                            ModelError, r"Conv node '': .*input size 1 not in range \[min=2"),
    "group as a tensor": (_group_tensor, ModelError, r"group.*Expected: 'INT', actual: 'TENSOR'"),
    "pads of 2^40": (lambda: model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[2**40] * 4)],
                                   [XC], inits=[W]), ModelError, r"'pads' holds 1099511627776"),
    "strides of 0": (lambda: model([helper.make_node("Conv", ["x", "w"], ["y"], strides=[0, 1])],
                                   [XC], inits=[W]), ModelError, r"'strides' holds 0"),
    "strides of 0 in an If branch": (lambda: _if_branch(helper.make_node(
        "Conv", ["x", "w"], ["y"], "conv", strides=[0, 1])), ModelError,
        r"Conv node 'conv' in If 'pick'.then_branch: attribute 'strides' holds 0"),
    "duplicate inputs": (lambda: model([helper.make_node("Add", ["x", "x"], ["y"])], [X, X]),
                         ModelError, r"names an input 'x' twice"),
    "no outputs": (lambda: model([relu()], outputs=[]), ModelError, r"has no outputs"),
    "escape in a node name": (lambda: model([relu("\x1b[31mred")]), ModelError,
                              r"node name .* control characters"),
    "tensor written twice": (lambda: model([relu("a"), relu("b")]), ModelError,
                             r"writes 'y', which Relu node 'a' already defines"),
    "Slice with scalar starts": (lambda: _one_input("Slice", {"s": np.array(0), "e": np.array(
        [1])}), ModelError, r"input 1 \(starts\) must be a 1-D list"),
    "Clip with three maxima": (lambda: _one_input("Clip", {"lo": np.float32(0), "hi": np.ones(
        3, np.float32)}), ModelError, r"input 2 \(max\) must hold one value"),
    "Clip bounds of another type": (lambda: _one_input("Clip", {"lo": np.int64(0)}), ModelError,
                                    r"inputs 0 and 1 must have one element type \(T\)"),
    "Gather float indices": (lambda: _one_input("Gather", {"i": np.zeros(1, np.float32)}),
                             ModelError, r"input 1 \(indices\) is float32; it must be one of"),
    "Range of 2^40 values": (lambda: model([helper.make_node("Range", ["a", "b", "c"], ["y"])],
                             [], inits=[init("a", np.int64(0)), init("b", np.int64(2**40)),
                                        init("c", np.int64(1))]), ModelError,
                             r"Range.*\[1099511627776\] \(int64\) needs 8 TiB"),  # fmt: skip
    "Range to infinity": (lambda: model([helper.make_node("Range", ["a", "b", "c"], ["y"])], [],
                          inits=[init("a", np.float32(0)), init("b", np.float32(np.inf)),
                                 init("c", np.float32(1))]), ModelError, r"limit .* not finite"),
    "Expand to 12 TiB": (lambda: _one_input("Expand", {"s": np.array([2**20, 2**20, 3])}),
                         ModelError, r"Expand.*needs 12 TiB"),
    "Tile past int32": (lambda: _one_input("Tile", {"r": np.array([1, 2**30])}),
                        UnsupportedModelError, r"Tile.*3,221,225,472 elements"),
    "Resize with infinite scales": (lambda: _one_input("Resize", {"roi": np.array([], np.float32),
                                    "sc": np.array([1, np.inf], np.float32)}), ModelError,
                                    r"scales \[1.0, inf\] is not finite"),  # fmt: skip
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_models_are_model_errors(case: str) -> None:
    build, error, pattern = CASES[case]
    with pytest.raises(error, match=pattern):
        convert_model(build())


def test_invalid_utf8_names_are_refused() -> None:
    data = model([relu("ZZZZ")]).SerializeToString().replace(b"ZZZZ", b"\xff\xfe\x00Z")
    with pytest.raises(ModelError, match=r"node name b'\\xff\\xfe\\x00Z' is not valid UTF-8"):
        convert_model(onnx.load_from_string(data))


@pytest.mark.parametrize("name", ["[/bold]", "名前", "a b", "x" * 4096])
def test_printable_names_pass(name: str) -> None:
    check_name(name, "node name")


def test_markup_in_names_converts() -> None:
    graph = convert_model(model([relu("[/bold]")]))
    assert graph.nodes[0].name == "[/bold]"


def test_sizes_are_bounded_by_memory_and_int32() -> None:
    check_size("n", "out", [2**31 - 1], "int8")
    with pytest.raises(UnsupportedModelError, match="32-bit"):
        check_size("n", "out", [2**31], "int8")
    with pytest.raises(ModelError, match="more than int64 counts"):
        check_size("n", "out", [2**40, 2**40], "int8")
    with pytest.raises(ModelError, match="more than the .* of memory"):
        check_size("n", "out", [memory_limit() // 4 + 1], "float32")
    assert human_bytes(512 << 30) == "512 GiB" and human_bytes(100) == "100 B"


def test_valid_models_still_convert() -> None:
    graph = convert_model(_one_input("Clip", {"lo": np.float32(0), "hi": np.float32(1)}))
    assert graph.types["y"].shape == (1, 3)
    graph = convert_model(_if_branch(helper.make_node("Conv", ["x", "w"], ["y"], "conv")))
    assert graph.types["z"].shape == (1, 1, 2, 2)


@pytest.mark.parametrize("raw", [True, False])
def test_packed_int4_initializers_hold_half_a_byte_each(raw: bool) -> None:
    w = helper.make_tensor("w", TensorProto.INT4, [3], [1, -2, 3])
    if raw:
        w = numpy_helper.from_array(numpy_helper.to_array(w), "w")
    node = helper.make_node("Cast", ["w"], ["y"], to=F32)
    graph = convert_model(model([node], [], inits=[w]))
    assert graph.params["y"].tolist() == [1, -2, 3]
