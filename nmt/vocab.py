"""Special token ids, the same on both sides: what the model needs to know of the vocabulary."""

PAD, UNK, BOS, EOS = 0, 1, 2, 3
