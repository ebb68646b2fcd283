"""The `tvmc` command: a Click group; subcommands only parse, call the driver and print."""

from __future__ import annotations

import json
import logging
import sys
import traceback
from typing import Any

import click
from click.core import ParameterSource
from rich.logging import RichHandler

from tvmc.cli.common import err
from tvmc.cli.compile import compile_command
from tvmc.cli.load import load_command
from tvmc.cli.records import records_group
from tvmc.cli.run import run_command
from tvmc.cli.tune import tune_command
from tvmc.cli.types import CommandGroup
from tvmc.cli.worker import worker_command
from tvmc.errors import INTERNAL_ERROR_EXIT_CODE, TVMCError, UsageError, did_you_mean
from tvmc.version import __version__

logger = logging.getLogger("tvmc")
CONFIG_KEY = "tvmc.config"  # ctx.meta: the --config file, named in errors about its values


def setup_logging(verbosity: int) -> None:
    """-v: info, -vv: debug; warnings always. Logs go to stderr."""
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = RichHandler(console=err, show_time=False, show_path=verbosity > 1, markup=False)
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False


def config_default_map(group: click.Group, path: str) -> dict[str, dict[str, Any]]:
    """Click default_map from a JSON config: {"compile": {"opt": v}} or flat {"opt": v}."""
    try:
        with open(path) as f:
            config = json.load(f)
    except OSError as exc:
        raise UsageError(f"cannot read config file {path!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(f"config file {path!r} is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise UsageError(f"config file {path!r} must hold a JSON object of option names")

    def option_names(command: click.Command) -> dict[str, str]:
        names = {}
        for param in command.params:
            if isinstance(param, click.Option) and param.name:
                names[param.name] = param.name
                names.update({o.lstrip("-"): param.name for o in param.opts if o.startswith("--")})
        return names

    commands = {name: option_names(cmd) for name, cmd in group.commands.items()}
    valid_flat = sorted({k for names in commands.values() for k in names if "_" not in k})
    default_map: dict[str, dict[str, Any]] = {name: {} for name in commands}
    for key, value in config.items():
        if key in commands and isinstance(value, dict):
            for sub_key, sub_value in value.items():
                if sub_key not in commands[key]:
                    valid = sorted(k for k in commands[key] if "_" not in k)
                    raise UsageError(
                        f"config file {path!r}: '{key}' has no option {sub_key!r}; valid: "
                        f"{', '.join(valid)}.{did_you_mean(sub_key, valid)}"
                    )
                default_map[key][commands[key][sub_key]] = sub_value
            continue
        hits = [name for name, names in commands.items() if key in names]
        if not hits:
            raise UsageError(
                f"config file {path!r}: unknown key {key!r}; valid keys are subcommand names "
                f"({', '.join(commands)}) or options: {', '.join(valid_flat)}."
                + did_you_mean(key, valid_flat)
            )
        for name in hits:
            default_map[name].setdefault(commands[name][key], value)
    return default_map


class TVMCGroup(CommandGroup):
    """Turns user errors into `Error: <message>` and an exit code; with -v the traceback comes
    first (the message and the exit code stay)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TVMCError as exc:
            if ctx.obj and ctx.obj.get("verbose"):
                click.echo(traceback.format_exc(), err=True, nl=False)
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except click.BadParameter as exc:
            config = ctx.meta.get(CONFIG_KEY)
            sub = exc.ctx
            if config and sub and exc.param and exc.param.name:
                if sub.get_parameter_source(exc.param.name) is ParameterSource.DEFAULT_MAP:
                    exc.message += f" (the value comes from --config {config})"
            raise
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            ctx.exit(130)
        except Exception as exc:
            if ctx.obj and ctx.obj.get("verbose"):
                click.echo(traceback.format_exc(), err=True, nl=False)
            click.echo(
                f"Internal error: {type(exc).__name__}: {exc}\n"
                "This is a bug in tvmc; run again with -v for the traceback and report it.",
                err=True,
            )
            ctx.exit(INTERNAL_ERROR_EXIT_CODE)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name not in self.commands:
            hint = did_you_mean(cmd_name, self.commands)
            if hint:
                ctx.fail(f"No such command '{cmd_name}'.{hint}")
        return command


def _config_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value:
        ctx.meta[CONFIG_KEY] = value
        try:
            ctx.default_map = config_default_map(cli, value)
        except UsageError as exc:
            raise click.BadParameter(str(exc)) from None


@click.group(cls=TVMCGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="tvmc")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug); tracebacks.")
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    callback=_config_callback,
    is_eager=True,
    expose_value=False,
    help="JSON file whose keys set option defaults; flags on the command line win.",
)
@click.pass_context
def cli(ctx: click.Context, verbose: int) -> None:
    """tvmc: compile ONNX models to tuned native code, and run them.

    \b
    tvmc load    model.onnx -o model.tvmc                          # optional
    tvmc tune    model.onnx --target llvm --tuning-records log.json
    tvmc compile model.onnx --target llvm --tuning-records log.json -o model.tar
    tvmc run     model.tar --device cpu --print-time
    """
    ctx.ensure_object(dict)
    ctx.obj["verbose"] = verbose
    setup_logging(verbose)


cli.add_command(load_command)
cli.add_command(tune_command)
cli.add_command(compile_command)
cli.add_command(run_command)
cli.add_command(records_group)
cli.add_command(worker_command)


def main() -> None:
    """Console-script entry point."""
    sys.exit(cli.main(prog_name="tvmc", standalone_mode=True) or 0)


if __name__ == "__main__":
    main()
