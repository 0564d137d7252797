"""Config keys declared once, next to the code that reads them: default, meaning and value rule.

A component (each policy) declares its keys as a :class:`KeySet` of :class:`Key` records; everything else is
generated from it: the component's ``default_config()`` (:meth:`KeySet.defaults`), the meanings ``ding-dist
config show`` prints and docs/rl.md's tables (:mod:`ding_dist.config.describe`), the range checks of
:mod:`ding_dist.config.rules` (:meth:`Key.error`) and the key list of the class's docstring (:meth:`KeySet.doc`).
The type of a key is its default's (checked by :func:`~ding_dist.config.compile_config`).

A rule is a short text:

========================  =====================================================
``">= N"``                an int >= N
``"> 0"``                 a finite number > 0
``"number >= 0"``         a number >= 0
``"[0, 1]"``, ``"(0, 1]"``  a number in the interval
``"sizes"``               a non-empty list of ints >= 1
``"device"``              ``'auto'``, ``'cpu'``, ``'cuda'``/``'cuda:N'`` (with CUDA)
``"in ('a', 'b')"``       one of the listed values
``"<rule> or None"``      the rule, or None
========================  =====================================================

or a ``(predicate, expected text)`` pair for anything else.

Example:
    >>> keys = KeySet(Key("learn.batch_size", 64, "batch per update", ">= 1"), Key("learn.loss", "huber", "loss",
    ...               "in ('huber', 'mse')"))
    >>> keys.defaults()
    {'learn': {'batch_size': 64, 'loss': 'huber'}}
    >>> keys["learn.batch_size"].error(0)
    'must be >= 1'
    >>> keys.plus(Key("learn.batch_size", 32))["learn.batch_size"]  # a new default keeps the meaning and rule
    Key(path='learn.batch_size', default=32, meaning='batch per update', rule='>= 1', reader='policy')
"""

from __future__ import annotations

import ast
import copy
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from easydict import EasyDict

__all__ = ["AUTO_BOOL", "Check", "Key", "KeySet", "check_of", "expected_of", "leaves"]

#: A custom rule: (value -> ok, what is expected, e.g. "True, False or None (auto)").
Check = tuple[Callable[[Any], bool], str]
Rule = str | Check | None

#: The rule of a switch whose None means "decide from the run" (e.g. ``other.replay_buffer.frame_dedup``).
AUTO_BOOL: Check = (lambda v: v is None or isinstance(v, bool)), "True, False or None (auto)"

#: Who reads a key: ``"policy"`` (the policy's own code: its constructor, acting, learning) or ``"pipeline"`` (the
#: collectors, replay buffers, learners and loops of ``ding_dist/worker``, ``ding_dist/data`` and ``ding_dist/entry``).
READERS = ("policy", "pipeline")


@dataclass(frozen=True)
class Key:
    """One config key: ``path`` (dotted, relative to its section, e.g. ``"learn.batch_size"``), its ``default``, a
    one-line ``meaning``, a value ``rule`` (see the module docstring; None: only the default's type is checked) and
    its ``reader`` (``"policy"``, the default, or ``"pipeline"``). Declared again in a :meth:`KeySet.plus`, what a
    key leaves out (meaning, rule, reader) is kept from before.

    Example:
        >>> Key("learn.clip_ratio", 0.2, "policy ratio clip", "> 0").error(-1.0)
        'must be a finite number > 0'
    """

    path: str
    default: Any
    meaning: str = ""
    rule: Rule = None
    reader: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path or any(not p.isidentifier() for p in self.path.split(".")):
            raise ValueError(f"a key path must be dotted identifiers such as 'learn.batch_size', got {self.path!r}")
        if self.reader is not None and self.reader not in READERS:
            raise ValueError(f"key {self.path!r}: reader must be one of {READERS}, got {self.reader!r}")
        check_of(self.rule)  # a rule that does not parse fails where it is declared

    @property
    def expected(self) -> str:
        """The rule as the error messages say it (``""``: no rule)."""
        return expected_of(self.rule)

    def error(self, value: Any) -> str | None:
        """``"must be <expected>"`` when ``value`` breaks the rule, else None."""
        check = check_of(self.rule)
        if check is None or check[0](value):
            return None
        return f"must be {check[1]}"


