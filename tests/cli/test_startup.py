"""A quick start: `tvmc --help` imports no command, `tvmc run` none of the compiler or tuner,
nor LLVM (llvmlite), nor ml_dtypes unless the package holds a narrow type.

Asserted on the set of modules a real process imports (times vary with the machine's load).
"""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.cli.runners import SUBPROCESS_ENV
from tests.driver.test_compile_run import inputs_for, write_tiny_model
from tests.runtime.test_narrow_dtypes import narrow_model
from tvmc.cli.main import LAZY_COMMANDS, cli

# Runs `tvmc ARGS` as `python -m tvmc` does, then writes every imported module's name to a file.
PROBE = """
import json, runpy, sys
out, sys.argv = sys.argv[1], ["tvmc", *sys.argv[2:]]
try:
    runpy.run_module("tvmc", run_name="__main__")
except SystemExit as exc:
    code = exc.code
with open(out, "w") as f:
    json.dump({"exit": code, "modules": sorted(sys.modules)}, f)
"""
COMPILER = ("onnx", "xgboost", "dask", "distributed", "tvmc.frontend.onnx_loader", "tvmc.ops",
            "tvmc.passes", "tvmc.lower", "tvmc.autotune.task", "tvmc.autotune.tuner",
            "tvmc.driver.pipeline", "tvmc.driver.package", "tvmc.driver.tuning")  # fmt: skip
# Running a mod.so needs ctypes, numpy, click and rich; not LLVM (libLLVM is tens of ms) nor
# ml_dtypes (about a second) nor the code generators or the kernel IR (the plan is tvmc.plan),
# nor urllib (xml.sax's escape loads it).
NOT_FOR_RUN = ("llvmlite", "ml_dtypes", "tvmc.codegen.llvm_cpu", "tvmc.codegen.nvptx",
               "tvmc.codegen.cuda_program", "tvmc.codegen.program", "tvmc.kernel",
               "urllib.request")  # fmt: skip


def imported(tmp_path: Path, *args: str) -> tuple[int, set[str]]:
    """(exit code, modules imported) of `tvmc ARGS` in a fresh process."""
    out = tmp_path / "modules.json"
    command = [sys.executable, "-c", PROBE, str(out), *args]
    done = subprocess.run(command, cwd=tmp_path, env=SUBPROCESS_ENV, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert out.exists(), done.stderr
    result = json.loads(out.read_text())
    return result["exit"], set(result["modules"])


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The `names` (packages include their submodules) found among `modules`."""
    return sorted(m for m in modules for n in names if m == n or m.startswith(n + "."))


def test_help_imports_no_command(tmp_path: Path):
    code, modules = imported(tmp_path, "--help")
    assert code == 0
    tvmc_modules = {m for m in modules if m == "tvmc" or m.startswith("tvmc.")}
    assert tvmc_modules <= {"tvmc", "tvmc.cli", "tvmc.cli.groups", "tvmc.cli.main", "tvmc.config",
                            "tvmc.errors", "tvmc.lazy", "tvmc.version"}  # fmt: skip
    assert loaded(modules, ("numpy", "rich", "llvmlite", "onnx", "ml_dtypes")) == []


def compile_in_subprocess(model: Path, package: str) -> None:
    """`tvmc compile MODEL -o PACKAGE` in a fresh process (it also caches this CPU's features)."""
    compiled = subprocess.run([sys.executable, "-m", "tvmc", "compile", str(model), "-o",
                               package], cwd=model.parent, env=SUBPROCESS_ENV,
                              capture_output=True, timeout=120)  # fmt: skip
    assert compiled.returncode == 0, compiled.stderr


@pytest.mark.parametrize("options", [
    ["--print-time"],
    ["--inputs", "in.npz", "--outputs", "out.npz", "--profile", "--print-top", "2"],
])  # fmt: skip
def test_run_imports_no_compiler_tuner_or_llvm(tmp_path: Path, options: list[str]):
    compile_in_subprocess(write_tiny_model(tmp_path), "tiny.tar")
    np.savez(tmp_path / "in.npz", **inputs_for(np.random.default_rng(0)))
    code, modules = imported(tmp_path, "run", "tiny.tar", *options)
    assert code in (0, None)
    assert loaded(modules, COMPILER) == []
    assert loaded(modules, NOT_FOR_RUN) == []
    assert "tvmc.runtime.package" in modules  # it did run the package
    if "--outputs" in options:
        assert set(np.load(tmp_path / "out.npz")) >= {"output_0", "output_1"}


def test_a_narrow_package_runs_and_imports_ml_dtypes_for_it(tmp_path: Path):
    onnx.save(narrow_model(), tmp_path / "narrow.onnx")
    compile_in_subprocess(tmp_path / "narrow.onnx", "narrow.tar")
    code, modules = imported(tmp_path, "run", "narrow.tar", "--print-time", "--outputs",
                             "out.npz")  # fmt: skip
    assert code in (0, None)
    assert "ml_dtypes" in modules  # its params are bfloat16 and int4: numpy needs ml_dtypes
    assert loaded(modules, ("llvmlite",)) == []
    with np.load(tmp_path / "out.npz") as saved:
        assert saved["y"].dtype.itemsize == 2 and saved["qk"].dtype.itemsize == 1


def test_lazy_help_is_each_commands_own():
    for name, (module, attribute, summary) in LAZY_COMMANDS.items():
        command = getattr(importlib.import_module(module), attribute)
        assert command.name == name
        first_paragraph = inspect.cleandoc(command.help or "").split("\n\n")[0]
        assert " ".join(first_paragraph.split()) == summary, name


@pytest.mark.parametrize("package", ["tvmc", "tvmc.driver", "tvmc.frontend", "tvmc.autotune"])
def test_every_lazy_name_resolves(package: str):
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{package}.{name}"
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        module.nonexistent  # noqa: B018


def test_subcommands_are_all_listed():
    assert sorted(cli.all_commands()) == sorted(LAZY_COMMANDS)
