"""The CLI's parameter types and shared options: what a value on the command line may be.

The commands and the completion generator both import this module (and not each other): types
carry what shells complete (choices, file extensions) and docs/cli.md lists.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import click

from tvmc.driver import MODEL_FORMATS, parse_input_dtypes, parse_input_shapes
from tvmc.errors import TVMCError, did_you_mean


class SuggestChoice(click.Choice):
    """click.Choice whose error names the nearest valid choice: "Did you mean 'random'?"."""

    def get_invalid_choice_message(self, value: Any, ctx: click.Context | None) -> str:
        return super().get_invalid_choice_message(value, ctx) + did_you_mean(
            str(value), [str(c) for c in self.choices]
        )


class ChoiceList(click.Choice):
    """Comma-separated choices (`ll,asm`); shells complete and docs list each choice."""

    name = "choices"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[str, ...]:
        if isinstance(value, tuple):
            return value
        items = tuple(v.strip() for v in str(value).split(",") if v.strip())
        for item in items:
            if item not in self.choices:
                valid = ", ".join(repr(c) for c in self.choices)
                self.fail(f"{item!r} is not one of {valid}.{did_you_mean(item, self.choices)}",
                          param, ctx)  # fmt: skip
        return items


class TargetType(click.Choice):
    """A target string (`llvm -mcpu=znver4`); shells complete the target kinds."""

    name = "target"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        return " ".join(str(value).split())  # the driver names what is wrong with it


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange that also refuses nan and inf: NaN compares false with every bound, so
    the range alone lets it through (a NaN timeout never expires, a NaN interval never ends)."""

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


class FileWithExt(click.Path):
    """A `click.Path` whose completions (and docs) offer only files with the given extensions."""

    def __init__(self, extensions: Sequence[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        normalized = ["." + ext.lstrip(".").lower() for ext in extensions]
        self.extensions: tuple[str, ...] = tuple(dict.fromkeys(normalized))

    def to_info_dict(self) -> dict[str, Any]:
        """Click's info dict plus the extensions."""
        return {**super().to_info_dict(), "extensions": self.extensions}


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
