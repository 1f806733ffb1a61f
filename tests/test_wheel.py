"""The built wheel works alone: it carries the top-level ``configs/`` and ``data/`` inside ``nmt``; installed into a
fresh virtual environment, it trains on the packaged corpus from a folder outside the clone, translates with the
result, and ships its console scripts. The clone's editable install maps the same two folders."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run(cmd: list, cwd: Path, env: dict) -> str:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from the clone."""
    dist = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", dist, REPO],
        dist, dict(os.environ))
    return next(dist.glob("nmt-*.whl"))


@pytest.fixture(scope="module")
def wheel_env(wheel, tmp_path_factory) -> tuple[Path, Path, dict]:
    """A virtual environment holding only the built wheel; its dependencies are this environment's (a path entry
    to our site-packages, whose own .pth files, the clone's editable install among them, are not read)."""
    tmp = tmp_path_factory.mktemp("wheel")
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], tmp, dict(os.environ))
    python = venv / "bin" / "python"
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp, {}).strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {"PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "HOME": str(tmp), "NMT_CACHE": str(tmp / "cache"),
           "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp / "hf")}
    run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel], tmp, env)
    outside = tmp / "elsewhere"
    outside.mkdir()
    return python, outside, env


def test_the_wheel_carries_configs_and_data_inside_nmt(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("nmt/configs/__init__.py", "nmt/configs/train.yaml", "nmt/configs/experiment/zh_en_local_p.yaml",
                 "nmt/configs/model/attention/local_p.yaml", "nmt/data/packaged/__init__.py",
                 "nmt/data/packaged/README.md", "nmt/data/packaged/tatoeba/SHA256SUMS"):
        assert name in names, f"{wheel} lacks {name}"
    sums = (REPO / "data" / "tatoeba" / "SHA256SUMS").read_text().split()[1::2]
    assert {f"nmt/data/packaged/tatoeba/{n}" for n in sums} <= names, f"{wheel} lacks a split of data/tatoeba"
    modules = {p.relative_to(REPO).as_posix() for p in (REPO / "nmt").rglob("*.py")}
    assert not modules - names, f"{wheel} lacks {sorted(modules - names)[:5]} (pyproject.toml lists the packages)"
    stray = sorted(n for n in names if not n.startswith(("nmt/", "nmt-")))
    assert not stray, f"{wheel} installs beside nmt: {stray[:5]}"  # no top-level configs/ or data/ in site-packages


def test_the_editable_install_reads_configs_and_data_in_the_clone(tmp_path):
    """From a folder outside the clone, the clone's editable install finds both top-level folders where they are."""
    where = subprocess.run([sys.executable, "-c", "import nmt, nmt.configs, nmt.data.tatoeba as t; "
                            "print(nmt.__file__, nmt.configs.__file__, t.PACKAGED, sep='\\n')"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert where.returncode == 0, where.stderr[-3000:]
    package, configs, corpus = map(Path, where.stdout.split())
    if REPO not in package.parents:
        pytest.skip(f"nmt is not this clone's editable install ({package})")
    assert configs == REPO / "configs" / "__init__.py" and corpus == REPO / "data" / "tatoeba", where.stdout


def test_the_wheel_trains_on_the_packaged_corpus_outside_the_clone(wheel_env):
    python, outside, env = wheel_env
    where = run([python, "-c", "import nmt; print(nmt.__file__)"], outside, env).strip()
    assert REPO not in Path(where).parents and "venv" in where, where  # the wheel's nmt, not the clone's
    run([python, "-m", "nmt.train", "model.emb_size=16", "model.hidden_size=16", "model.encoder_layers=1",
         "model.decoder_layers=1", "trainer.max_steps=3", "trainer.valid_every=3", "trainer.valid_max_sentences=20",
         "trainer.test_beam=0", "trainer.attention_images=0", "hydra.run.dir=run"], outside, env)
    assert (outside / "run" / "checkpoints" / "best.pt").exists()
    pairs = re.search(r"\| ([\d,]+) training pairs", (outside / "run" / "train.log").read_text())
    assert pairs and int(pairs.group(1).replace(",", "")) > 25_000  # the packaged Tatoeba corpus (26,155 pairs)
    out = run([python, "-m", "nmt.translate", "run", "--beam", "1", "我爱你。"], outside, env)
    assert out.strip(), "no translation printed"


def test_the_wheel_ships_its_console_scripts(wheel_env):
    python, outside, env = wheel_env
    for script in ("nmt-average", "nmt-translate", "nmt-evaluate", "nmt-export", "nmt-serve"):
        assert "usage" in run([python.parent / script, "--help"], outside, env).lower()
    assert "max_steps" in run([python.parent / "nmt-train", "--cfg", "job"], outside, env)  # Hydra finds the tree
    mine = outside / "my_configs" / "experiment"
    mine.mkdir(parents=True)
    (mine / "mine.yaml").write_text("# @package _global_\nmodel:\n  hidden_size: 24\n")
    job = run([python.parent / "nmt-train", "--config-dir", "my_configs", "+experiment=mine", "--cfg", "job"], outside, env)
    assert "hidden_size: 24" in job  # a user's own experiment file beside the packaged tree
