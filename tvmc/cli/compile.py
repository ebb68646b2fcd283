"""`tvmc compile`: a model file in, a package (.tar) out, with a short summary."""

from __future__ import annotations

import contextlib
import os

import click
from rich.table import Table

from tvmc.cli.common import err, out, print_json, wants_json
from tvmc.cli.compile_progress import compile_progress
from tvmc.cli.types import ChoiceList, FileWithExt, TargetType, format_option, model_options
from tvmc.driver import DEFAULT_PACKAGE, DUMP_FORMATS, TARGET_KINDS, compile_model
from tvmc.driver.package import suggested_cross_compiler


def size(nbytes: int | None) -> str:
    """Bytes for people: 512 B, 3.1 kB, 25.0 MB."""
    if nbytes is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


def pass_table(passes: list[dict]) -> Table:
    """Pass, stage, milliseconds and share of the total, in pipeline order (JSON has them too)."""
    total = sum(p["seconds"] for p in passes) or 1.0
    table = Table(title="pass times", title_justify="left")
    for name, justify in (("pass", "left"), ("stage", "left"), ("time (ms)", "right"),
                          ("share", "right")):  # fmt: skip
        table.add_column(name, justify=justify)
    for p in passes:
        table.add_row(p["pass"], p["stage"], f"{p['seconds'] * 1e3:.1f}",
                      f"{p['seconds'] / total:.1%}")  # fmt: skip
    table.add_row("total", "", f"{total * 1e3:.1f}", "100.0%", style="bold")
    return table


