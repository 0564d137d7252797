"""The command that installs one of ding_dist's extras, right for how ding_dist itself was installed.

An editable install from a checkout (``pip install -e .``) gets ``pip install -e "<checkout>[render]"``; a wheel or a
``pip install .`` (no checkout to point at) gets the extra's own requirements, ``pip install "pygame>=2.1"
"moviepy>=1.0"``, read from the installed metadata. Every argument is quoted, so no shell expands ``[...]`` or ``>=``.

Example:
    >>> install_hint("wandb").startswith("pip install ")
    True
"""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["install_hint"]

_CHECKOUT = Path(__file__).resolve().parents[2]  # the source tree, when ding_dist runs from one uninstalled


def _editable_checkout(dist: metadata.Distribution) -> Path | None:
    """The folder an editable install points at (PEP 610's ``direct_url.json``), else None."""
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return None
    url = direct.get("url", "")
    if not (direct.get("dir_info") or {}).get("editable") or not url.startswith("file://"):
        return None
    return Path(unquote(urlparse(url).path))


def _requirements(dist: metadata.Distribution, extra: str) -> list[str]:
    """The requirements ``extra`` adds, without their markers (``['pygame>=2.1', 'moviepy>=1.0']``)."""
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    found = []
    for line in dist.requires or []:
        requirement, _, condition = line.partition(";")
        if marker.search(condition):
            found.append(requirement.strip())
    return found


def install_hint(extra: str, dist: metadata.Distribution | None = None) -> str:
    """``pip install ...`` for ding_dist's ``extra`` (``"render"``, ``"wandb"``, ...), for the installed ``dist``
    (default: ding_dist's own distribution; none: the source tree this module lies in).

    Example:
        >>> install_hint("render")  # doctest: +SKIP
        'pip install -e "/home/me/ding_dist[render]"'
        >>> install_hint("render")  # doctest: +SKIP
        'pip install "pygame>=2.1" "moviepy>=1.0"'
    """
    if dist is None:
        try:
            dist = metadata.distribution("ding_dist")
        except metadata.PackageNotFoundError:
            return f'pip install -e "{_CHECKOUT}[{extra}]"'
    checkout = _editable_checkout(dist)
    if checkout is not None:
        return f'pip install -e "{checkout}[{extra}]"'
    requirements = _requirements(dist, extra)
    if not requirements:
        raise ValueError(f"ding_dist has no extra {extra!r}")
    return "pip install " + " ".join(f'"{r}"' for r in requirements)
