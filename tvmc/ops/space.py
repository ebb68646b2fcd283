"""Knob spaces of schedule templates: what tuning may choose, and how a choice is numbered.

A template declares its space (`Template(build, space=fn)`, `fn(attrs, input_types, target)`); a
config is one value per knob. Configs are numbered mixed-radix over the knobs in definition
order, the first knob least significant (AutoTVM's convention), so `space.get(i).index == i` and
`space.from_entity(config.entity)` round-trips. The template reads the chosen values from
`ctx.config` (a dict knob -> value); an empty dict means its defaults, and `default_index` names
the config that builds the same kernel as those defaults (None when none does), so tuners can
measure it first and the best config found is never slower than the untuned one.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

KNOB_KINDS = ("split", "reorder", "annotate", "other")


@dataclass(frozen=True)
class Knob:
    """One tunable choice: a name, its kind, and its candidate values (JSON-shaped)."""

    name: str
    kind: str
    candidates: tuple[Any, ...]

    def __post_init__(self) -> None:
        if self.kind not in KNOB_KINDS:
            raise ValueError(f"knob {self.name}: kind {self.kind!r} is not one of {KNOB_KINDS}")
        if not self.candidates:
            raise ValueError(f"knob {self.name} has no candidates")


def factor_splits(extent: int, parts: int = 2, max_factor: int | None = None) -> list[tuple]:
    """Every way to write `extent` as an ordered product of `parts` factors (inner ones capped)."""
    if parts == 1:
        return [(extent,)]
    out = []
    for f in range(1, extent + 1):
        if extent % f == 0 and (max_factor is None or f <= max_factor):
            out += [(*rest, f) for rest in factor_splits(extent // f, parts - 1, max_factor)]
    return out


@dataclass
class ConfigSpace:
    """The knobs of one task, in definition order."""

    knobs: list[Knob] = field(default_factory=list)
    default_index: int | None = None  # the config equal to the template's defaults

    def add(self, name: str, kind: str, candidates: Iterable[Any]) -> ConfigSpace:
        """Append a knob (chainable)."""
        if any(k.name == name for k in self.knobs):
            raise ValueError(f"knob {name} defined twice")
        self.knobs.append(Knob(name, kind, tuple(_json_shaped(c) for c in candidates)))
        return self

    def split(self, name: str, extent: int, parts: int = 2, max_factor: int | None = None):
        """A tile-size knob: factorizations of `extent`."""
        return self.add(name, "split", factor_splits(extent, parts, max_factor))

    def other(self, name: str, candidates: Iterable[Any]) -> ConfigSpace:
        return self.add(name, "other", candidates)

    def annotate(self, name: str, candidates: Iterable[Any]) -> ConfigSpace:
        return self.add(name, "annotate", candidates)

    def reorder(self, name: str, orders: Iterable[Sequence[Any]]) -> ConfigSpace:
        return self.add(name, "reorder", [tuple(o) for o in orders])

    def __len__(self) -> int:
        return math.prod(len(k.candidates) for k in self.knobs)

    def get(self, index: int) -> ConfigEntity:
        """Config number `index` (mixed radix, first knob least significant)."""
        if not 0 <= index < len(self):
            raise IndexError(f"config index {index} outside a space of {len(self)}")
        choices, rest = [], index
        for knob in self.knobs:
            rest, i = divmod(rest, len(knob.candidates))
            choices.append(i)
        return ConfigEntity(self, index, tuple(choices))

    def from_entity(self, entity: Sequence[Sequence[Any]]) -> ConfigEntity:
        """The config an `entity` list ([name, kind, value] per knob) describes."""
        values = {name: _json_shaped(value) for name, _kind, value in entity}
        index, radix, choices = 0, 1, []
        for knob in self.knobs:
            if knob.name not in values:
                raise ValueError(f"entity lacks knob {knob.name}")
            try:
                i = knob.candidates.index(values[knob.name])
            except ValueError:
                raise ValueError(
                    f"{values[knob.name]!r} is not a candidate of {knob.name}"
                ) from None
            choices.append(i)
            index += i * radix
            radix *= len(knob.candidates)
        return ConfigEntity(self, index, tuple(choices))

    def index_of(self, values: dict[str, Any]) -> int | None:
        """The index of the config with these knob values (None if some value is no candidate)."""
        index, radix = 0, 1
        for knob in self.knobs:
            value = _json_shaped(values.get(knob.name))
            if value not in knob.candidates:
                return None
            index += knob.candidates.index(value) * radix
            radix *= len(knob.candidates)
        return index

    def code_hash(self) -> str:
        """Identifies the space (knobs and candidates): records of another version don't apply."""
        text = json.dumps([[k.name, k.kind, list(k.candidates)] for k in self.knobs])
        return hashlib.sha1(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ConfigEntity:
    """One point of a space: the index of the chosen candidate for each knob."""

    space: ConfigSpace
    index: int
    choices: tuple[int, ...]

    @property
    def values(self) -> dict[str, Any]:
        """knob -> chosen value: what a template finds in `ctx.config`."""
        return {k.name: k.candidates[i] for k, i in zip(self.space.knobs, self.choices)}

    @property
    def entity(self) -> list[list[Any]]:
        """[[name, kind, value], ...] as in AutoTVM records."""
        return [[k.name, k.kind, _as_list(k.candidates[i])]
                for k, i in zip(self.space.knobs, self.choices)]  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "code_hash": self.space.code_hash(), "entity": self.entity}


def _json_shaped(value: Any) -> Any:
    """Lists become tuples so candidates compare and hash the same after a JSON round trip."""
    if isinstance(value, list | tuple):
        return tuple(_json_shaped(v) for v in value)
    return value


def _as_list(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_as_list(v) for v in value]
    return value
