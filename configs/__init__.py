"""The Hydra config tree, installed as the package ``nmt.configs`` (pyproject.toml maps this folder into it, in the
wheel and in an editable install alike), so ``hydra.main(config_path="pkg://nmt.configs")`` finds it however
training starts (``python -m nmt.train``, the ``nmt-train`` console script, or an import) and wherever it runs."""
