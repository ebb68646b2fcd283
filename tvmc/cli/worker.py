"""`tvmc worker`: a Dask worker configured for distributed tuning, a device or a builder."""

from __future__ import annotations

import logging

import click

from tvmc.cli.common import err
from tvmc.cli.types import FiniteFloatRange
from tvmc.driver.tuning import serve_worker
from tvmc.errors import UsageError


@click.command("worker")
@click.option(
    "--scheduler",
    required=True,
    metavar="ADDRESS",
    help="The Dask scheduler to join, e.g. tcp://host:8786 (start one with `dask scheduler`).",
)
@click.option(
    "--device-key",
    metavar="KEY",
    help="Be a device: measure one config at a time here, advertising KEY (e.g. h200, rpi4).",
)
@click.option(
    "--build",
    "builder",
    is_flag=True,
    help="Be a builder: compile configs, --nthreads at once (advertises the 'build' resource).",
)
@click.option(
    "--nthreads",
    type=click.IntRange(min=1),
    metavar="N",
    help="With --build: builds at once (default: 1).",
)
@click.option(
    "--name",
    metavar="NAME",
    help="Worker name shown by `tvmc tune` and `tvmc run` (default: address).",
)
@click.option(
    "--connect-timeout",
    type=FiniteFloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds to reach the scheduler before giving up.",
)
@click.pass_context
def worker_command(
    ctx: click.Context,
    scheduler: str,
    device_key: str | None,
    builder: bool,
    nthreads: int | None,
    name: str | None,
    connect_timeout: float,
) -> None:
    """Serve a Dask scheduler for `tvmc tune --scheduler` and `tvmc run --scheduler` until
    Ctrl-C: one per device, builders anywhere with the devices' CPU (needs tvmc[dist]; see
    docs/distributed.md)."""
    if builder == (device_key is not None):
        raise UsageError("tvmc worker needs exactly one of --device-key KEY or --build")
    if nthreads is not None and not builder:
        raise UsageError("--nthreads is for build workers (--build); a device runs one at a time")
    verbose = bool(ctx.obj and ctx.obj.get("verbose"))

    def ready(address: str, resources: dict[str, float]) -> None:
        offered = ", ".join(f"{k}={v:g}" for k, v in resources.items())
        err.print(f"tvmc worker {address} serving {scheduler} with {offered}", markup=False)

    try:
        serve_worker(
            scheduler,
            device_key=device_key,
            build_slots=(nthreads or 1) if builder else None,
            name=name,
            connect_timeout=connect_timeout,
            on_ready=ready,
            log_level=logging.INFO if verbose else logging.WARNING,
        )
    except KeyboardInterrupt:
        err.print("tvmc worker stopped", markup=False)
