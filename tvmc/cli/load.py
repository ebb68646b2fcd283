"""`tvmc load`: read a model, report what is in it, optionally save it as a `.tvmc` file."""

from __future__ import annotations

import click
from rich.table import Table

from tvmc.cli.common import err, out, print_json, wants_json
from tvmc.cli.types import FileWithExt, format_option, model_options
from tvmc.driver import load


@click.command("load")
@click.argument("model_file", type=FileWithExt((".onnx", ".tvmc"), dir_okay=True))
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False), help="Save the loaded model (.tvmc)."
)
@click.option(
    "--force",
    is_flag=True,
    help="With -o: replace the file even if it is not a saved tvmc model (by default only a "
    "saved model is replaced, never the model read or another file).",
)
@click.option("--dump", is_flag=True, help="Print the whole graph IR.")
@model_options
@format_option
def load_command(
    model_file,
    output,
    force,
    dump,
    input_shapes,
    input_dtypes,
    model_format,
    output_format,
    json_flag,
):
    """Load MODEL_FILE (ONNX or .tvmc), fold its constants and show its inputs, outputs and ops."""
    model = load(model_file, shape_dict=input_shapes, model_format=model_format,
                 dtype_dict=input_dtypes)  # fmt: skip
    if output:
        model.save(output, force=force)
        err.print(f"saved {output}")
    graph = model.graph
    if wants_json(output_format, json_flag):
        print_json(
            {
                "model": model_file,
                "inputs": {
                    k: {"shape": list(t.shape), "dtype": t.dtype} for k, t in model.inputs.items()
                },
                "outputs": {
                    k: {"shape": list(t.shape), "dtype": t.dtype} for k, t in model.outputs.items()
                },
                "nodes": len(graph.nodes),
                "ops": graph.op_counts(),
                "params": len(graph.params),
                "param_bytes": graph.param_bytes(),
                "load_seconds": round(model.load_seconds, 4),
                "saved": output,
            }
        )
        return
    table = Table(title=f"{model_file}", title_justify="left")
    table.add_column("kind")
    table.add_column("name")
    table.add_column("type")
    for name, typ in model.inputs.items():
        table.add_row("input", name, str(typ))
    for name, typ in model.outputs.items():
        table.add_row("output", name, str(typ))
    out.print(table)
    ops = ", ".join(f"{op} x{n}" for op, n in graph.op_counts().items())
    out.print(f"{len(graph.nodes)} nodes: {ops}")
    out.print(
        f"{len(graph.params)} params ({graph.param_bytes() / 1e6:.2f} MB); "
        f"loaded in {model.load_seconds:.2f} s"
    )
    if dump:
        out.print(graph.dump(), markup=False)
