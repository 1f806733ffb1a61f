"""The YAML config tree, a package so that Hydra finds it however nmt.train starts (``python -m nmt.train``, the
``nmt-train`` console script, or an import)."""
