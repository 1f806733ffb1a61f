"""Parallel corpora: a module per ``data.source`` (``tatoeba``, ``hsk``, ``files``, ``hub``), ``corpus`` and
``clean`` for cleaned splits, ``prepare`` for training's cached, encoded corpus. Nothing is imported here,
so that ``nmt.data.normalize`` stays light for the ONNX runtime.
"""
