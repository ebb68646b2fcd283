"""Output shared by the subcommands: the consoles and JSON documents (types: `tvmc.cli.types`)."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

# Results go to stdout; logs, progress and errors to stderr, so `--format json | jq` works.
# No markup: names from models and records files are printed as they are ('[/b]' included).
out = Console(highlight=False, soft_wrap=True, markup=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def wants_json(output_format: str, json_flag: bool) -> bool:
    """Whether --format json or --json was given."""
    return json_flag or output_format == "json"


def print_json(document: Any) -> None:
    """One JSON document on stdout, nothing else."""
    sys.stdout.write(json.dumps(document, indent=2) + "\n")
    sys.stdout.flush()
