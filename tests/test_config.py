"""The typed config schema, ``validate``, the YAML tree under configs/ and checkpoint round-trips."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

from nmt.config import ConfigError, TrainConfig, from_dict, register, to_dict
from nmt.config_check import validate

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def composed(*overrides: str):
    """configs/train.yaml composed by Hydra, exactly as ``python -m nmt.train`` does."""
    register()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose("train", overrides=list(overrides))


def structured(**updates):
    cfg = OmegaConf.structured(TrainConfig)
    cfg.trainer.max_steps = 10  # a run needs a budget
    for key, value in updates.items():
        OmegaConf.update(cfg, key.replace("__", "."), value)
    return cfg


def test_yaml_defaults_compose_and_validate():
    """The YAML defaults compose against the schema (general/global attention) and ask for a budget: no default
    clock cuts short a run given only steps or epochs, and a run with no limit at all is refused in one line."""
    cfg = composed()
    assert (cfg.data.source, cfg.data.opencc) == ("tatoeba", "t2s")
    assert (cfg.model.attention.score, cfg.model.attention.mode) == ("general", "global")
    assert (cfg.trainer.max_steps, cfg.trainer.max_epochs, cfg.trainer.max_minutes) == (0, 0, 0)
    with pytest.raises(ConfigError, match=r"set at least one of trainer.max_steps.*\+experiment=zh_en_local_p"):
        validate(cfg)
    for limit in ("max_steps=200000", "max_epochs=3", "max_minutes=60"):
        cfg = composed(f"trainer.{limit}")
        validate(cfg)
        assert sum(bool(cfg.trainer[k]) for k in ("max_steps", "max_epochs", "max_minutes")) == 1  # that one alone


GROUPS = sorted(p for p in CONFIGS.rglob("*.yaml") if p.parent.name != "experiment" and p.name != "train.yaml")


@pytest.mark.parametrize("path", GROUPS, ids=lambda p: str(p.relative_to(CONFIGS)))
def test_group_files_hold_choices_not_defaults(path):
    """Defaults live in one place, the schema: a group file sets only what its choice changes, so the two
    cannot disagree (they once did: max_minutes 0 in the schema, 60 in the YAML)."""
    schema = OmegaConf.to_container(OmegaConf.structured(TrainConfig))
    section = schema[path.relative_to(CONFIGS).parts[0]]
    if path.parent.name == "attention":
        section = section["attention"]
    values = {k: v for k, v in (OmegaConf.to_container(OmegaConf.load(path)) or {}).items() if k != "defaults"}
    assert set(values) <= set(section), f"{path.name}: keys not in the schema: {set(values) - set(section)}"
    # each option names itself (data.source, model.attention.mode), even the default one; a hub preset may
    # spell out its dataset's split names, even where they are the default ones
    named = {"source", "mode"} | ({"splits"} if path.stem.endswith("_zh_en") else set())
    same = [k for k, v in values.items() if v == section[k] and k not in named]
    assert not same, f"{path.name} repeats the schema's defaults for {same}: keep them in nmt/config.py only"


@pytest.mark.parametrize("mode", ["global", "local_m", "local_p"])
def test_experiments_select_their_attention(mode):
    """Each ``+experiment=zh_en_<mode>`` composes, validates and selects its attention mode."""
    cfg = composed(f"+experiment=zh_en_{mode}")
    validate(cfg)
    assert cfg.model.attention.mode == mode
    assert cfg.model.attention.score == "general"
    assert cfg.trainer.max_minutes == 7


def test_the_15_minute_recipe_is_the_recipe_with_a_wider_decoder_and_hsk_mixed_in():
    """``zh_en_local_p_15min`` is ``zh_en_local_p`` with 512 units, HSK mixed in and 15 minutes, nothing else (one
    encoder layer both): a change to the short recipe reaches it, and its measured differences stay the ones its
    comments name."""
    short, long = (OmegaConf.to_container(composed(f"+experiment={n}")) for n in ("zh_en_local_p", "zh_en_local_p_15min"))
    keys = (("model", "hidden_size"), ("trainer", "max_minutes"), ("data", "mix"))
    assert [long[a][b] for a, b in keys] == [512, 15, [{"source": "hsk", "weight": 0.15}]]
    assert [short[a][b] for a, b in keys] == [256, 7, []]
    assert long["model"]["encoder_layers"] == short["model"]["encoder_layers"] == 1
    for a, b in keys:
        long[a][b] = short[a][b]
    assert long == short


@pytest.mark.parametrize("name", sorted(p.stem for p in (CONFIGS / "experiment").glob("*.yaml")))
def test_every_experiment_composes_and_validates(name):
    """Every file under configs/experiment/ composes against the schema and passes ``validate``."""
    validate(composed(f"+experiment={name}"))


@pytest.mark.parametrize("name", sorted(p.stem for p in (CONFIGS / "model" / "attention").glob("*.yaml")))
def test_every_attention_group_option_composes(name):
    cfg = composed(f"model/attention={name}", "trainer.max_steps=100")
    validate(cfg)
    assert cfg.model.attention.mode == name


def test_compose_command_line_overrides():
    """Command-line style overrides land on typed fields (ints stay ints)."""
    cfg = composed("+experiment=zh_en_local_m", "model.attention.score=concat", "trainer.max_steps=5",
                   "model.attention.window=3")
    validate(cfg)
    assert cfg.model.attention.score == "concat"
    assert cfg.trainer.max_steps == 5 and isinstance(cfg.trainer.max_steps, int)
    assert cfg.model.attention.window == 3


def test_compose_rejects_misspelled_key():
    """A key that is not in the schema fails at composition, naming the key."""
    with pytest.raises(ConfigCompositionException) as e:
        composed("trainer.max_stepz=5")
    assert "max_stepz" in str(e.value) + str(e.value.__cause__)


def test_compose_rejects_wrong_type():
    """A value of the wrong type fails at composition."""
    with pytest.raises(ConfigCompositionException):
        composed("trainer.max_steps=many")


def test_structured_config_rejects_unknown_keys_and_bad_types():
    """The dataclass schema itself is strict: unknown attributes and wrong types raise."""
    cfg = structured()
    with pytest.raises((ConfigAttributeError, ConfigKeyError)):
        cfg.trainer.max_stepz = 5
    with pytest.raises(ValidationError):
        cfg.trainer.max_steps = "many"


@pytest.mark.parametrize(
    "key,value,fragments",
    [
        ("model.attention.score", "foo", ["model.attention.score", "'foo'", "dot, general, concat"]),
        ("model.attention.mode", "fancy", ["model.attention.mode", "global, local_m, local_p"]),
        ("model.rnn_type", "transformer", ["model.rnn_type", "lstm, gru"]),
        ("tokenizer.model_type", "wordpiece", ["tokenizer.model_type", "unigram"]),
        ("data.source", "web", ["data.source", "tatoeba, hsk, files, hub"]),
        ("data.opencc", "x2y", ["data.opencc", "t2s"]),
        ("trainer.precision", "fp8", ["trainer.precision", "bf16"]),
        ("trainer.device", "tpu", ["trainer.device", "cuda:N"]),
        ("model.hidden_size", 33, ["model.hidden_size=33", "even"]),
        ("model.dropout", 1.0, ["model.dropout"]),
        ("model.encoder_layers", 0, ["model.encoder_layers"]),
        ("tokenizer.src_vocab_size", 0, ["tokenizer.src_vocab_size"]),
        ("data.max_chars", 0, ["data.max_chars"]),
        ("data.dev_size", -1, ["data.dev_size"]),
        ("trainer.batch_tokens", 0, ["trainer.batch_tokens"]),
        ("trainer.lr", -0.1, ["trainer.lr"]),
        ("trainer.max_steps", -1, ["trainer.max_steps"]),
        ("trainer.label_smoothing", 1.0, ["trainer.label_smoothing"]),
    ],
)
def test_validate_names_the_bad_key(key, value, fragments):
    """``validate`` raises ConfigError whose message names the key (and the choices, for enums)."""
    cfg = structured()
    OmegaConf.update(cfg, key, value)
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    for fragment in fragments:
        assert fragment in str(e.value)


def test_local_window_must_be_positive_only_for_local_modes():
    """window=0 is meaningless for local attention but ignored by global attention."""
    validate(structured(model__attention__mode="global", model__attention__window=0))
    for mode in ("local_m", "local_p"):
        with pytest.raises(ConfigError, match="model.attention.window"):
            validate(structured(model__attention__mode=mode, model__attention__window=0))


def test_sources_need_their_location():
    """data.source=files needs data.dir, data.source=hub needs data.name."""
    with pytest.raises(ConfigError, match="data.dir"):
        validate(structured(data__source="files"))
    with pytest.raises(ConfigError, match="data.name"):
        validate(structured(data__source="hub"))
    validate(structured(data__source="files", data__dir="/somewhere"))


def test_odd_hidden_size_is_fine_without_bidirectional_encoder():
    validate(structured(model__hidden_size=33, model__bidirectional=False))


def test_validate_rejects_a_run_without_any_budget():
    """With max_steps, max_epochs and max_minutes all 0 the run can never stop: ``validate`` (which
    runs before any data is loaded) rejects it, naming the keys, before the corpus is loaded,
    sentencepiece is trained or anything is written into the run directory."""
    cfg = structured(trainer__max_steps=0, trainer__max_epochs=0, trainer__max_minutes=0.0)
    with pytest.raises(ConfigError, match="trainer.max_steps"):
        validate(cfg)


def test_to_dict_from_dict_round_trip():
    """What a checkpoint stores (a plain dict) rebuilds the same typed config."""
    cfg = structured(model__attention__score="concat", data__opencc="t2s", trainer__lr=0.003)
    d = to_dict(cfg)
    assert isinstance(d, dict) and d["model"]["attention"]["score"] == "concat"
    back = from_dict(d)
    assert OmegaConf.to_container(back) == OmegaConf.to_container(cfg)
    validate(back)


def test_from_dict_tolerates_keys_added_later():
    """An older checkpoint without a newer key gets the schema default for it."""
    d = to_dict(structured(trainer__label_smoothing=0.1))
    del d["trainer"]["label_smoothing"]
    del d["model"]["attention"]["window"]
    back = from_dict(d)
    assert back.trainer.label_smoothing == 0.0
    assert back.model.attention.window == 10
