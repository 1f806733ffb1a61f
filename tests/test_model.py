"""Encoder, decoder and Seq2Seq wiring across RNN types, input feeding, directions and depths."""

from __future__ import annotations

import itertools

import pytest
import torch
from omegaconf import OmegaConf

from nmt.batching import make_batch
from nmt.build import build_model
from nmt.config import ConfigError, ModelConfig
from nmt.tokenizer import BOS

SRC_V, TGT_V = 23, 19


@pytest.fixture
def batch(random_sources):
    src = random_sources(4, 2, 9, SRC_V, seed=11)
    src[1] = src[1][:2]  # make sure lengths are mixed and one is short
    tgt = random_sources(4, 1, 7, TGT_V, seed=12)
    return make_batch(src, tgt, range(4))


def forward(model, b, keep_attention=True):
    return model(b.src, b.src_lens, b.host_lens, b.tgt_in, keep_attention=keep_attention)


@pytest.mark.parametrize(
    "rnn_type,input_feeding,bidirectional,layers",
    list(itertools.product(["lstm", "gru"], [True, False], [True, False], [(1, 1), (2, 1), (1, 2)])),
)
def test_shapes_and_attention_for_every_wiring(make_model, batch, rnn_type, input_feeding, bidirectional, layers):
    """Logits (B, T, V) and attention (B, T, S) that is a distribution over real source tokens."""
    model = make_model(SRC_V, TGT_V, rnn_type=rnn_type, input_feeding=input_feeding, bidirectional=bidirectional,
                       encoder_layers=layers[0], decoder_layers=layers[1])
    logits, weights = forward(model, batch)
    B, T = batch.tgt_in.shape
    S = batch.src.size(1)
    assert logits.shape == (B, T, TGT_V) and torch.isfinite(logits).all()
    assert weights.shape == (B, T, S)
    pad = batch.src == 0
    assert (weights.masked_select(pad.unsqueeze(1).expand(B, T, S)) == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, T))
    source, state = model.encode(batch.src, batch.src_lens, batch.host_lens)
    h = state[0] if rnn_type == "lstm" else state
    assert h.shape == (layers[1], B, 16)
    assert forward(model, batch, keep_attention=False)[1] is None


@pytest.mark.parametrize("rnn_type,bidirectional", [("lstm", True), ("gru", True), ("lstm", False)])
def test_encoder_memory_is_zero_at_padding_and_final_state_concatenates_directions(make_model, batch, rnn_type,
                                                                                   bidirectional):
    model = make_model(SRC_V, TGT_V, rnn_type=rnn_type, bidirectional=bidirectional, encoder_layers=2)
    memory, final = model.encoder(batch.src, batch.host_lens)
    assert memory.shape == (*batch.src.shape, 16)
    assert (memory[batch.src == 0] == 0).all()
    h = final[0] if rnn_type == "lstm" else final
    assert h.shape == (2, batch.size, 16)
    # the top layer's forward half is the forward RNN output at each sentence's last token
    last = memory[torch.arange(batch.size), batch.src_lens - 1]
    half = 8 if bidirectional else 16
    torch.testing.assert_close(h[-1, :, :half], last[:, :half])
    if bidirectional:  # the backward half is its output at the first token
        torch.testing.assert_close(h[-1, :, half:], memory[:, 0, half:])


