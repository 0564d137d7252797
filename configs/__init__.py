"""The shipped configs, one ``<env>_<algo>_config.py`` each; installed as the package ``ding_dist.configs``
(setup.py maps this folder there), so ``ding-dist train cartpole_ppo`` finds them from any folder."""
