"""Pieces shared by the subcommands: option types, consoles, JSON output."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console

from tvmc.driver import MODEL_FORMATS, parse_input_dtypes, parse_input_shapes
from tvmc.errors import TVMCError, did_you_mean

# Results go to stdout; logs, progress and errors to stderr, so `--format json | jq` works.
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class SuggestChoice(click.Choice):
    """click.Choice whose error names the nearest valid choice: "Did you mean 'random'?"."""

    def get_invalid_choice_message(self, value: Any, ctx: click.Context | None) -> str:
        return super().get_invalid_choice_message(value, ctx) + did_you_mean(
            str(value), [str(c) for c in self.choices]
        )


class ShapesType(click.ParamType):
    """--input-shapes in TVMC's grammar."""

    name = "shapes"

    def convert(self, value: Any, param: Any, ctx: Any) -> dict[str, tuple[int, ...]]:
        if isinstance(value, dict):
            return value
        try:
            return parse_input_shapes(str(value))
        except TVMCError as exc:
            self.fail(str(exc), param, ctx)


class DtypesType(click.ParamType):
    """--input-dtypes: name:dtype items."""

    name = "dtypes"

    def convert(self, value: Any, param: Any, ctx: Any) -> dict[str, str]:
        if isinstance(value, dict):
            return value
        try:
            return parse_input_dtypes(str(value))
        except TVMCError as exc:
            self.fail(str(exc), param, ctx)


def model_options(fn):
    """--input-shapes, --input-dtypes and --model-format, for commands that read a model."""
    fn = click.option(
        "--model-format",
        type=SuggestChoice(MODEL_FORMATS),
        help="Model format; guessed from the extension (.onnx, .tvmc) when omitted.",
    )(fn)
    fn = click.option(
        "--input-dtypes",
        type=DtypesType(),
        help="Input dtypes, e.g. 'input_ids:int64 mask:int32' (default: as in the model).",
    )(fn)
    fn = click.option(
        "--input-shapes",
        type=ShapesType(),
        help="Static input shapes, e.g. 'data:[1,3,224,224] mask:[1,128]' (default: the model's).",
    )(fn)
    return fn


def format_option(fn):
    """--format text|json (and --json as a shorthand)."""
    fn = click.option("--json", "json_flag", is_flag=True, help="Shorthand for --format json.")(fn)
    fn = click.option(
        "--format",
        "output_format",
        type=SuggestChoice(["text", "json"]),
        default="text",
        show_default=True,
        help="Output format: human text, or one JSON document on stdout for pipelines.",
    )(fn)
    return fn


def wants_json(output_format: str, json_flag: bool) -> bool:
    return json_flag or output_format == "json"


def print_json(document: Any) -> None:
    """One JSON document on stdout, nothing else."""
    sys.stdout.write(json.dumps(document, indent=2) + "\n")
    sys.stdout.flush()
