"""`tvmc run`: run a package on inputs; print outputs, times, top classes or a kernel profile."""

from __future__ import annotations

import click
from rich.table import Table
from rich.text import Text

from tvmc.cli.common import err, out, print_json, wants_json
from tvmc.cli.types import FileWithExt, FiniteFloatRange, SuggestChoice, format_option
from tvmc.config import REMOTE_RUN_TIMEOUT
from tvmc.driver import DEVICES, FILL_MODES, TVMCResult, run
from tvmc.driver.plots import PROFILE_FORMATS, check_extension, write_profile


@click.command("run")
@click.argument("package_file", type=FileWithExt((".tar",), dir_okay=True))
@click.option(
    "--device",
    type=SuggestChoice(DEVICES),
    default="cpu",
    show_default=True,
    help="Where to run the package.",
)
@click.option(
    "-i",
    "--inputs",
    type=FileWithExt((".npz",), dir_okay=False),
    help="Inputs by name (.npz); inputs it lacks are filled by --fill-mode.",
)
@click.option(
    "-o",
    "--outputs",
    type=FileWithExt((".npz",), dir_okay=False),
    help="Save the outputs (.npz, by the model's names and as output_0, output_1, ...).",
)
@click.option(
    "--fill-mode",
    type=SuggestChoice(FILL_MODES),
    default="random",
    show_default=True,
    help="Fill for inputs not given: seeded random (normal floats, 0/1 integers), zeros, ones.",
)
@click.option("--print-time", is_flag=True, help="Time the model and print TVMC's time table.")
@click.option(
    "--print-top",
    type=click.IntRange(min=1),
    metavar="N",
    help="Print the N largest classes of the first output.",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Timed measurements (each the mean of --number runs).",
)
@click.option(
    "--number",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Runs per measurement.",
)
@click.option(
    "--min-repeat-ms",
    type=FiniteFloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Raise --number until one measurement lasts this long.",
)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    metavar="N",
    help="Untimed runs before --print-time measures (they page code in, start the threads).",
)
@click.option(
    "--duration",
    type=FiniteFloatRange(min=0),
    default=0.0,
    show_default=True,
    metavar="S",
    help="With --print-time, keep measuring until S seconds have passed (at least --repeat "
    "measurements; 0: exactly --repeat).",
)
@click.option(
    "--profile",
    is_flag=True,
    help="Time each kernel call; print the time per model node (ONNX name, op, shapes).",
)
@click.option(
    "--profile-out",
    type=FileWithExt((".json", ".svg"), dir_okay=False),
    multiple=True,
    metavar="FILE",
    help="Write the profile (implies --profile): .json a Chrome trace (Perfetto, "
    "chrome://tracing), .svg a bar chart of time per node and op type. Repeatable.",
)
@click.option(
    "--end-to-end",
    is_flag=True,
    help="With --device cuda, time copying inputs in and outputs out too (on the CPU nothing is "
    "copied: no change).",
)
@click.option(
    "--num-threads",
    type=click.IntRange(min=1),
    metavar="N",
    help="Worker threads (default: $TVMC_NUM_THREADS, else the physical cores), at most: runs"
    " take fewer while that has lately been faster (TVMC_ADAPTIVE_THREADS=0: always N).",
)
@click.option(
    "--scheduler",
    "--rpc-tracker",
    "scheduler",
    metavar="ADDRESS",
    help="Run on a Dask worker of this scheduler (tcp://host:8786; TVMC's --rpc-tracker "
    "HOST:PORT names it too), one with --device-key; see docs/distributed.md.",
)
@click.option(
    "--device-key",
    "--rpc-key",
    "device_key",
    metavar="KEY",
    help="With --scheduler: the device key of the worker to run on (`tvmc worker --device-key`).",
)
@click.option(
    "--remote-timeout",
    type=FiniteFloatRange(min=0, min_open=True),
    default=REMOTE_RUN_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="With --scheduler: stop the run on the worker past this many seconds.",
)
@format_option
def run_command(
    package_file: str,
    device: str,
    inputs: str | None,
    outputs: str | None,
    fill_mode: str,
    print_time: bool,
    print_top: int | None,
    repeat: int,
    number: int,
    min_repeat_ms: float,
    warmup: int,
    duration: float,
    profile: bool,
    profile_out: tuple[str, ...],
    end_to_end: bool,
    num_threads: int | None,
    scheduler: str | None,
    device_key: str | None,
    remote_timeout: float,
    output_format: str,
    json_flag: bool,
) -> None:
    """Run PACKAGE_FILE (made by `tvmc compile`) once, and time or profile it when asked.

    \b
    tvmc run model.tar --print-time --warmup 10 --duration 5   # p50..p99, inferences/s
    tvmc run model.tar --profile                                # time per ONNX node
    tvmc run model.tar --profile-out trace.json --profile-out chart.svg
    """
    for path in profile_out:  # before running: a typo should not cost a profile
        check_extension(path, PROFILE_FORMATS, "--profile-out")
    result = run(
        package_file,
        device=device,
        inputs=inputs,
        fill_mode=fill_mode,
        benchmark=print_time,
        repeat=repeat,
        number=number,
        min_repeat_ms=min_repeat_ms,
        profile=profile or bool(profile_out),
        num_threads=num_threads,
        end_to_end=end_to_end,
        warmup=warmup,
        duration=duration,
        scheduler=scheduler,
        device_key=device_key,
        remote_timeout=remote_timeout,
    )
    if result.worker:
        err.print(f"ran on worker {result.worker}", markup=False)
    if outputs:
        result.save(outputs)
        err.print(f"saved {outputs}", markup=False)
    for path in profile_out:
        write_profile(path, result.profile_nodes, device, package_file)
        err.print(f"saved {path}", markup=False)
    if wants_json(output_format, json_flag):
        document = {"package": package_file, "device": device, **result.to_json(print_top)}
        print_json({**document, "saved": outputs})
        return
    print_text(result, print_time, print_top)


