"""One declaration per setting: the config dataclasses' fields carry their option name, help, bounds and choices.

A run's settings live in a dataclass (``PretrainConfig``, ``PrepareConfig``, ``FinetuneConfig`` ...). Each field is
declared with :func:`setting`, which puts a :class:`Setting` into the field's metadata; from that one declaration

- :func:`check` (called by every config's ``__post_init__``) validates types, bounds and choices and raises
  :class:`~litebert.errors.LitebertError` in one format that names the command-line option:
  ``--max-steps 0: must be > 0``;
- :mod:`litebert.cli.settings` derives the command-line options (name, aliases, type, default, help, choices);
- :func:`read_settings_file` reads a ``--config`` file (JSON or TOML; a run's ``run_settings.json`` too) and
  refuses unknown keys, naming the closest valid one;
- :func:`to_dict` gives the resolved settings that a run writes to ``OUTPUT/run_settings.json``.

This module sits at the bottom of the import graph (next to :mod:`litebert.errors`): configs of every layer use it.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import types
import typing
from collections.abc import Sequence
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any

from litebert.errors import LitebertError

_META = "litebert.setting"


class _NoConst:
    def __repr__(self) -> str:
        return "NO_CONST"


NO_CONST = _NoConst()


@dataclass(frozen=True)
class Setting:
    """How one config field appears on the command line and what values it accepts.

    Attributes:
        help: the one-line help (the default is appended by the CLI).
        option: the option string (default ``--field-name``); a contract once released.
        aliases: further option strings (e.g. ``--no-progress`` for ``--no-progress-bar``).
        metavar: the value's name in ``--help``.
        choices: the allowed values (each element of a list-valued field).
        gt, ge, lt, le: numeric bounds (``>``, ``>=``, ``<``, ``<=``); ``None`` values are not checked.
        negate: a bool field whose option sets it to False (``--no-progress-bar`` ↔ ``progress_bar``). Every bool
            field also takes the opposite option (``--compile``/``--no-compile``, ``--progress-bar``), so that the
            command line can override a ``--config`` file's value either way.
        const: the option takes no value and stores this constant (``--no-header`` ↔ ``header=False``).
        group: the ``--help`` section.
    """

    help: str
    option: str | None = None
    aliases: tuple[str, ...] = ()
    metavar: str | None = None
    choices: tuple | None = None
    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    negate: bool = False
    const: Any = NO_CONST
    group: str | None = None


def setting(default: Any = MISSING, *, default_factory: Any = MISSING, help: str, **kwargs: Any) -> Any:
    """A dataclass field with its :class:`Setting` (no ``default``: the setting is required)."""
    if "choices" in kwargs and kwargs["choices"] is not None:
        kwargs["choices"] = tuple(kwargs["choices"])
    meta = {_META: Setting(help=help, **kwargs)}
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


# ------------------------------------------------------------------------------------------------- field types
@dataclass(frozen=True)
class FieldType:
    """A field's annotation, resolved: the scalar type, whether None is allowed, the container (list/tuple)."""

    scalar: type | tuple[type, ...]
    optional: bool
    container: type | None = None  # list or tuple: several values (nargs="+")

    @property
    def nested(self) -> bool:
        return isinstance(self.scalar, type) and dataclasses.is_dataclass(self.scalar)


def _resolve(hint: Any) -> FieldType:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(args) < len(typing.get_args(hint))
        if len(args) == 1:
            inner = _resolve(args[0])
            return dataclasses.replace(inner, optional=optional or inner.optional)
        return FieldType(tuple(_resolve(a).scalar for a in args), optional)  # e.g. Column = str | int
    if origin in (list, tuple):
        return FieldType(_resolve(typing.get_args(hint)[0]).scalar, False, origin)
    return FieldType(hint, False)


def field_types(cls: type) -> dict[str, FieldType]:
    """``{field name: FieldType}`` of a config dataclass (annotations resolved in its module)."""
    hints = typing.get_type_hints(cls)
    return {f.name: _resolve(hints[f.name]) for f in dataclasses.fields(cls)}


def meta(f: dataclasses.Field) -> Setting | None:
    return f.metadata.get(_META)


def option_name(cls_or_obj: Any, name: str) -> str:
    """The command-line option of field ``name`` (``--max-steps``)."""
    cls = cls_or_obj if isinstance(cls_or_obj, type) else type(cls_or_obj)
    for f in dataclasses.fields(cls):
        if f.name == name:
            m = meta(f)
            if m is not None and m.option:
                return m.option
    return "--" + name.replace("_", "-")


