"""Parallel corpora (see the README's layout). Nothing is imported here: ``nmt.data.normalize`` stays light."""
