"""The packaged corpus (``tatoeba/``, see README.md), installed as the package ``nmt.data.packaged`` (pyproject.toml
maps this folder into it, in the wheel and in an editable install alike); ``nmt/data/tatoeba.py`` reads it."""
