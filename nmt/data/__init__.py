"""Parallel corpora, from a source to the piece ids training reads; the modules mirror ``configs/data/``.

- ``tatoeba``, ``hsk``, ``files``, ``hub``: one module per ``data.source``, each giving a
  ``datasets.DatasetDict`` of ``src``/``tgt`` text columns.
- ``corpus``: the source by config, then ``clean`` (normalization from ``normalize``, filters with
  counted reasons, deduplication); evaluation and scripts read held-out splits through it.
- ``prepare``: the one pipeline for training and the benchmarks: the cleaned corpus, sentencepiece,
  the encoded train split, cached on disk (``cache``).
- ``text``: reading UTF-8 text files with errors that name the file and line.

Nothing is imported here, so that ``nmt.data.normalize`` stays light for the ONNX runtime.
"""
