"""scripts/swap_search.py: our bench_small's weights and Eole's bench-small's are one model under two sets of names."""

import copy

import pytest
import torch

from nmt.batching import make_batch
from nmt.config import ModelConfig
from nmt.model import build_model
from nmt.search import greedy
from scripts import swap_search

EOLE_CONFIG = {"model": {"architecture": "custom", "input_feed": 1, "share_embeddings": False, "generator_function": "softmax",
                         "share_decoder_embeddings": False,
                         "embeddings": {"src_word_vec_size": 16, "tgt_word_vec_size": 16},
                         "encoder": {"encoder_type": "brnn", "rnn_type": "LSTM", "layers": 2, "hidden_size": 16, "bridge": False},
                         "decoder": {"decoder_type": "rnn", "rnn_type": "LSTM", "layers": 2, "hidden_size": 16,
                                     "global_attention": "general", "global_attention_function": "softmax",
                                     "coverage_attn": False, "context_gate": None}}}


def tiny():
    cfg = swap_search.eole_model_config(EOLE_CONFIG)
    torch.manual_seed(0)
    return cfg, build_model(cfg, 30, 40).eval()


def test_eole_names_round_trip_and_match_eoles_layout():
    cfg, model = tiny()
    state = model.state_dict()
    eole = swap_search.ours_to_eole(state)
    assert eole["decoder.rnn.layers.1.weight_ih"].shape == (64, 16)  # StackedLSTM's LSTMCells, no input feed above layer 0
    assert eole["encoder.rnn.weight_hh_l1_reverse"].shape == (32, 8)  # one 2-layer nn.LSTM, 8 units a direction
    assert eole["src_emb.embeddings.weight"].shape == (30, 16) and eole["generator.bias"].shape == (40,)
    # Eole's <unk> is row 0 and <blank> row 1, ours <pad> 0 and <unk> 1
    assert torch.equal(eole["generator.weight"][0], state["decoder.out.weight"][1])
    assert torch.equal(eole["decoder.attn.linear_in.weight"], state["decoder.attention.W_a.weight"].t())
    back = swap_search.eole_to_ours(eole)
    assert back.keys() == state.keys() and all(torch.equal(back[k], state[k]) for k in state)


def test_eoles_general_score_is_ours_with_w_a_transposed():
    """Eole scores (W_in h_t)·h̄_s; ours h_t·(W_a h̄_s): the same number when W_a = W_inᵀ."""
    _, model = tiny()
    w_in = swap_search.ours_to_eole(model.state_dict())["decoder.attn.linear_in.weight"]
    h_t, h_s = torch.randn(3, 16), torch.randn(3, 16)
    ours = (h_t * model.decoder.attention.W_a(h_s)).sum(-1)
    eole = ((h_t @ w_in.t()) * h_s).sum(-1)
    assert torch.allclose(ours, eole, atol=1e-6)


def test_a_model_moved_to_eoles_names_and_back_decodes_the_same():
    cfg, model = tiny()
    again = build_model(cfg, 30, 40).eval()
    again.load_state_dict(swap_search.eole_to_ours(swap_search.ours_to_eole(model.state_dict())))
    batch = make_batch([[5, 6, 7, 8], [9, 10]], None, [0, 1])
    assert greedy(model, batch).tokens == greedy(again, batch).tokens


@pytest.mark.parametrize("key, value", [("decoder.global_attention", "dot"), ("encoder.encoder_type", "rnn"),
                                        ("decoder.context_gate", "both")])
def test_an_eole_model_unlike_ours_is_refused_by_key(key, value):
    config = copy.deepcopy(EOLE_CONFIG)
    part, name = key.split(".")
    config["model"][part][name] = value
    with pytest.raises(ValueError, match=f"x.json: model.{key} is '{value}'"):
        swap_search.eole_model_config(config, "x.json")


def test_same_model_compares_what_builds_the_parameters():
    cfg, _ = tiny()
    assert swap_search.same_model(cfg, copy.deepcopy(cfg))
    other = copy.deepcopy(cfg)
    other.attention.score = "dot"
    assert not swap_search.same_model(cfg, other)
    assert not swap_search.same_model(cfg, ModelConfig())