@click.command("compile")
@click.argument("model_file", type=FileWithExt((".onnx", ".tvmc"), dir_okay=True))
@click.option(
    "-o",
    "--output",
    type=FileWithExt((".tar",), dir_okay=False),
    default=DEFAULT_PACKAGE,
    show_default=True,
    help="The package to write (a .tar).",
)
@click.option(
    "--target",
    type=TargetType(TARGET_KINDS),
    default="llvm",
    show_default=True,
    metavar="TARGET",
    help="Target string: 'llvm' (this CPU), 'llvm -mcpu=skylake-avx512', "
    "'llvm -mtriple=aarch64-linux-gnu -mattr=+neon', 'cuda' (this GPU, else sm_90), "
    "'cuda -arch=sm_90'.",
)
@click.option("--target-llvm-mcpu", metavar="CPU", help="LLVM CPU name (default: this CPU).")
@click.option("--target-llvm-mattr", metavar="ATTRS", help="LLVM features, e.g. '+avx2,-avx512f'.")
@click.option("--target-llvm-mtriple", metavar="TRIPLE", help="LLVM target triple (cross-compile).")
@click.option(
    "--cross-compiler",
    metavar="CC",
    help="C compiler that links mod.so for a cross target, e.g. aarch64-linux-gnu-gcc "
    "(without it such a package holds mod.o only).",
)
@click.option(
    "--cross-compiler-options",
    metavar="OPTIONS",
    help="Options for --cross-compiler, one quoted string, e.g. '--sysroot=/opt/arm64'.",
)
@click.option(
    "--num-threads",
    type=click.IntRange(min=1),
    metavar="N",
    help="Threads the package's runs will use (the machine that runs it): the kernels' default "
    "schedules and whether a batch's images run side by side are chosen for them (default: "
    "$TVMC_NUM_THREADS, else this machine's physical cores).",
)
@model_options
@click.option(
    "--tuning-records",
    type=FileWithExt((".json", ".log"), dir_okay=False),
    help="Records from `tvmc tune`: the best config per workload is applied; tasks without "
    "one keep the default schedule.",
)
@click.option(
    "-O",
    "--opt-level",
    type=click.IntRange(0, 3),
    default=3,
    show_default=True,
    help="Optimization level: 0 no fusion, 3 everything.",
)
@click.option(
    "--disabled-pass",
    "disabled_passes",
    multiple=True,
    metavar="NAME",
    help="A pass to skip (repeatable, or comma-separated), e.g. fuse, fold-batch-norm.",
)
@click.option(
    "--dump-code",
    "dump_code",
    type=ChoiceList(DUMP_FORMATS),
    multiple=True,
    help="Also write code as text to OUTPUT.FMT (repeatable, or comma-separated): kernel "
    "(kernel IR), ll (LLVM IR), asm (assembly), ptx (cuda targets), graph (the optimized graph).",
)
@click.option(
    "--print-pass-times",
    is_flag=True,
    help="Also print the time of every pass (import through code generation and link).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace the output even if it is not a tvmc package (by default only a package is "
    "replaced, never the model or another file).",
)
@format_option
def compile_command(
    model_file: str,
    output: str,
    target: str,
    target_llvm_mcpu: str | None,
    target_llvm_mattr: str | None,
    target_llvm_mtriple: str | None,
    cross_compiler: str | None,
    cross_compiler_options: str | None,
    num_threads: int | None,
    input_shapes: dict[str, tuple[int, ...]] | None,
    input_dtypes: dict[str, str] | None,
    model_format: str | None,
    tuning_records: str | None,
    opt_level: int,
    disabled_passes: tuple[str, ...],
    dump_code: tuple[tuple[str, ...], ...],
    print_pass_times: bool,
    force: bool,
    output_format: str,
    json_flag: bool,
) -> None:
    """Compile MODEL_FILE (ONNX or .tvmc) for a target into a package (.tar) that `run` runs."""
    progress = compile_progress(err, model_file)
    with progress or contextlib.nullcontext():
        package = compile_model(
            model_file,
            target=target,
            package_path=output,
            opt_level=opt_level,
            disabled_passes=disabled_passes,
            dump_code=[fmt for group in dump_code for fmt in group],
            target_llvm_mcpu=target_llvm_mcpu,
            target_llvm_mattr=target_llvm_mattr,
            target_llvm_mtriple=target_llvm_mtriple,
            shape_dict=input_shapes,
            dtype_dict=input_dtypes,
            model_format=model_format,
            tuning_records=tuning_records,
            force=force,
            progress=progress,
            cross_compiler=cross_compiler,
            cross_compiler_options=cross_compiler_options,
            num_threads=num_threads,
        )
    summary = package.summary()
    if wants_json(output_format, json_flag):
        print_json({"model": model_file, **summary})
        return
    seconds = summary["compile_seconds"]
    stages = ", ".join(f"{stage} {t:.2f}" for stage, t in seconds.items())
    code = "mod.so + mod.o" if summary["shared_library"] else "mod.o (no linker: loads via LLVM)"
    if summary["cross"] and not summary["shared_library"]:
        triple = summary["triple"]
        cc = suggested_cross_compiler(triple) or f"{triple}-gcc"
        code = (f"mod.o only: add --cross-compiler {cc} for mod.so; on the target machine, "
                "tvmc run loads mod.o via LLVM")  # fmt: skip
    resolved = f"{summary['triple']}, cpu {summary['cpu']}"
    if summary["heap_scratch_threads"]:  # what the plan was chosen for (--num-threads)
        resolved += f", planned for {summary['heap_scratch_threads']} threads"
    if summary["device"] == "cuda":
        code = "mod.ptx (the driver compiles it for the GPU when loading)"
        resolved = f"PTX for {summary['cpu']}, runs with --device cuda"
    total = sum(seconds.values())
    images = summary["images"]
    per_image = f" an image, {images} images side by side" if images > 1 else ""
    package_bytes = os.path.getsize(summary["package"])
    heap, threads = summary["heap_scratch_bytes"], summary["heap_scratch_threads"]
    # kernels' scratch too large for a worker's stack, taken from the heap while they run
    heap = f", heap scratch {size(heap)} on {threads} threads" if heap else ""
    workspace = f"{size(summary['workspace_bytes'])} ("
    if summary["image_workspace_bytes"]:  # one an image running at once, on the running machine
        workspace += f"{size(summary['image_workspace_bytes'])} an image at once; "
    lines = [
        f"compiled {model_file} -> {summary['package']} ({size(package_bytes)}): "
        f"{summary['kernels']} kernels for {summary['target']} in {total:.1f} s",
        f"  target  {summary['target']} ({resolved})",
        f"  code    {summary['kernels']} kernels, {summary['calls']} calls for "
        f"{summary['nodes']} nodes{per_image}; {code}",
        f"  memory  workspace {workspace}without reuse {size(summary['naive_bytes'])}){heap}, "
        f"params {size(summary['param_bytes'])}",
        f"  time    {total:.2f} s ({stages})",
    ]
    tuning = summary["tuning"]
    if tuning:
        tuned = f"{tuning['tuned']} of {tuning['tasks']} tasks tuned from {tuning['records']}"
        lines.insert(3, f"  tuning  {tuned}, {tuning['untuned']} on default schedules")
    out.print("\n".join(lines), markup=False)
    if print_pass_times:
        out.print(pass_table(summary["pass_seconds"]))
    for fmt, path in summary["dumps"].items():
        err.print(f"wrote {fmt} dump {path}", markup=False)
