"""Running the CLI the two ways the CLI tests check it: through Click in this process, and as
`python -m tvmc` in a subprocess (real stdout/stderr separation, exit codes, no colour)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from tvmc.cli.main import cli

SUBPROCESS_ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}


def run_in_process(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `tvmc ARGS` run by Click's test runner in `cwd`."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli, args, prog_name="tvmc")
    finally:
        os.chdir(old)
    return result.exit_code, result.stdout, result.stderr


def run_subprocess(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m tvmc ARGS` in `cwd`."""
    done = subprocess.run([sys.executable, "-m", "tvmc", *args], cwd=cwd, env=SUBPROCESS_ENV,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    return done.returncode, done.stdout, done.stderr
