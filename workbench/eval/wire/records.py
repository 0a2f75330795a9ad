"""Strict JSON codec for the frozen dataclass records of every channel: `from_json(cls, data)` rebuilds a record against
its type hints and raises `RecordError` naming the field on anything unknown, missing or of another type (a bool is
not an int). With `tagged` (the runner channel) records carry their class name under "@", and inside an `Any` field a
tagged object comes back as that record and every list as a tuple."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

T = TypeVar("T")
Tagged = Mapping[str, type] | None


@dataclasses.dataclass(frozen=True)
class Message:
    """A message of a channel: a frozen record whose class names the frame's "kind" as a class keyword
    (`class Ping(Message, kind="ping")`)."""

    kind: ClassVar[str] = ""

    def __init_subclass__(cls, kind: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.kind = kind


class RecordError(ValueError):
    """A JSON value that is not the record it should be; the message names the field and what was wrong."""


def to_json(value: Any, tagged: bool = False) -> Any:
    """`value` as JSON: records as objects of their fields ("@": the class name when `tagged`), tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        body = {f.name: to_json(getattr(value, f.name), tagged) for f in dataclasses.fields(value)}
        return {"@": type(value).__name__, **body} if tagged else body
    if isinstance(value, (list, tuple)):
        return [to_json(v, tagged) for v in value]
    return {str(k): to_json(v, tagged) for k, v in value.items()} if isinstance(value, dict) else value


_SCHEMAS: dict[type, tuple[dict[str, Any], tuple[dataclasses.Field, ...]]] = {}


def _schema(cls: type) -> tuple[dict[str, Any], tuple[dataclasses.Field, ...]]:
    """Resolved type hints and fields of a record class, once per class (resolving compiles string hints)."""
    if cls not in _SCHEMAS:
        _SCHEMAS[cls] = typing.get_type_hints(cls), dataclasses.fields(cls)
    return _SCHEMAS[cls]


def from_json(cls: type[T], data: Any, where: str = "", tagged: Tagged = None) -> T:
    """The record `cls` rebuilt from `data` (module doc); raises RecordError on anything it does not declare."""
    where = cls.__name__ if tagged is not None or not where else where  # a tagged record names itself
    if not isinstance(data, dict):
        raise RecordError(f"{where}: expected an object, got {type(data).__name__}")
    if tagged is not None:
        if data.get("@", cls.__name__) != cls.__name__:
            raise RecordError(f"{where}: a {data['@']!r:.40} record where a {cls.__name__} belongs")
        data = {k: v for k, v in data.items() if k != "@"}
    hints, fields = _schema(cls)
    unknown = sorted(set(data) - {f.name for f in fields})
    if unknown:
        raise RecordError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}")
    values = {}
    for f in fields:
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise RecordError(f"{where}: missing field {f.name!r}")
            continue
        values[f.name] = _value(data[f.name], hints[f.name], f"{where}.{f.name}", tagged)
    return cls(**values)


def _revive(value: Any, tagged: Mapping[str, type], where: str) -> Any:
    """An `Any` value of a tagged channel: tagged objects as their records, lists as tuples."""
    if isinstance(value, dict):
        if "@" not in value:
            return {k: _revive(v, tagged, where) for k, v in value.items()}
        cls = tagged.get(value["@"])
        if cls is None:
            raise RecordError(f"{where}: unknown record type {value['@']!r:.40}")
        return from_json(cls, value, where, tagged)
    return tuple(_revive(v, tagged, where) for v in value) if isinstance(value, list) else value


def _value(value: Any, hint: Any, where: str, tagged: Tagged) -> Any:
    """`value` checked against `hint` (and rebuilt where the hint is a record, a tuple or a union of them)."""
    if hint is Any:
        return value if tagged is None else _revive(value, tagged, where)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        return _union(value, args, where, tagged)
    if hint is type(None):
        if value is not None:
            raise RecordError(f"{where}: expected null, got {type(value).__name__}")
        return None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return from_json(hint, value, where, tagged)
    if origin in (tuple, list):
        return _sequence(value, origin, args, where, tagged)
    if origin is dict:
        if not isinstance(value, dict):
            raise RecordError(f"{where}: expected an object, got {type(value).__name__}")
        key_hint, value_hint = args or (Any, Any)
        return {_value(k, key_hint, where, tagged): _value(v, value_hint, f"{where}[{k!r}]", tagged)
                for k, v in value.items()}
    return _scalar(value, hint, where)


def _union(value: Any, arms: tuple[Any, ...], where: str, tagged: Tagged) -> Any:
    if value is None and type(None) in arms:
        return None
    errors = []
    for arm in arms:
        if arm is type(None):
            continue
        try:
            return _value(value, arm, where, tagged)
        except RecordError as exc:
            errors.append(str(exc))
    raise RecordError(errors[0] if len(errors) == 1 else f"{where}: {type(value).__name__} matches none of "
                                                          f"{' | '.join(getattr(a, '__name__', str(a)) for a in arms)}")


def _sequence(value: Any, origin: type, args: tuple[Any, ...], where: str, tagged: Tagged) -> Any:
    if not isinstance(value, (list, tuple)):
        raise RecordError(f"{where}: expected a list, got {type(value).__name__}")
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis or origin is list:
        item = args[0] if args else Any
        items = [_value(v, item, f"{where}[{i}]", tagged) for i, v in enumerate(value)]
    else:
        if len(args) != len(value):
            raise RecordError(f"{where}: expected {len(args)} items, got {len(value)}")
        items = [_value(v, a, f"{where}[{i}]", tagged) for i, (v, a) in enumerate(zip(value, args, strict=True))]
    return tuple(items) if origin is tuple else items


def _scalar(value: Any, hint: Any, where: str) -> Any:
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(hint, type):
        if isinstance(value, hint):
            return value
    else:
        raise RecordError(f"{where}: cannot check a value against {hint!r}")
    raise RecordError(f"{where}: expected {hint.__name__}, got {type(value).__name__} {str(value)[:40]!r}")
