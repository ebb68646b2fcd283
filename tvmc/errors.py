"""One error hierarchy for everything a user can cause; each class carries its exit code."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class TVMCError(Exception):
    """Base of user-facing errors: the CLI prints `Error: <message>` and exits with `exit_code`."""

    exit_code = 4  # TVMC's own exit code for user errors


class UsageError(TVMCError):
    """Bad option value, malformed --input-shapes, unknown config key, ..."""

    exit_code = 2


class ModelError(TVMCError):
    """A model file that is missing, unreadable, truncated or inconsistent."""

    exit_code = 4


class UnsupportedModelError(TVMCError):
    """A well-formed model that uses something tvmc does not support (an op, a dynamic shape)."""

    exit_code = 5


class NonConstantInputError(UnsupportedModelError):
    """A value tvmc must know at compile time (axes, pads, a shape) is computed at run time."""

    def __init__(self, message: str, tensor: str):
        super().__init__(message)
        self.tensor = tensor


class InputError(TVMCError):
    """Inputs that do not match the model: unknown name, wrong shape or dtype."""

    exit_code = 2


class PackageError(TVMCError):
    """A package or saved model that is corrupt, foreign or from an incompatible version."""

    exit_code = 4


class RemoteError(TVMCError):
    """A remote run that did not finish: its worker died, or the package crashed or hung there."""

    exit_code = 4


class ScratchMemoryError(TVMCError):
    """A run whose kernels found no memory for their heap scratch: its outputs are not valid."""

    exit_code = 4


INTERNAL_ERROR_EXIT_CODE = 70  # sysexits EX_SOFTWARE: a bug in tvmc, not in the user's input


# Words people use for a choice that is spelt otherwise: spelling alone would turn `gpu` into
# `cpu` and `cpu` (as a target) into `cuda`. Used when the synonym's meaning is a valid choice.
SYNONYMS = {
    **dict.fromkeys(["gpu", "nvidia", "nvptx", "ptx"], "cuda"),
    **dict.fromkeys(["cpu", "x86", "x86_64", "host", "arm", "aarch64"], "llvm"),
}


def suggest(value: str, valid: Iterable[str]) -> str | None:
    """The valid choice `value` means (SYNONYMS) or is closest to (difflib, ignoring case)."""
    by_lower = {str(v).lower(): str(v) for v in valid}
    meant = SYNONYMS.get(str(value).lower())
    if meant in by_lower:
        return by_lower[meant]
    close = difflib.get_close_matches(str(value).lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[close[0]] if close else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A ' Did you mean X?' suffix naming the closest valid choice, or ''."""
    close = suggest(word, choices)
    return f" Did you mean '{close}'?" if close else ""


def unknown_choice(what: str, value: str, valid: Iterable[str]) -> str:
    """`unknown <what> 'v'; valid: a, b, c. Did you mean 'a'?`: one message for every choice."""
    valid = list(valid)
    return f"unknown {what} {value!r}; valid: {', '.join(valid)}.{did_you_mean(value, valid)}"
