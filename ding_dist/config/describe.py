"""One-line meanings of config keys and the resolved-config table of ``ding-dist config show``.

Every key means what its declaration says (:class:`~ding_dist.utils.keys.Key`, the one place a key is described): a
``policy.*`` key's in its policy class's ``keys``, any other key's (``exp_name``, ``seed``, ``env.*``,
``actor_learner.*``, ``pbt.*``) in :mod:`ding_dist.config.sections`. ``ding-dist config show CONFIG`` prints the
meanings next to every key's value, type and default, and the key tables of :data:`DOC_PAGES` are generated from
them (``python -m ding_dist.config.describe --write``; ``--check`` says whether the pages are current).

Example:
    >>> rows = describe({"policy": {"learn": {"batch_size": 128}}}, {"policy": {"learn": {"batch_size": 64}}})
    >>> rows[0].key, rows[0].value, rows[0].default, rows[0].type
    ('policy.learn.batch_size', 128, 64, 'int')
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ding_dist.config.sections import SECTIONS, run_key
from ding_dist.utils.keys import Key, KeySet

__all__ = [
    "KeyRow",
    "describe",
    "docs_tables",
    "format_rows",
    "markdown_table",
    "meaning",
    "render_docs",
    "section_table",
    "write_docs",
]


def _declared(policy_type: str | None) -> Mapping[str, Any]:
    """The keys policy ``policy_type`` declares (the base policy's when it is None)."""
    from ding_dist.policy import Policy, get_policy_cls  # torch: only when a policy key is described

    return get_policy_cls(policy_type).keys if policy_type else Policy.keys


def meaning(key: str, policy_type: str | None = None, own: Mapping[str, Any] | None = None) -> str:
    """The one-line meaning of dotted ``key`` (``""`` when it has none): a ``policy.*`` key's from ``own`` (keys
    relative to ``policy.``, each a meaning or a :class:`~ding_dist.utils.keys.Key`) first, then from the keys
    policy ``policy_type`` declares; any other key's from its declaration in :mod:`ding_dist.config.sections`.

    Example:
        >>> meaning("policy.learn.batch_size", "ppo")
        "minibatch, the run's total (each rank: batch_size / N; the ragged tail of a shuffled rollout is dropped)"
    """
    if not key.startswith("policy."):
        found = run_key(key)
        return "" if found is None else found.meaning
    path = key[len("policy.") :]
    for keys in (own or {}, _declared(policy_type)):
        if path in keys:
            found = keys[path]
            return found.meaning if isinstance(found, Key) else str(found)
    return ""


@dataclass(frozen=True)
class KeyRow:
    """One key of a resolved config: its value, default, the default's type, its meaning and the rule its value
    must follow (``""``: none beyond the type)."""

    key: str
    value: Any
    default: Any
    type: str
    meaning: str
    rule: str = ""


def _leaves(node: Mapping, path: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in node.items():
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, f"{path}{key}.")
        else:
            yield f"{path}{key}", value


def _type_of(default: Any) -> str:
    if default is None:
        return "any"
    if isinstance(default, Mapping):
        return "dict"
    if isinstance(default, (list, tuple)):
        return "list"
    return type(default).__name__


def describe(
    cfg: Mapping, schema: Mapping, policy_type: str | None = None, own: Mapping[str, Any] | None = None
) -> list[KeyRow]:
    """A row per leaf key of ``schema`` (the defaults) with its value in ``cfg``; ``create_config`` skipped; ``own``:
    keys relative to ``policy.`` (the policy class's ``keys``, or plain meanings) that win over ``policy_type``'s."""
    rows = []
    for key, default in _leaves({k: v for k, v in schema.items() if k != "create_config"}):
        value: Any = cfg
        for part in key.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        rows.append(KeyRow(key, value, default, _type_of(default), meaning(key, policy_type, own),
                           _rule(key, policy_type, own)))  # fmt: skip
    return rows


def _rule(key: str, policy_type: str | None, own: Mapping[str, Any] | None) -> str:
    """What a key's declared rule expects (``""``: no rule, or not declared)."""
    if not key.startswith("policy."):
        found = run_key(key)
        return "" if found is None else found.expected
    path = key[len("policy.") :]
    for keys in (own or {}, _declared(policy_type)):
        if path in keys:
            found = keys[path]
            return found.expected if isinstance(found, Key) else ""
    return ""


def format_rows(rows: Sequence[KeyRow], width: int = 60) -> str:
    """Aligned text columns key / value / type / default / meaning; ``*`` marks values that differ from it."""

    def cut(value: Any) -> str:
        text = repr(value)
        return text if len(text) <= width // 2 else text[: width // 2 - 3] + "..."

    table = [("key", "value", "type", "default", "meaning")]
    table += [(r.key, ("* " if r.value != r.default else "") + cut(r.value), r.type, cut(r.default), r.meaning or "-")
              for r in rows]  # fmt: skip
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4] for row in table)