def has_default(f: dataclasses.Field) -> bool:
    return f.default is not MISSING or f.default_factory is not MISSING


def default_of(f: dataclasses.Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


# -------------------------------------------------------------------------------------------------- validation
def fail(obj: Any, name: str, why: str) -> typing.NoReturn:
    """Raise the one error format: ``--option value: why``."""
    raise LitebertError(f"{option_name(obj, name)} {getattr(obj, name)!r}: {why}")


def _type_word(scalar: Any) -> str:
    if isinstance(scalar, tuple):
        return " or ".join(_type_word(s) for s in scalar)
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(scalar, str(scalar))


def _coerce(value: Any, scalar: Any) -> tuple[bool, Any]:
    """(ok, value converted): ints where floats go, paths where strings go; bools are never numbers."""
    scalars = scalar if isinstance(scalar, tuple) else (scalar,)
    for s in scalars:
        if s is bool and isinstance(value, bool):
            return True, value
        if isinstance(value, bool):
            continue
        if s is int and isinstance(value, int):
            return True, value
        if s is float and isinstance(value, (int, float)):
            return True, float(value)
        if s is str and isinstance(value, (str, os.PathLike)):
            return True, os.fspath(value)
    return False, value


def check(obj: Any) -> None:
    """Validate (and normalise) every field of a config dataclass against its annotation and :class:`Setting`.

    Converts ints to floats for float fields, paths to strings for string fields, lists to the declared
    container. Raises :class:`LitebertError` ``"--option value: why"`` for a value of the wrong type, a float that
    is not finite (``inf``, ``nan``: no setting means anything by them), outside its bounds or not among its
    choices, and ``"setting 'data': expected DataOptions ..."`` for a nested config field that holds something else
    than that config (a dict is converted by the config before). Called first in each config's ``__post_init__``;
    the config adds its cross-field checks with :func:`fail`.
    """
    ftypes = field_types(type(obj))
    for f in dataclasses.fields(obj):
        m = meta(f)
        ft = ftypes[f.name]
        value = getattr(obj, f.name)
        if ft.nested:  # the nested dataclass validates itself; anything else (data="sst2") fails later, unnamed
            if not (isinstance(value, ft.scalar) or (value is None and ft.optional)):
                raise LitebertError(
                    f"setting {f.name!r}: expected {ft.scalar.__name__} (or a dict of its settings), "
                    f"got {type(value).__name__} {value!r}"
                )
            continue
        if m is None:
            continue
        if value is None:
            if not ft.optional:
                fail(obj, f.name, "must be set")
            continue
        if ft.container is not None:
            if isinstance(value, (str, os.PathLike)):
                value = [value]
            if not isinstance(value, (list, tuple)):
                fail(obj, f.name, f"expected a list of {_type_word(ft.scalar)} values")
            items = []
            for item in value:
                ok, item = _coerce(item, ft.scalar)
                if not ok:
                    fail(obj, f.name, f"expected a list of {_type_word(ft.scalar)} values")
                items.append(item)
            value = ft.container(items)
            object.__setattr__(obj, f.name, value)
            elements = list(value)
        else:
            ok, value = _coerce(value, ft.scalar)
            if not ok:
                fail(obj, f.name, f"expected {_type_word(ft.scalar)}")
            object.__setattr__(obj, f.name, value)
            elements = [value]
        for v in elements:
            if isinstance(v, float) and not math.isfinite(v):  # inf passes `> 0`, nan fails every bound unnamed
                fail(obj, f.name, "must be a finite number")
            if m.choices is not None and v not in m.choices:
                fail(obj, f.name, f"expected one of {', '.join(map(str, m.choices))}")
            if m.gt is not None and not v > m.gt:
                fail(obj, f.name, f"must be > {m.gt}")
            if m.ge is not None and not v >= m.ge:
                fail(obj, f.name, f"must be >= {m.ge}")
            if m.lt is not None and not v < m.lt:
                fail(obj, f.name, f"must be < {m.lt}")
            if m.le is not None and not v <= m.le:
                fail(obj, f.name, f"must be <= {m.le}")


# ------------------------------------------------------------------------------------------------- dict / files
def jsonable(value: Any) -> Any:
    """``value`` with JSON types only: configs (dataclasses) → dicts of their settings, dict keys → str, tuples →
    lists, paths → str; anything else unchanged."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_dict(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def to_dict(obj: Any) -> dict[str, Any]:
    """The settings of a config as a JSON-ready dict (field name → value; nested configs as dicts)."""
    return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def _closest(key: str, names: list[str]) -> str:
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _not_a_table(name: str, value: Any, cls: type) -> str:
    """The message for a scalar (or list) where the settings of a nested config go (``data = "sst2"``)."""
    first = dataclasses.fields(cls)[0].name
    example = json.dumps(value) if isinstance(value, str) else "..."
    return (
        f"{name!r} must be a table of {name} settings, not {type(value).__name__} {value!r}: e.g. "
        f'[{name}] {first} = {example} in TOML, "{name}": {{"{first}": {example}}} in JSON'
    )


def _nested_home(key: str, ftypes: dict[str, FieldType]) -> str | None:
    """The nested config (``data``) that has a field ``key``, or None."""
    for name, ft in ftypes.items():
        if ft.nested and key in field_types(ft.scalar):
            return name
    return None


def check_keys(values: dict[str, Any], cls: type, source: str) -> dict[str, Any]:
    """Refuse keys that are not fields of ``cls`` (or of its nested configs), naming the closest valid one.

    A key of a nested config given at the top level (``task = "sst2"`` for ``[data] task``) is named with its
    table. Raises :class:`LitebertError` for an unknown key, and for a value that is not a table (a JSON object)
    where a nested config's settings go (``data = "sst2"``).
    """
    ftypes = field_types(cls)
    names = list(ftypes)
    for key, value in values.items():
        if key not in ftypes:
            home = _nested_home(key, ftypes)
            hint = f" (did you mean [{home}] {key}? it belongs in the {home} table)" if home else _closest(key, names)
            raise LitebertError(f"{source}: unknown setting {key!r}{hint}; valid settings: {', '.join(names)}")
        ft = ftypes[key]
        if ft.nested:
            if isinstance(value, dict):
                check_keys(value, ft.scalar, f"{source}: {key}")
            elif not (value is None and ft.optional):
                raise LitebertError(f"{source}: {_not_a_table(key, value, ft.scalar)}")
    return values


def read_settings_file(
    path: str | os.PathLike, cls: type, section: str | Sequence[str] | None = None
) -> dict[str, Any]:
    """Settings of ``cls`` from a JSON or TOML (``.toml``) file: ``{field name: value}``.

    A run's ``run_settings.json`` (``{section: {...}, ...}``, e.g. ``"pretrain_config"``) gives its ``section``
    (or the first of several that it holds: ``predict`` also reads ``evaluate``'s, the same settings).
    Raises :class:`LitebertError` naming the file for a missing file, invalid JSON/TOML, a non-object, an
    unknown key (with the closest valid name), or another command's ``run_settings.json``.
    """
    p = Path(path)
    if not p.is_file():
        raise LitebertError(f"--config {p}: no such file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise LitebertError(f"--config {p}: not a UTF-8 text file") from None
    if p.suffix.lower() == ".toml":
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise LitebertError(f"--config {p}: not valid TOML ({exc})") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LitebertError(
                f"--config {p}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            ) from None
    if not isinstance(data, dict):
        raise LitebertError(f"--config {p}: expected an object of settings, got {type(data).__name__}")
    sections = (section,) if isinstance(section, str) else tuple(section or ())
    own = next((data[k] for k in sections if isinstance(data.get(k), dict)), None)
    if own is not None:
        data = own
    elif isinstance(data.get("command"), str) and any(
        k.endswith("_config") and isinstance(v, dict) for k, v in data.items()
    ):
        # another command's run_settings.json (evaluate --config FINETUNE/run_settings.json): its keys are that
        # command's, and some (--model: the base model there, the fine-tuned one here) mean something else
        this = f"`litebert {sections[0].removesuffix('_config')}`" if sections else "this command"
        raise LitebertError(
            f"--config {p}: holds the settings of `litebert {data['command']}`, not of {this}: give a "
            f"run_settings.json that {this} wrote, or a file of its own settings (--help lists them)"
        )
    return check_keys(data, cls, f"--config {p}")


__all__ = [
    "FieldType",
    "Setting",
    "check",
    "check_keys",
    "default_of",
    "fail",
    "field_types",
    "has_default",
    "meta",
    "option_name",
    "read_settings_file",
    "setting",
    "to_dict",
]
