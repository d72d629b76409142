"""One (de)serialiser for every dataclass results.json holds, and the sections of the file.

to_json(value): a dataclass becomes a dict of its fields in declaration order (each value
turned the same way), a list or tuple a list, a dict a dict; anything else (numbers, strings,
None) is kept as it is. from_json(hint, data) reads such data back as the type hint says
(typing.get_type_hints of each dataclass: Optional, unions with None, list, tuple, dict and
nested dataclasses); a number is never converted, so a file read and written again keeps its
5 and its 5.0 apart.

A dataclass may declare, as class attributes, what its older files need and what its file
shows beside its fields:
- json_renamed: {key in older files: field} (files before 2026-11-25 name the server
  "driver");
- json_renamed_keys: {field: {key in older files: key}} for a dict field whose keys were
  renamed (files up to 2026-11-27 key the server's own process "named", for NSD and Knot
  too);
- json_absent: {field: value} for a field without a default that older files lack;
- json_derived: {key: function of the object}: figures computed from the fields, written
  after them for readers of the file, skipped when it is read back.
A key that is none of these, nor a field, is an error: a file of another shape is refused
rather than read in part.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# A class's json_derived: key -> the figure computed from an object.
Derived = dict[str, Callable[[Any], Any]]
# The json_renamed of every entry naming a server: files written before the suite called the
# measured thing a server (up to 2026-11-25) name it "driver".
RENAMED_SERVER = {"driver": "server"}


@dataclass(frozen=True)
class Section:
    """One top-level key of results.json, and what a measurement records there: `hint` is
    list[Entry] (one entry per cell, point or curve) or Entry | None (one object). `always`:
    written even when empty, as every file has had it since schema 1; a later section is
    written only when present, so files of other commands stay as they were."""

    key: str
    hint: Any
    always: bool = False

    def empty(self) -> Any:
        """The section's value in a file without it."""
        return [] if typing.get_origin(self.hint) is list else None

    def present(self, value: Any) -> bool:
        return self.always or value is not None


def to_json(value: Any) -> Any:
    """value as JSON data: dataclasses as dicts (their fields in order, then json_derived)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for key, figure in getattr(value, "json_derived", {}).items():
            data[key] = to_json(figure(value))
        return data
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    return value


def from_json(hint: Any, data: Any) -> Any:
    """data (as to_json wrote it) read as the type `hint` names."""
    if data is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _from_union(args, data)
    if origin is list:
        return [from_json(args[0], item) for item in data] if args else list(data)
    if origin is tuple:
        return _from_tuple(args, data)
    if origin is dict:
        return ({key: from_json(args[1], item) for key, item in data.items()} if args
                else dict(data))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _from_dict(hint, data)
    return data


def _from_union(args: tuple[Any, ...], data: Any) -> Any:
    """X | None as X; a union of several types as the dataclass among them when data is an
    object, else data as it is."""
    kinds = [a for a in args if a is not type(None)]
    if len(kinds) == 1:
        return from_json(kinds[0], data)
    if isinstance(data, dict):
        for kind in kinds:
            if isinstance(kind, type) and dataclasses.is_dataclass(kind):
                return _from_dict(kind, data)
    return data


def _from_tuple(args: tuple[Any, ...], data: Any) -> tuple:
    if not args:
        return tuple(data)
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(from_json(args[0], item) for item in data)
    return tuple(from_json(kind, item) for kind, item in zip(args, data, strict=True))


def _from_dict(cls: type, data: dict) -> Any:
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: an object was expected, not {data!r:.60}")
    renamed: dict[str, str] = getattr(cls, "json_renamed", {})
    values = {renamed.get(key, key): value for key, value in data.items()}
    for name, keys in getattr(cls, "json_renamed_keys", {}).items():
        if isinstance(values.get(name), dict):
            values[name] = {keys.get(key, key): value for key, value in values[name].items()}
    hints = _hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = values.keys() - known - getattr(cls, "json_derived", {}).keys()
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
    absent: dict[str, Any] = getattr(cls, "json_absent", {})
    kwargs = {name: absent[name] for name in absent.keys() - values.keys()}
    kwargs |= {name: from_json(hints[name], value) for name, value in values.items()
               if name in known}
    return cls(**kwargs)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The class's resolved field types (its module's names: `from __future__ import
    annotations` keeps them as strings)."""
    return typing.get_type_hints(cls)

