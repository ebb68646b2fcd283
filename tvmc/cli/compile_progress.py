"""`tvmc compile`'s progress on a terminal: a Rich spinner line through the stages, with a bar
while kernels' code is generated; nothing when stderr is not a terminal (pipes, CI logs)."""

from __future__ import annotations

import os

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from tvmc.driver import CompileProgress

STAGES = {
    "import": "importing the model",
    "optimize": "optimizing the graph",
    "records": "applying tuning records",
    "lower": "lowering to kernels",
    "codegen": "generating code",
    "link": "linking",
}


class RichCompileProgress(CompileProgress):
    """The stage as a spinner line on `console` (stderr), kernels done as a bar; gone when the
    compile ends, so only the summary stays."""

    def __init__(self, console: Console, model: str):
        self.model = os.path.basename(model)
        self.display = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=24),
            MofNCompleteColumn(), TextColumn("kernels"), TimeElapsedColumn(),
            console=console, transient=True,
        )  # fmt: skip
        self.task = self.display.add_task(f"compiling {self.model}", total=None)

    def stage(self, name: str) -> None:
        text = STAGES.get(name, name)
        self.display.update(self.task, description=f"compiling {self.model}: {text}")

    def kernels(self, done: int, total: int) -> None:
        self.display.update(self.task, completed=done, total=total)

    def __enter__(self) -> RichCompileProgress:
        self.display.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.display.stop()


def compile_progress(console: Console, model: str) -> RichCompileProgress | None:
    """A progress display when `console` is an interactive terminal, else None."""
    if console.is_terminal and not console.is_dumb_terminal:
        return RichCompileProgress(console, model)
    return None
