"""Command-line options derived from a config dataclass (:mod:`litebert.settings`), and the config built back.

:func:`add_settings` adds one option per field (``--field-name`` unless the field's :class:`Setting` names another,
plus its aliases) with the field's type, choices and help, and the default shown in ``--help``; a nested config
field (``FinetuneConfig.data``) contributes its own fields' options. :func:`add_config_option` adds
``--config FILE``. :func:`config_from_args` builds the config: the dataclass defaults, then the ``--config`` file,
then the options given on the command line; a required setting given nowhere is a usage error listing it.

Options are parsed with ``default=SUPPRESS``, so the namespace holds only what the user typed: that is what lets
the command line override the file, and the file override the defaults.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

from litebert import settings as S

_SECTION = "_settings_section"
_CLASS = "_settings_class"
_PARSER = "_settings_parser"
_CONFIG_FILE = "_config_file"


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


class _Switch(argparse.Action):
    """A bool option given with its opposites (``--compile``/``--no-compile``): the option strings in ``on`` store
    True, the others False."""

    def __init__(self, option_strings, dest, on: frozenset[str], **kwargs):
        super().__init__(option_strings, dest, nargs=0, **kwargs)
        self.on = on

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, option_string in self.on)


def _with_opposites(names: list[str], negate: bool) -> tuple[list[str], frozenset[str]]:
    """A bool setting's option strings followed by their opposites (``--x`` ↔ ``--no-x``), and those that set True:
    the given ones, or for a ``negate`` setting (``--no-progress-bar``) their opposites."""

    def opposite(name: str) -> str:
        if not name.startswith("--"):
            raise TypeError(f"bool option {name} has no --no- form")
        return "--" + name[5:] if name.startswith("--no-") else "--no-" + name[2:]

    opposites = [opposite(n) for n in names]
    return names + opposites, frozenset(opposites if negate else names)


def _help(m: S.Setting, f: dataclasses.Field, ft: S.FieldType) -> str:
    """The help text with the default appended (argparse does not show SUPPRESSed defaults)."""
    text = m.help
    if not S.has_default(f):
        text += " (required)"
    else:
        default = S.default_of(f)
        if not (ft.scalar is bool or default is None or ft.nested):
            shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else default
            text += f" (default: {shown})"
    return text.replace("%", "%%")


def add_settings(
    parser: argparse.ArgumentParser, cls: type, *, section: str | tuple[str, ...] | None = None, prefix: str = ""
) -> None:
    """Add one option per field of ``cls`` to ``parser``; ``section`` names the settings in a run_settings.json."""
    if not prefix:
        parser.set_defaults(**{_CLASS: cls, _SECTION: section, _PARSER: parser})
        config = next((a for a in parser._actions if a.dest == _CONFIG_FILE), None)
        if config is not None:  # --config's example key: one this command takes (ablate has steps, not max_steps)
            config.help = _config_help(_example_key(cls), writes_run_settings=section is not None)
    ftypes = S.field_types(cls)
    for f in dataclasses.fields(cls):
        m = S.meta(f)
        ft = ftypes[f.name]
        if ft.nested:
            add_settings(parser, ft.scalar, prefix=f"{prefix}{f.name}.")
            continue
        if m is None:
            raise TypeError(f"{cls.__name__}.{f.name} is not declared with litebert.settings.setting()")
        target: Any = parser
        if m.group:
            target = next((g for g in parser._action_groups if g.title == m.group), None) or parser.add_argument_group(
                m.group
            )
        names = [m.option or "--" + f.name.replace("_", "-"), *m.aliases]
        kwargs: dict[str, Any] = {"dest": prefix + f.name, "default": argparse.SUPPRESS, "help": _help(m, f, ft)}
        if m.const is not S.NO_CONST:
            kwargs.update(action="store_const", const=m.const)
        elif ft.scalar is bool:  # both ways: a value read from --config can be overridden either way
            names, on = _with_opposites(names, m.negate)
            kwargs.update(action=_Switch, on=on)
        else:
            scalar = ft.scalar if isinstance(ft.scalar, type) else str  # str | int columns: parsed from text
            kwargs["type"] = {int: _int, float: _float}.get(scalar, str)
            if m.choices is not None:
                kwargs["choices"] = m.choices
            if m.metavar:
                kwargs["metavar"] = m.metavar
            if ft.container is not None:
                kwargs["nargs"] = "+"
        target.add_argument(*names, **kwargs)


def _config_help(example: str | None, writes_run_settings: bool = True) -> str:
    """``--config``'s help; a command that writes no ``run_settings.json`` (train-tokenizer, prepare) names none."""
    keys = "the settings' field names" + (f", e.g. {example}" if example else "")
    runs = "; a run's run_settings.json works too" if writes_run_settings else ""
    return f"read settings from a JSON or TOML file (keys: {keys}{runs}); options given here override it"


