"""Self-contained checkpoints: atomic save, safe load, clear errors, and exact model round-trips."""

from __future__ import annotations

import os

import pytest
import torch
from omegaconf import OmegaConf

import nmt.checkpoint as ckpt_mod
from nmt.batching import make_batch
from nmt.build import build_model
from nmt.checkpoint import CheckpointError, load, load_model, resolve, save
from nmt.config import to_dict


class NotATensor:
    """Pickled by reference: a weights_only load must refuse it."""


@pytest.fixture(scope="module")
def saved(hsk_cfg, hsk_tokenizer, tmp_path_factory):
    """A tiny model with the session tokenizer, saved as <run>/checkpoints/best.pt."""
    cfg = OmegaConf.merge(hsk_cfg, {"model": {"emb_size": 16, "hidden_size": 16, "encoder_layers": 1,
                                              "decoder_layers": 2, "attention": {"mode": "local_p"}}})
    torch.manual_seed(0)
    model = build_model(cfg.model, hsk_tokenizer.src_vocab_size, hsk_tokenizer.tgt_vocab_size).eval()
    state = {"model": model.state_dict(), "config": to_dict(cfg), "tokenizer": hsk_tokenizer.to_state(), "step": 7}
    run = tmp_path_factory.mktemp("ckpt_run")
    save(state, run / "checkpoints" / "best.pt")
    return run, model, cfg, state


def some_batch(tok):
    src = tok.encode_src(["老师，您好！", "图书馆在学校里边。"])
    tgt = tok.encode_tgt(["Hello, teacher!", "The library is inside the school."])
    return make_batch(src, tgt, range(2))


def test_round_trip_gives_the_same_model(saved, hsk_tokenizer):
    """load_model rebuilds the model (eval mode), tokenizer and config; logits are identical."""
    run, model, cfg, state = saved
    loaded, tok, cfg2, raw = load_model(run)
    assert not loaded.training
    assert tok.to_state() == hsk_tokenizer.to_state()
    assert OmegaConf.to_container(cfg2) == OmegaConf.to_container(cfg)
    assert raw["step"] == 7 and raw["format"] == ckpt_mod.FORMAT
    b = some_batch(hsk_tokenizer)
    with torch.no_grad():
        expected, _ = model(b.src, b.src_lens, b.host_lens, b.tgt_in)
        got, _ = loaded(b.src, b.src_lens, b.host_lens, b.tgt_in)
    assert torch.equal(expected, got)


def test_save_leaves_only_the_final_file(saved):
    run, *_ = saved
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best.pt"]


def test_resolve_run_dir_and_files(tmp_path, saved):
    """A run directory resolves to checkpoints/best.pt, else last.pt; files resolve to themselves."""
    run, *_ = saved
    assert resolve(run) == run / "checkpoints" / "best.pt"
    assert resolve(str(run / "checkpoints" / "best.pt")) == run / "checkpoints" / "best.pt"
    only_last = tmp_path / "r"
    (only_last / "checkpoints").mkdir(parents=True)
    (only_last / "checkpoints" / "last.pt").write_bytes((run / "checkpoints" / "best.pt").read_bytes())
    assert resolve(only_last) == only_last / "checkpoints" / "last.pt"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointError, match="holds no"):
        resolve(empty)
    with pytest.raises(CheckpointError, match="does not exist"):
        load(tmp_path / "missing.pt")


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_damaged_files_raise_a_clear_error(tmp_path, saved, damage):
    run, *_ = saved
    good = (run / "checkpoints" / "best.pt").read_bytes()
    bad = tmp_path / "bad.pt"
    bad.write_bytes({"truncated": good[: len(good) // 2], "garbage": os.urandom(4096), "empty": b""}[damage])
    with pytest.raises(CheckpointError, match="corrupt or truncated") as e:
        load_model(bad)
    assert str(bad) in str(e.value) and "\n" not in str(e.value)


def test_foreign_files_are_refused(tmp_path, saved):
    """A torch file that is not ours names the missing keys; pickled objects are never executed."""
    _, _, _, state = saved
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, other)
    with pytest.raises(CheckpointError, match="not an nmt checkpoint.*model, config, tokenizer, format"):
        load(other)
    evil = tmp_path / "evil.pt"
    torch.save({**state, "format": 1, "payload": NotATensor()}, evil)
    with pytest.raises(CheckpointError):
        load(evil)


def test_weights_that_do_not_fit_the_config(tmp_path, saved):
    _, _, _, state = saved
    cfg = dict(state["config"])
    cfg["model"] = {**cfg["model"], "hidden_size": 32}
    path = tmp_path / "mismatch.pt"
    save({**state, "config": cfg}, path)
    with pytest.raises(CheckpointError, match="do not fit"):
        load_model(path)


def failing_torch_save(monkeypatch):
    """torch.save that writes half a file and then fails, like a full disk."""
    real = torch.save

    def half_then_fail(obj, f, *a, **k):
        real(obj, f, *a, **k)
        f.truncate(max(f.tell() // 2, 1))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt_mod.torch, "save", half_then_fail)


def test_failed_save_keeps_the_previous_checkpoint(tmp_path, saved, monkeypatch):
    """Saving is atomic: a save that fails midway leaves the old file intact and loadable."""
    run, _, _, state = saved
    path = tmp_path / "checkpoints" / "best.pt"
    save(state, path)
    before = path.read_bytes()
    failing_torch_save(monkeypatch)
    with pytest.raises(OSError):
        save({**state, "step": 8}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert load(path)["step"] == 7


def test_failed_save_cleans_up_its_temporary_file(tmp_path, saved, monkeypatch):
    """A failed save must not leave its half-written temp file behind (on a full disk that file is
    what keeps the disk full, and one more accumulates in checkpoints/ with every process that fails)."""
    _, _, _, state = saved
    path = tmp_path / "checkpoints" / "last.pt"
    save(state, path)
    failing_torch_save(monkeypatch)
    with pytest.raises(OSError):
        save(state, path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.pt"]


def test_average_of_two_different_checkpoints_is_their_mean(tmp_path, saved):
    """nmt.average: every weight of the average of two different checkpoints is the mean of theirs; the first
    one's config and tokenizer come along, its optimizer does not."""
    from nmt.average import average

    run, _, _, state = saved
    torch.manual_seed(1)
    other = {**state, "model": {k: v + torch.randn_like(v) if v.is_floating_point() else v
                                for k, v in state["model"].items()}, "optimizer": {"x": 1}}
    save(other, tmp_path / "other.pt")
    avg = average([run / "checkpoints" / "best.pt", tmp_path / "other.pt"])
    assert avg["model"].keys() == state["model"].keys()
    changed = 0
    for k, v in state["model"].items():
        if v.is_floating_point():
            torch.testing.assert_close(avg["model"][k], (v + other["model"][k]) / 2)
            changed += int(not torch.equal(avg["model"][k], v))
    assert changed > 0
    assert avg["tokenizer"] == state["tokenizer"] and avg["config"] == state["config"]
    assert "optimizer" not in avg
