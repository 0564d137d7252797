"""Synchronization algorithms: one file each, all behind one narrow interface.

An algorithm is an :class:`Algorithm` record exported as ``ALGORITHMS`` by a module in this
package (found automatically: adding an algorithm means adding a file). Its parts:

- ``make_state(link, **options) -> state``: builds the per-algorithm state, one small object with
  ``__slots__`` (process group link, step counter, error-feedback residuals, ...).
- ``hook(state, bucket) -> BucketStage``: in the style of torch DDP communication hooks. Called
  when a bucket's gradients are ready (from a backward hook, in bucket order on every rank); it
  starts the bucket's communication and returns a :class:`~ding_dist.sync.bucket.BucketStage` whose
  ``wait()`` leaves in ``bucket.grads`` the average over the ranks that produced each gradient
  and returns the per-parameter producer counts. ``None`` for algorithms that leave gradients
  local.
- ``step_hook(state, buckets)``: optional, called after every ``optimizer.step()``; algorithms
  that average weights instead of gradients (decentralized, asynchronous) live here.
- ``forward_hook(state, buckets)``: optional, called when a training forward starts (grad enabled),
  e.g. to send the pre-update weights so the transfer overlaps forward and backward.
- ``backward_end_hook(state, buckets)``: optional, called once at the end of each backward pass, for
  algorithms without a gradient ``hook`` (the engine queues it on the autograd engine).
- ``pre_step_hook(state, buckets)``: optional, called before every ``optimizer.step()`` (e.g. to put
  the mixed weights in place, so the step applies the gradient to them).
- ``close(state)``: optional, called when the model stops synchronizing (``close()``, ``switch_to``)
  to stop threads and pending transfers; ``abort(state)`` / ``resume(state)`` pause and restart
  background communication (``model.abort()`` / ``model.resume()``).
- ``averages_weights``: True when ranks' weights may differ between averagings (the pipeline then
  evaluates and saves rank 0's model and logs the drift between ranks).
- ``check_optimizers(state, optimizers)``: optional validation/binding of the optimizer(s).
- ``on_skip(state)``: optional, called on every rank when the engine drops a step whose synchronized
  gradient is non-finite, so the algorithm can forget what that step left behind (bytegrad's
  error-feedback residuals).
- ``optimizer``: optional, the optimizer class the algorithm needs in place of Adam (qadam's
  :class:`~ding_dist.sync.QAdamOptimizer`); a policy builds it with Adam's arguments plus the
  ``optimizer_options`` found in ``policy.sync.options`` (those options go to the optimizer, not to
  ``make_state``).

Non-finite values: a ``hook`` must leave a NaN/inf in ``bucket.grads`` when any rank's input held one
(a SUM does; codecs that clamp or quantize must keep such values non-finite). The engine's skip of
non-finite steps reads the synchronized gradient and relies on this, so it needs no extra collective.
"""

from __future__ import annotations

import enum
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Algorithm",
    "DistributedAlgorithm",
    "available_algorithms",
    "get_algorithm",
    "register_algorithm",
]


@dataclass(frozen=True)
class Algorithm:
    """Description of one synchronization algorithm (see the package docstring).

    Example:
        >>> algo = get_algorithm("gradient_allreduce")
        >>> algo.name
        'gradient_allreduce'
    """

    name: str
    make_state: Callable[..., Any]
    hook: Callable[[Any, Any], Any] | None = None
    step_hook: Callable[[Any, list[Any]], None] | None = None
    check_optimizers: Callable[[Any, list[Any]], None] | None = None
    on_skip: Callable[[Any], None] | None = None
    forward_hook: Callable[[Any, list[Any]], None] | None = None
    backward_end_hook: Callable[[Any, list[Any]], None] | None = None
    pre_step_hook: Callable[[Any, list[Any]], None] | None = None
    close: Callable[[Any], None] | None = None
    abort: Callable[[Any], None] | None = None
    resume: Callable[[Any], None] | None = None
    averages_weights: bool = False
    options: tuple[str, ...] = field(default_factory=tuple)
    aliases: tuple[str, ...] = field(default_factory=tuple)
    optimizer: Callable[..., Any] | None = None
    optimizer_options: tuple[str, ...] = field(default_factory=tuple)


class DistributedAlgorithm(str, enum.Enum):
    """Bagua's algorithm names, mapped onto ours (``DistributedAlgorithm('quantize')`` works).

    Example:
        >>> get_algorithm(DistributedAlgorithm.QuantizeAllReduce).name
        'bytegrad'
    """

    GradientAllReduce = "allreduce"
    ScatterGatherAllReduce = "sg-allreduce"
    Decentralize = "decentralize"
    QuantizeAllReduce = "quantize"

    @staticmethod
    def from_str(val: str) -> DistributedAlgorithm:
        """Parse a Bagua algorithm string such as ``'sg-allreduce'``."""
        return DistributedAlgorithm(val.lower())


_BAGUA_NAMES = {
    DistributedAlgorithm.GradientAllReduce: "gradient_allreduce",
    DistributedAlgorithm.ScatterGatherAllReduce: "sg_allreduce",
    DistributedAlgorithm.Decentralize: "decentralized",
    DistributedAlgorithm.QuantizeAllReduce: "bytegrad",
}

_REGISTRY: dict[str, Algorithm] = {}
_ALIASES: dict[str, str] = {}
_discovered = False


def register_algorithm(algorithm: Algorithm) -> Algorithm:
    """Add ``algorithm`` to the registry (its name and aliases must be new).

    Example:
        >>> register_algorithm(Algorithm("my_noop", make_state=lambda link: None))  # doctest: +SKIP
    """
    _discover()
    for key in (algorithm.name, *algorithm.aliases):
        if key in _REGISTRY or key in _ALIASES:
            raise ValueError(f"algorithm name {key!r} is already registered")
    _REGISTRY[algorithm.name] = algorithm
    for alias in algorithm.aliases:
        _ALIASES[alias] = algorithm.name
    return algorithm


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for algo in getattr(module, "ALGORITHMS", ()):
            register_algorithm(algo)


def available_algorithms() -> list[str]:
    """Names of all registered algorithms, sorted.

    Example:
        >>> "bytegrad" in available_algorithms()
        True
    """
    _discover()
    return sorted(_REGISTRY)


def get_algorithm(name: str | DistributedAlgorithm | Algorithm) -> Algorithm:
    """Look an algorithm up by name, alias or Bagua enum value.

    Example:
        >>> get_algorithm("allreduce").name
        'gradient_allreduce'
    """
    _discover()
    if isinstance(name, Algorithm):
        return name
    if isinstance(name, DistributedAlgorithm):
        return _REGISTRY[_BAGUA_NAMES[name]]
    if not isinstance(name, str):
        raise TypeError(f"algorithm must be a name (str), got {type(name).__name__}")
    key = name.lower()
    try:
        key = _BAGUA_NAMES[DistributedAlgorithm(key)]
    except ValueError:
        pass
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        valid = ", ".join(available_algorithms())
        bagua = ", ".join(a.value for a in DistributedAlgorithm)
        raise ValueError(f"unknown algorithm {name!r}; valid names: {valid} (Bagua names: {bagua})")
    return _REGISTRY[key]