def markdown_table(rows: Sequence[KeyRow], strip: str = "", values: bool = False, rules: bool = False) -> str:
    """The ``| key | default | meaning |`` table of docs/rl.md (``strip``: a prefix such as ``"policy."``);
    ``values``: with the resolved config's value column too (``ding-dist config show --markdown``); ``rules``: with
    the column of what each value must be."""
    head = ["key", *(["value"] if values else []), "default", *(["must be"] if rules else []), "meaning"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def cell(text: object) -> str:  # a "|" inside a cell (|TD error|) would end it
        return str(text).replace("|", "\\|")

    for r in rows:
        key = r.key[len(strip) :] if strip and r.key.startswith(strip) else r.key
        value = f" {cell(repr(r.value))} |" if values else ""
        rule = f" {cell(r.rule or '-')} |" if rules else ""
        lines.append(f"| `{key}` |{value} {cell(repr(r.default))} |{rule} {cell(r.meaning or '-')} |")
    return "\n".join(lines)


def section_table(name: str, keys: KeySet) -> str:
    """The markdown table of section ``name`` (``""``: the top level) of :data:`~ding_dist.config.sections.SECTIONS`,
    full dotted keys.

    Example:
        >>> from ding_dist.config.sections import TOP_KEYS
        >>> section_table("", TOP_KEYS).splitlines()[3].startswith("| `seed` | 0 | an int in [0, 2**32) | random seed")
        True
    """
    schema = {name: keys.defaults()} if name else dict(keys.defaults())
    return markdown_table(describe(schema, schema), rules=True)


#: The key tables of docs/rl.md: ``<!-- keys:NAME -->`` ... ``<!-- /keys -->`` holds the generated table.
DOC_TABLE = "<!-- keys:{name} -->\n{table}\n<!-- /keys -->"


def docs_tables() -> dict[str, str]:
    """The generated markdown key tables (:data:`DOC_PAGES`): one per section of
    :data:`~ding_dist.config.sections.SECTIONS` (``run``: ``exp_name`` and ``seed``; ``env``; ``actor_learner``;
    ``pbt``), ``shared`` (the base policy's keys, which every policy has), then one per policy type with the keys it
    declares beyond them (or declares anew)."""
    from ding_dist.policy import POLICY_REGISTRY, Policy  # torch: only when docs are generated or checked

    tables = {name or "run": section_table(name, keys) for name, keys in SECTIONS.items()}
    shared = {"policy": Policy.default_config()}
    tables |= {"shared": markdown_table(describe(shared, shared, own=Policy.keys), strip="policy.", rules=True)}
    for name, cls in sorted(POLICY_REGISTRY.items()):
        schema = {"policy": cls.keys.defaults()}
        rows = describe(schema, schema, name, cls.keys)
        own = [r for r in rows if Policy.keys.get(r.key[len("policy.") :]) != cls.keys.get(r.key[len("policy.") :])]
        tables[name] = markdown_table(own, strip="policy.", rules=True)
    return tables


#: The pages holding generated key tables (``<!-- keys:NAME -->`` ... ``<!-- /keys -->``), relative to the repository.
DOC_PAGES = ("docs/rl.md", "docs/config_keys.md", "docs/actor_learner.md")


def render_docs(text: str) -> str:
    """``text`` (a page of :data:`DOC_PAGES`) with every generated table replaced by its current version (``python -m
    ding_dist.config.describe --write`` rewrites the pages).

    Example:
        >>> render_docs("no tables here")
        'no tables here'
    """
    if "<!-- keys:" not in text:
        return text
    for name, table in docs_tables().items():
        start, end = f"<!-- keys:{name} -->", "<!-- /keys -->"
        i = text.find(start)
        if i < 0:
            continue
        j = text.index(end, i)
        text = text[:i] + DOC_TABLE.format(name=name, table=table) + text[j + len(end) :]
    return text


def write_docs(path: str) -> bool:
    """Rewrite the generated tables of the markdown file at ``path`` in place; True when it changed."""
    from pathlib import Path

    page = Path(path)
    old = page.read_text()
    new = render_docs(old)
    if new != old:
        page.write_text(new)
    return new != old


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ding_dist.config.describe --write [PAGE ...]`` (regenerate the key tables of the pages, by default
    of :data:`DOC_PAGES`, from the repository's root) or ``--check [PAGE ...]`` (exit 1 when one is stale);
    ``--markdown [POLICY]`` prints a policy's whole key table (``--markdown env``, ``actor_learner`` or ``pbt``:
    that section's)."""
    import argparse
    import sys
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m ding_dist.config.describe", description=main.__doc__)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="PAGE", nargs="*", help="rewrite the key tables of each PAGE (DOC_PAGES)")
    group.add_argument("--check", metavar="PAGE", nargs="*", help="exit 1 when a PAGE's key tables are stale")
    group.add_argument(
        "--markdown",
        metavar="POLICY",
        nargs="?",
        const="",
        help="every key of POLICY (or the base), or of a section: env, actor_learner, pbt",
    )
    args = parser.parse_args(argv)
    if args.markdown in SECTIONS and args.markdown:
        print(section_table(args.markdown, SECTIONS[args.markdown]))
        return 0
    if args.markdown is not None:
        from ding_dist.policy import Policy, get_policy_cls

        keys = get_policy_cls(args.markdown).keys if args.markdown else Policy.keys
        schema = {"policy": keys.defaults()}
        print(markdown_table(describe(schema, schema, args.markdown or None, keys), strip="policy.", rules=True))
        return 0
    if args.write is not None:
        for page in args.write or DOC_PAGES:
            print(f"{page}: " + ("tables rewritten" if write_docs(page) else "already current"))
        return 0
    stale = [page for page in args.check or DOC_PAGES if render_docs(Path(page).read_text()) != Path(page).read_text()]
    for page in stale:
        print(f"{page} is stale: python -m ding_dist.config.describe --write {page}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
