"""The policy registry: each policy file registers its class, the package finds its files itself."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

import ding_dist.policy as policy_pkg
from ding_dist.policy import POLICY_REGISTRY, DQNPolicy, Policy, get_policy_cls, register_policy
from ding_dist.policy.q_learning import QLearningPolicy
from ding_dist.policy.registry import import_modules


def _policy_classes_defined_in_the_package() -> dict[str, type]:
    found = {}
    for info in pkgutil.iter_modules(policy_pkg.__path__):
        module = importlib.import_module(f"ding_dist.policy.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Policy) and obj.__module__ == module.__name__:
                found[f"{module.__name__}.{obj.__qualname__}"] = obj
    return found


def test_every_concrete_policy_class_of_the_package_is_registered():
    """A policy file whose class lacks ``@register_policy`` fails here (abstract bases need none)."""
    registered = set(POLICY_REGISTRY.values())
    concrete = {k: c for k, c in _policy_classes_defined_in_the_package().items() if not inspect.isabstract(c)}
    assert len(concrete) == 24
    assert sorted(k for k, c in concrete.items() if c not in registered) == []
    assert {k for k, c in _policy_classes_defined_in_the_package().items() if inspect.isabstract(c)} == {
        "ding_dist.policy.base.Policy",
        "ding_dist.policy.q_learning.QLearningPolicy",
    }


def test_the_registry_holds_dienginess_type_names_and_the_package_exports_each_class():
    assert sorted(POLICY_REGISTRY) == [
        "a2c", "acer", "bdq", "c51", "d4pg", "ddpg", "discrete_sac", "dqn", "fqf", "impala", "iqn", "mdqn", "pg",
        "ppg_offpolicy", "ppo", "ppo_offpolicy", "ppo_pg", "qrdqn", "r2d2", "rainbow", "sac", "sac_discrete", "sql",
        "sqn", "td3",
    ]  # fmt: skip
    assert POLICY_REGISTRY["sac_discrete"] is POLICY_REGISTRY["discrete_sac"]  # an alias, one class
    for cls in POLICY_REGISTRY.values():
        assert getattr(policy_pkg, cls.__name__) is cls and cls.__name__ in policy_pkg.__all__
    assert issubclass(DQNPolicy, QLearningPolicy)


def test_a_new_policy_file_is_found_and_registered_by_its_decorator(tmp_path, monkeypatch):
    pkg = tmp_path / "my_policies"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_private.py").write_text("raise RuntimeError('a private module is not imported')\n")
    (pkg / "double_dqn_copy.py").write_text(
        "from ding_dist.policy import DQNPolicy, register_policy\n\n\n"
        "@register_policy('test_copy_dqn', aliases=('test_copy_dqn_alias',))\n"
        "class CopyDQNPolicy(DQNPolicy):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert import_modules([str(pkg)], "my_policies") == ["double_dqn_copy"]
        cls = get_policy_cls("test_copy_dqn")
        assert cls.__name__ == "CopyDQNPolicy" and get_policy_cls("test_copy_dqn_alias") is cls
        assert register_policy("test_copy_dqn", cls) is not None  # the same class again: a no-op
        assert get_policy_cls("test_copy_dqn") is cls
    finally:
        for name in ("test_copy_dqn", "test_copy_dqn_alias"):
            POLICY_REGISTRY.pop(name, None)
        for name in [m for m in sys.modules if m.startswith("my_policies")]:
            del sys.modules[name]


def test_bad_registrations_say_what_is_wrong():
    with pytest.raises(ValueError, match=r"'dqnn'.*registered"):
        get_policy_cls("dqnn")
    with pytest.raises(TypeError, match="subclass"):
        register_policy("bad", object)
    with pytest.raises(TypeError, match=r"QLearningPolicy is abstract \(it does not define learn\)"):
        register_policy("bad", QLearningPolicy)

    class OtherDQN(DQNPolicy):
        pass

    with pytest.raises(ValueError, match=r"policy type 'dqn' is already ding_dist\.policy\.dqn\.DQNPolicy"):
        register_policy("dqn")(OtherDQN)
    with pytest.raises(ValueError, match="non-empty string"):
        register_policy("", OtherDQN)
    assert get_policy_cls("dqn") is DQNPolicy and "bad" not in POLICY_REGISTRY


_ONE_POLICY = """
import sys
from ding_dist.policy import get_policy_cls
print(get_policy_cls({name!r}).__name__)
print(sorted(m.rpartition(".")[2] for m in sys.modules if m.startswith("ding_dist.policy.")))
"""


@pytest.mark.parametrize(("name", "cls"), [("ppo", "PPOPolicy"), ("sac_discrete", "DiscreteSACPolicy")])
def test_a_run_imports_the_policy_it_names_and_no_other(name, cls):
    """``get_policy_cls`` imports the module named like the type; an alias or another module's type imports them all."""
    code = _ONE_POLICY.format(name=name)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    found, modules = out.splitlines()
    assert found == cls
    others = {c.__module__.rpartition(".")[2] for c in POLICY_REGISTRY.values()} - {"ppo"}
    imported = set(ast.literal_eval(modules))
    assert "ppo" in imported
    assert (imported & others == set()) if name == "ppo" else others <= imported


def test_a_name_held_by_a_policy_not_yet_imported_is_still_taken():
    code = (
        "from ding_dist.policy.base import Policy\nfrom ding_dist.policy.registry import register_policy\n"
        "class Mine(Policy):\n    def learn(self, *a): pass\n    def collect_action(self, *a): pass\n"
        "    def eval_action(self, *a): pass\n"
        "try:\n    register_policy('sac')(Mine)\nexcept ValueError as e:\n    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == ("policy type 'sac' is already ding_dist.policy.sac.SACPolicy; pick another name"), (
        done.stderr
    )
