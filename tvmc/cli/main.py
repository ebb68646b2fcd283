"""The `tvmc` command: a Click group; subcommands only parse, call the driver and print.

Subcommands are imported when invoked (Click's lazy group pattern): `tvmc --help` imports no
command module, and `tvmc run` only the modules running a package needs.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
import traceback
from typing import Any

import click
from click.core import ParameterSource

from tvmc.cli.groups import CommandGroup
from tvmc.config import check_pool_environment
from tvmc.errors import INTERNAL_ERROR_EXIT_CODE, TVMCError, UsageError, did_you_mean
from tvmc.version import __version__

logger = logging.getLogger("tvmc")
CONFIG_KEY = "tvmc.config"  # ctx.meta: the --config file, named in errors about its values

# name -> (module, attribute, the first paragraph of its help). `tvmc --help` lists the help
# from here without importing the command; a test checks it against each command's docstring.
LAZY_COMMANDS = {
    "compile": ("tvmc.cli.compile", "compile_command",
                "Compile MODEL_FILE (ONNX or .tvmc) for a target into a package (.tar) that "
                "`run` runs."),
    "completion": ("tvmc.cli.completion.command", "completion_command",
                   "Print the completion script for bash, zsh or fish (to source or install)."),
    "load": ("tvmc.cli.load", "load_command",
             "Load MODEL_FILE (ONNX or .tvmc), fold its constants and show its inputs, outputs "
             "and ops."),
    "records": ("tvmc.cli.records", "records_group",
                "Inspect and reduce tuning records files (AutoTVM v0.2 lines, as `tvmc tune` "
                "writes)."),
    "run": ("tvmc.cli.run", "run_command",
            "Run PACKAGE_FILE (made by `tvmc compile`) once, and time or profile it when asked."),
    "tune": ("tvmc.cli.tune", "tune_command",
             "Tune the kernels of MODEL_FILE (ONNX or .tvmc), appending records for `tvmc "
             "compile`."),
    "worker": ("tvmc.cli.worker", "worker_command",
               "Serve a Dask scheduler for `tvmc tune --scheduler` and `tvmc run --scheduler` "
               "until Ctrl-C: one per device, builders anywhere with the devices' CPU (needs "
               "tvmc[dist]; see docs/distributed.md)."),
}  # fmt: skip


def setup_logging(verbosity: int) -> None:
    """-v: info, -vv: debug; warnings always. Logs go to stderr."""
    from rich.logging import RichHandler  # only once a command runs: not for --help

    from tvmc.cli.common import err

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

    loaded = group.all_commands() if isinstance(group, TVMCGroup) else group.commands
    commands = {name: option_names(cmd) for name, cmd in loaded.items()}
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


def _more_verbose(ctx: click.Context, param: click.Parameter, value: int) -> None:
    """`-v` after the subcommand (`tvmc compile -v ...`) adds to the one before it."""
    root = ctx.find_root()
    if value and root.obj is not None:
        root.obj["verbose"] = root.obj.get("verbose", 0) + value
        setup_logging(root.obj["verbose"])


def _with_verbose(command: click.Command) -> click.Command:
    """`command` (and its subcommands) taking -v/--verbose as the group does."""
    if not any(p.name == "verbose" for p in command.params):
        command.params.append(click.Option(
            ["-v", "--verbose"], count=True, expose_value=False, callback=_more_verbose,
            help="More logging (-v info, -vv debug); tracebacks. Same as before the command.",
        ))  # fmt: skip
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _with_verbose(sub)
    return command


class TVMCGroup(CommandGroup):
    """Loads subcommands on first use; turns user errors into `Error: <message>` and an exit
    code; with -v the traceback comes first (the message and the exit code stay)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY_COMMANDS})

    def load_command(self, name: str) -> click.Command | None:
        """The subcommand `name`, imported on first use (None when there is none)."""
        if name not in self.commands and name in LAZY_COMMANDS:
            module, attribute, _ = LAZY_COMMANDS[name]
            self.add_command(_with_verbose(getattr(importlib.import_module(module), attribute)))
        return self.commands.get(name)

    def all_commands(self) -> dict[str, click.Command]:
        """Every subcommand by name, all imported."""
        names = sorted({*self.commands, *LAZY_COMMANDS})
        loaded = {name: self.load_command(name) for name in names}
        return {name: command for name, command in loaded.items() if command is not None}

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their short help, from LAZY_COMMANDS for those not imported."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names), default=0)
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is not None:
                rows.append((name, command.get_short_help_str(limit)))
            else:
                rows.append((name, click.utils.make_default_short_help(LAZY_COMMANDS[name][2],
                                                                       limit)))  # fmt: skip
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TVMCError as exc:
            if _verbose(ctx):
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
            verbose = _verbose(ctx)
            if verbose:
                click.echo(traceback.format_exc(), err=True, nl=False)
            click.echo(
                f"Internal error: {type(exc).__name__}: {exc}\nThis is a bug in tvmc; "
                + ("report it with the traceback above." if verbose else
                   "run again with -v for the traceback and report it."),
                err=True,
            )  # fmt: skip
            ctx.exit(INTERNAL_ERROR_EXIT_CODE)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = self.load_command(cmd_name)
        if command is None:
            hint = did_you_mean(cmd_name, self.list_commands(ctx))
            if hint:
                ctx.fail(f"No such command '{cmd_name}'.{hint}")
        return command


def _verbose(ctx: click.Context) -> int:
    return int(ctx.obj.get("verbose", 0)) if ctx.obj else 0


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
    check_pool_environment()  # before any command's work: tune's runners load the pool


def main() -> None:
    """Console-script entry point."""
    sys.exit(cli.main(prog_name="tvmc", standalone_mode=True) or 0)


if __name__ == "__main__":
    main()
