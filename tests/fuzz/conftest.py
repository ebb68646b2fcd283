"""Fixtures of the fuzz tests: one executor (fork server) and one set of seed files per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fuzz.harness import Executor
from tests.fuzz.seeds import Resources, prepare


@pytest.fixture(scope="session")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Executor]:
    """Runs cases through the fork server (FUZZ_EXEC=spawn: as `python -m tvmc` processes)."""
    with Executor(tmp_path_factory.mktemp("fuzz-cases")) as runner:
        yield runner


@pytest.fixture(scope="session")
def resources(executor: Executor, tmp_path_factory: pytest.TempPathFactory) -> Resources:
    """The seed model compiled, briefly tuned, and an inputs file for it."""
    resources = prepare(tmp_path_factory.mktemp("fuzz-seeds"), executor, trials=2)
    executor.watch = (resources.directory,)  # no case may change the seed files
    return resources