class KeySet(Mapping[str, Key]):
    """The ordered keys of one config section, by dotted path; :meth:`plus` and :meth:`minus` derive another.

    Example:
        >>> base = KeySet(Key("model", {}, "network options"), Key("learn.batch_size", 64, "batch", ">= 1"))
        >>> list(base.plus(Key("model.hidden_sizes", [64], "hidden layer sizes", "sizes")).minus("learn.batch_size"))
        ['model.hidden_sizes']
    """

    def __init__(self, *keys: Key) -> None:
        self._keys: dict[str, Key] = {}
        for key in keys:
            self._put(key)

    def _put(self, key: Key) -> None:
        if not isinstance(key, Key):
            raise TypeError(f"a KeySet holds Key records, got {key!r}")
        old = self._keys.get(key.path)
        if old is not None:  # a new default (or meaning, or rule) of a key declared before: the rest is kept
            key = replace(key, meaning=key.meaning or old.meaning, rule=old.rule if key.rule is None else key.rule,
                          reader=key.reader or old.reader)  # fmt: skip
        elif key.reader is None:
            key = replace(key, reader="policy")
        parts = key.path.split(".")
        for i in range(1, len(parts)):  # "model.x" closes an open section "model" ({}) declared before, in its place
            parent = ".".join(parts[:i])
            if parent in self._keys:
                if self._keys[parent].default != {}:
                    raise ValueError(f"key {key.path!r} lies inside {parent!r}, which is a value, not a section")
                self._keys = {
                    (key.path if p == parent else p): (key if p == parent else k) for p, k in self._keys.items()
                }
                return
        if any(p.startswith(key.path + ".") for p in self._keys):
            raise ValueError(f"key {key.path!r} is a section of keys already declared under it")
        if key.path in self._keys:
            self._keys[key.path] = key
            return
        items, at = list(self._keys.items()), len(self._keys)
        for depth in range(len(parts) - 1, 0, -1):  # after the last key of its innermost section declared so far
            section = ".".join(parts[:depth]) + "."
            last = [i for i, (p, _) in enumerate(items) if p.startswith(section)]
            if last:
                at = last[-1] + 1
                break
        items.insert(at, (key.path, key))
        self._keys = dict(items)

    def plus(self, *keys: Key) -> KeySet:
        """These keys and ``keys`` (a path declared again takes the new default, and the new meaning and rule when
        given)."""
        out = KeySet(*self._keys.values())
        for key in keys:
            out._put(key)
        return out

    def minus(self, *paths: str) -> KeySet:
        """These keys without ``paths`` (each must be declared)."""
        missing = [p for p in paths if p not in self._keys]
        if missing:
            raise KeyError(f"keys {missing} are not declared; declared: {list(self._keys)}")
        return KeySet(*(k for p, k in self._keys.items() if p not in paths))

    def __getitem__(self, path: str) -> Key:
        return self._keys[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"KeySet({', '.join(self._keys)})"

    def defaults(self) -> EasyDict:
        """A fresh nested EasyDict of every key's default (the section's ``default_config()``)."""
        out: dict[str, Any] = {}
        for key in self._keys.values():
            *parents, leaf = key.path.split(".")
            node = out
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = copy.deepcopy(key.default)
        return EasyDict(out)

    def doc(self, prefix: str = "", indent: str = "    ", skip: Mapping[str, Key] | None = None) -> str:
        """One reST bullet per key: ``- ``path`` = default (rule): meaning`` (a class docstring's key list); keys
        declared exactly so in ``skip`` are left out."""
        lines = []
        for key in self._keys.values():
            if skip is not None and skip.get(key.path) == key:
                continue
            rule = f" ({key.expected})" if key.expected else ""
            lines.append(f"{indent}- ``{prefix}{key.path}`` = ``{key.default!r}``{rule}: {key.meaning}")
        return "\n".join(lines)


# ---- rules -------------------------------------------------------------------------------------------------------
def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _device_ok(v: Any) -> bool:
    if not isinstance(v, str):
        return False
    if v == "auto":
        return True
    import torch  # only when a config names a device: the CLI's argument parsing stays light

    try:
        device = torch.device(v)
    except (RuntimeError, ValueError):
        return False
    if device.type == "cuda" and not torch.cuda.is_available():
        return False  # caught with the other config errors, not at the first tensor
    return device.type in ("cpu", "cuda")


def _parse(text: str) -> Check:
    text = text.strip()
    if text.endswith(" or None"):
        ok, what = _parse(text[: -len(" or None")])
        return (lambda v: v is None or ok(v)), f"{what} or None"
    if text.startswith(">= ") and text[3:].lstrip("-").isdigit():
        n = int(text[3:])
        return (lambda v: _is_int(v) and v >= n), f">= {n}"
    if text == "> 0":
        return (lambda v: _is_number(v) and math.isfinite(v) and v > 0), "a finite number > 0"
    if text == "number >= 0":
        return (lambda v: _is_number(v) and v >= 0), "a number >= 0"
    if text == "[0, 1]":
        return (lambda v: _is_number(v) and 0 <= v <= 1), "in [0, 1]"
    if text == "(0, 1]":
        return (lambda v: _is_number(v) and 0 < v <= 1), "in (0, 1]"
    if text == "sizes":
        return (
            lambda v: isinstance(v, (list, tuple)) and len(v) > 0 and all(_is_int(s) and s >= 1 for s in v)
        ), "a non-empty list of ints >= 1"
    if text == "device":
        return _device_ok, "'auto', 'cpu', or 'cuda'/'cuda:N' on a machine with CUDA"
    if text.startswith("in (") and text.endswith(")"):
        try:
            choices = ast.literal_eval(text[3:])
        except (ValueError, SyntaxError):
            choices = None
        if isinstance(choices, tuple) and choices:
            return (lambda v: any(v == c and type(v) is type(c) for c in choices)), "one of " + ", ".join(
                map(repr, choices)
            )
    raise ValueError(
        f"unknown key rule {text!r}; expected '>= N', '> 0', 'number >= 0', '[0, 1]', '(0, 1]', 'sizes', 'device', "
        "\"in ('a', 'b')\", each optionally followed by ' or None'"
    )


_PARSED: dict[str, Check] = {}


def check_of(rule: Rule) -> Check | None:
    """The ``(predicate, expected)`` pair of a rule (None: no rule); a rule that does not parse is a ValueError.

    Example:
        >>> ok, expected = check_of("[0, 1] or None")
        >>> ok(None), ok(1.5), expected
        (True, False, 'in [0, 1] or None')
    """
    if rule is None:
        return None
    if isinstance(rule, str):
        if rule not in _PARSED:
            _PARSED[rule] = _parse(rule)
        return _PARSED[rule]
    if isinstance(rule, tuple) and len(rule) == 2 and callable(rule[0]) and isinstance(rule[1], str):
        return rule
    raise ValueError(f"a key rule is a text such as '>= 1' or a (predicate, expected) pair, got {rule!r}")


def expected_of(rule: Rule) -> str:
    """What a rule expects, as error messages and docs say it (``""`` for no rule).

    Example:
        >>> expected_of("> 0")
        'a finite number > 0'
    """
    check = check_of(rule)
    return "" if check is None else check[1]


def leaves(node: Mapping, path: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted path, value)`` of each leaf of a nested mapping (an empty mapping is a leaf).

    Example:
        >>> list(leaves({"learn": {"batch_size": 64}, "model": {}}))
        [('learn.batch_size', 64), ('model', {})]
    """
    for key, value in node.items():
        if isinstance(value, Mapping) and value:
            yield from leaves(value, f"{path}{key}.")
        else:
            yield f"{path}{key}", value