def print_text(result: TVMCResult, print_time: bool, print_top: int | None) -> None:
    """Outputs, then the time table, top classes and profile that were asked for."""
    table = Table(title="outputs", title_justify="left")
    for column in ("name", "alias", "type"):
        table.add_column(column)
    for i, name in enumerate(result.output_names):
        value = result.outputs[name]
        shape = ",".join(str(d) for d in value.shape)
        table.add_row(name, f"output_{i}", f"{value.dtype.name}[{shape}]")
    out.print(table)
    if print_top:
        top = Table(title=f"top {print_top} of {result.output_names[0]}", title_justify="left")
        for column in ("rank", "class", "value"):
            top.add_column(column, justify="right")
        for rank, (index, value) in enumerate(result.top(print_top), 1):
            top.add_row(str(rank), str(index), f"{value:.6g}")
        out.print(top)
    if result.profile:
        print_profile(result)
    if print_time:
        click.echo(result.format_times())  # TVMC's exact text: not through Rich


def print_profile(result: TVMCResult) -> None:
    """Per model node (ONNX name, op types of the fused group, shapes), its kernels under it:
    time, share, GFLOP/s, GB/s."""
    table = Table(title="profile (median per call)", title_justify="left")
    table.add_column("node", overflow="fold")
    table.add_column("op", overflow="fold")
    table.add_column("shapes", overflow="fold")
    for column in ("time (ms)", "share %", "GFLOP/s", "GB/s"):
        table.add_column(column, justify="right")
    for node in result.profile_nodes:
        table.add_row(Text(node["name"]), Text(node["op"]), Text(format_shapes(node)),
                      f"{node['time_ms']:.4f}", f"{node['share_percent']:.1f}",
                      _rate(node["gflops"]), _rate(node["gbps"]))  # fmt: skip
        if len(node["kernels"]) > 1:
            for kernel in node["kernels"]:
                table.add_row(Text(f"└ {kernel['kernel']}", style="dim"), "", "",
                              Text(f"{kernel['time_ms']:.4f}", style="dim"))  # fmt: skip
    table.add_section()
    total = sum(row["time_ms"] for row in result.profile)
    table.add_row("total", "", "", f"{total:.4f}", "100.0", "", "")
    out.print(table)


def format_shapes(node: dict) -> str:
    """`1x3x224x224->1x64x112x112`: the node's first input and its output (weights and the
    other inputs are in --format json)."""
    if not node["inputs"]:
        return ""
    first, output = ("x".join(map(str, s)) or "scalar" for s in (node["inputs"][0], node["output"]))
    return f"{first}->{output}"


def _rate(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "-"