def _example_key(cls: type) -> str | None:
    """A key of ``cls``'s settings for ``--config``'s help: its first numeric setting."""
    ftypes = S.field_types(cls)
    return next((f.name for f in dataclasses.fields(cls) if ftypes[f.name].scalar in (int, float)), None)


def add_config_settings(parser, settings_class: str, *, section: str | tuple[str, ...] | None = None) -> None:
    """``--config FILE`` and the options of ``settings_class`` (``"module:Class"``), added to ``parser`` (a
    :class:`litebert.cli.Parser`) when it first parses or prints help: the class's module is imported then, not
    when the command line is built (``litebert prepare`` need not import ``pretrain``'s torch)."""

    def add(p: argparse.ArgumentParser) -> None:
        module, name = settings_class.split(":")
        add_config_option(p)
        add_settings(p, getattr(importlib.import_module(module), name), section=section)

    parser.defer(add)


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--config FILE``; :func:`add_settings` then names one of the command's own keys in its help."""
    parser.add_argument("--config", dest=_CONFIG_FILE, metavar="FILE", default=None, help=_config_help(None))


def _missing(cls: type, values: dict[str, Any]) -> list[str]:
    out = []
    for f in dataclasses.fields(cls):
        if not S.has_default(f) and f.name not in values:
            out.append(S.option_name(cls, f.name))
    return out


def settings_from_args(args: argparse.Namespace, cls: type | None = None) -> dict[str, Any]:
    """The settings of ``args``' command as keyword arguments of its config class: file, then command line."""
    cls = cls or getattr(args, _CLASS)
    given = {k: v for k, v in vars(args).items() if not k.startswith("_") and k not in ("func", "command")}
    path = getattr(args, _CONFIG_FILE, None)
    values: dict[str, Any] = dict(S.read_settings_file(path, cls, getattr(args, _SECTION, None))) if path else {}
    ftypes = S.field_types(cls)
    for name, ft in ftypes.items():
        if ft.nested:
            nested = {k.split(".", 1)[1]: v for k, v in given.items() if k.startswith(name + ".")}
            if nested:
                base = values.get(name) if isinstance(values.get(name), dict) else {}
                values[name] = {**base, **nested}
        elif name in given:
            values[name] = given[name]
    return values


def config_from_args(args: argparse.Namespace, adjust: Callable[[dict], dict] | None = None):
    """Build the command's config from ``args`` (see :func:`settings_from_args`).

    ``adjust`` maps the merged settings to the final ones (a command's own rule). A required setting given neither
    on the command line nor in the ``--config`` file is a usage error (the usage line, exit status 2). Validation
    errors are :class:`~litebert.errors.LitebertError` ``"--option value: why"``. Model and tokenizer settings
    given as Hub ids are replaced by their downloaded directories (:func:`litebert.hub.resolve_config`).
    """
    cls = getattr(args, _CLASS)
    values = settings_from_args(args, cls)
    if adjust is not None:
        values = adjust(values)
    parser = getattr(args, _PARSER, None)
    missing = _missing(cls, values)
    if missing:
        message = f"the following arguments are required: {', '.join(missing)}"
        if parser is not None:
            parser.error(message)
        from litebert.errors import LitebertError

        raise LitebertError(message)
    from litebert.hub import resolve_config  # a Hub id given as --model/--tokenizer/--init-from: downloaded here

    return resolve_config(cls(**values))


__all__ = ["add_config_option", "add_config_settings", "add_settings", "config_from_args", "settings_from_args"]