@pytest.mark.parametrize("mode", ["global", "local_m", "local_p"])
@pytest.mark.parametrize("input_feeding", [True, False])
def test_padding_does_not_change_a_sentence(make_model, batch, mode, input_feeding):
    """A sentence's logits are the same alone and inside a padded batch of longer sentences."""
    model = make_model(SRC_V, TGT_V, mode=mode, window=2, input_feeding=input_feeding, rnn_type="gru")
    logits, _ = forward(model, batch)
    for i in range(batch.size):
        n_src, n_tgt = int(batch.src_lens[i]), int((batch.tgt_out[i] != 0).sum())
        alone = make_batch([batch.src[i, :n_src].tolist()], [batch.tgt_out[i, : n_tgt - 1].tolist()], [0])
        single, _ = forward(model, alone)
        torch.testing.assert_close(logits[i, :n_tgt], single[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["global", "local_m", "local_p"])
@pytest.mark.parametrize("input_feeding", [True, False])
@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
def test_step_by_step_decoding_matches_teacher_forcing(make_model, batch, mode, input_feeding, rnn_type):
    """``decoder.step`` (used by search) reproduces the teacher-forced pass (used by training)."""
    model = make_model(SRC_V, TGT_V, mode=mode, window=2, input_feeding=input_feeding, rnn_type=rnn_type,
                       decoder_layers=2)
    logits, weights = forward(model, batch)
    source, state = model.encode(batch.src, batch.src_lens, batch.host_lens)
    feed = source.memory.new_zeros(batch.size, 1, 16)
    for t in range(batch.tgt_in.size(1)):
        logp, feed, state, a, p = model.decoder.step(batch.tgt_in[:, t], feed, state, source, torch.tensor([float(t)]))
        torch.testing.assert_close(logp, torch.log_softmax(logits[:, t], -1), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(a[:, 0], weights[:, t], atol=1e-6, rtol=1e-5)
        assert (p is None) == (mode == "global")
    assert (batch.tgt_in[:, 0] == BOS).all()


@pytest.mark.parametrize("mode", ["global", "local_m", "local_p"])
@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_every_parameter_gets_a_gradient(make_model, batch, mode, score):
    model = make_model(SRC_V, TGT_V, mode=mode, score=score, window=2, train=True)
    logits, _ = forward(model, batch, keep_attention=False)
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=0).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing


def test_build_model_initialisation_and_checks(make_model):
    """Parameters start uniform in ±0.1; an odd size cannot be split over two directions."""
    model = make_model(SRC_V, TGT_V, mode="local_p")
    for name, p in model.named_parameters():
        assert p.abs().max() <= 0.1, name
    cfg = OmegaConf.structured(ModelConfig(hidden_size=15, bidirectional=True))
    with pytest.raises(ConfigError, match="hidden_size"):
        build_model(cfg, SRC_V, TGT_V)
    cfg.bidirectional = False
    assert build_model(cfg, SRC_V, TGT_V).encoder.output_size == 15


def test_seeded_build_is_deterministic(make_model, batch):
    a, b = make_model(SRC_V, TGT_V, seed=3), make_model(SRC_V, TGT_V, seed=3)
    assert torch.equal(forward(a, batch)[0], forward(b, batch)[0])
    assert not torch.equal(forward(a, batch)[0], forward(make_model(SRC_V, TGT_V, seed=4), batch)[0])


@pytest.mark.parametrize("rnn_type,bidirectional", [("lstm", True), ("lstm", False), ("gru", True)])
def test_stacked_encoder_equals_one_multilayer_rnn_and_loads_its_weights(rnn_type, bidirectional):
    """The encoder's separate layers compute what one ``nn.LSTM(layers=3)`` computes (the reference, and the
    layout of checkpoints written before the split): its weights load into them, with the same memory and
    final states; in training the layers' dropout masks come from torch's RNG, so a seed repeats them."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    from nmt.encoder import RNNS, Encoder

    torch.manual_seed(0)
    enc = Encoder(SRC_V, 8, 12, 3, bidirectional, rnn_type, dropout=0.3).eval()
    ref = RNNS[rnn_type](8, 12 // enc.dirs, 3, batch_first=True, bidirectional=bidirectional)
    state = {k: v for k, v in enc.state_dict().items() if not k.startswith("rnn.")}
    state.update({f"rnn.{k}": v for k, v in ref.state_dict().items()})  # an old checkpoint's keys
    enc.load_state_dict(state)
    src = torch.tensor([[3, 4, 5, 6, 7, 8], [9, 10, 11, 0, 0, 0]])  # (batch, src_len), PAD = 0
    lens = torch.tensor([6, 3])
    memory, final = enc(src, lens)
    packed = pack_padded_sequence(enc.embed(src), lens, batch_first=True, enforce_sorted=False)
    out, ref_final = ref(packed)
    ref_memory = pad_packed_sequence(out, batch_first=True, total_length=6)[0]
    torch.testing.assert_close(memory, ref_memory)
    finals = final if isinstance(final, tuple) else (final,)
    ref_finals = ref_final if isinstance(ref_final, tuple) else (ref_final,)
    for got, want in zip(finals, ref_finals):
        torch.testing.assert_close(got, enc._merge(want))
    enc.train()
    torch.manual_seed(5)
    a = enc(src, lens)[0]
    torch.manual_seed(5)
    assert torch.equal(a, enc(src, lens)[0]) and not torch.equal(a, enc(src, lens)[0])
