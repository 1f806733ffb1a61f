"""What a ``POST /translate`` body may hold, checked against the server's limits.

Two shapes are accepted:

- OpenNMT-py's: ``[{"src": "…", "id": 0}, …]``; ``id`` numbers the served models from 0;
- a plain one: ``{"text": ["…"], "model": 0, "beam": 5, "n_best": 1, "attention": false, "alpha": 1.0,
  "beta": 0.0, "stop": "full"}`` (all but ``text`` optional).

A field a request leaves out takes the server's default (``Defaults``: its ``--beam``, ``--alpha``, ``--beta``,
``--stop``). Anything else is a ``RequestError`` whose one-line message names the field at fault.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

ALPHA_MAX = 2.0  # the GNMT length penalty's α: 0 (off) to 2
BETA_MAX = 1.0  # the GNMT coverage penalty's β: 0 (off) to 1 (nmt.cli.BETA_MAX; this module imports no torch)
STOPS = ("exact", "full", "first")  # nmt.search.STOPS, written out (tests/test_serve.py checks they agree)
PLAIN = ("text", "model", "beam", "n_best", "attention", "alpha", "beta", "stop")  # the plain shape's fields


@dataclass
class Limits:
    max_lines: int = 64  # lines per request
    max_chars: int = 1000  # characters per line
    max_beam: int = 10
    max_body: int = 1_000_000  # bytes per request body
    timeout: float = 30.0  # seconds from arrival to answer
    max_queue: int = 2048  # lines waiting to be decoded, all requests together


@dataclass(frozen=True)
class Defaults:
    """The search of a request that names none: the server's start-up flags."""

    beam: int = 5
    alpha: float = 1.0
    beta: float = 0.0
    stop: str = "full"


class RequestError(Exception):
    """A request the server refuses: an HTTP status and a one-line message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(frozen=True)
class Search:
    """What decides how lines are decoded, so which lines may share a batch (the batcher's key)."""

    model: int  # the engine's index
    beam: int
    n_best: int
    attention: bool
    alpha: float
    beta: float
    stop: str


@dataclass
class Query:
    """Lines of one request for one model with one search setting (one batcher key)."""

    key: Search
    texts: list[str]
    positions: list[int]  # where each line stood in the request

    @property
    def model(self) -> int:
        return self.key.model


def parse(body: bytes, limits: Limits, n_models: int, defaults: Defaults = Defaults()) -> tuple[str, list[Query]]:
    """The request's shape ("opennmt" or "plain") and its queries; ``defaults`` for the fields it leaves out."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RequestError(400, f"body: not valid UTF-8 JSON ({e})") from None
    except RecursionError:  # e.g. "[" * 10000: json recurses once per level
        raise RequestError(400, "body: JSON nested too deeply") from None
    except ValueError as e:  # e.g. an integer longer than sys.get_int_max_str_digits(): keep the cause, not the advice
        raise RequestError(400, f"body: JSON that cannot be read ({str(e).split(':')[0]})") from None
    if isinstance(data, list):
        return "opennmt", _opennmt(data, limits, n_models, defaults)
    if isinstance(data, dict):
        return "plain", [_plain(data, limits, n_models, defaults)]
    raise RequestError(400, "body: expected a list of {\"src\", \"id\"} objects or an object with \"text\"")


def _opennmt(items: list, limits: Limits, n_models: int, d: Defaults) -> list[Query]:
    _check_count("body", len(items), limits)
    by_model: dict[int, Query] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise RequestError(400, f"[{i}]: expected an object with \"src\" and \"id\", got {type(item).__name__}")
        text = _text(f"[{i}].src", item.get("src"), limits)
        model = _model(f"[{i}].id", item.get("id", 0), n_models)
        q = by_model.setdefault(model, Query(Search(model, d.beam, 1, False, d.alpha, d.beta, d.stop), [], []))
        q.texts.append(text)
        q.positions.append(i)
    return list(by_model.values())


def _plain(data: dict, limits: Limits, n_models: int, d: Defaults) -> Query:
    unknown = sorted(set(data) - set(PLAIN))
    if unknown:
        raise RequestError(400, f"{unknown[0]}: unknown field (known: {', '.join(PLAIN)})")
    texts = data.get("text")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list):
        raise RequestError(400, f"text: expected a list of strings, got {type(texts).__name__}")
    _check_count("text", len(texts), limits)
    texts = [_text(f"text[{i}]", t, limits) for i, t in enumerate(texts)]
    model = _model("model", data.get("model", 0), n_models)
    b = _int("beam", data.get("beam", d.beam), 1, limits.max_beam)
    n_best = _int("n_best", data.get("n_best", 1), 1, b)
    attention = data.get("attention", False)
    if not isinstance(attention, bool):
        raise RequestError(400, f"attention: expected true or false, got {attention!r}")
    alpha, beta = number("alpha", data.get("alpha", d.alpha), ALPHA_MAX), number("beta", data.get("beta", d.beta), BETA_MAX)
    search = Search(model, b, n_best, attention, alpha, beta, stop_rule("stop", data.get("stop", d.stop)))
    return Query(search, texts, list(range(len(texts))))


def _check_count(field: str, n: int, limits: Limits) -> None:
    if n == 0:
        raise RequestError(400, f"{field}: no lines to translate")
    if n > limits.max_lines:
        raise RequestError(413, f"{field}: {n} lines, the limit is {limits.max_lines} per request")


def _text(field: str, value: object, limits: Limits) -> str:
    if not isinstance(value, str):
        raise RequestError(400, f"{field}: expected a string, got {type(value).__name__}")
    if len(value) > limits.max_chars:
        raise RequestError(413, f"{field}: {len(value)} characters, the limit is {limits.max_chars} per line")
    return value


def _int(field: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(400, f"{field}: expected an integer, got {value!r}")
    if not lo <= value <= hi:
        raise RequestError(400, f"{field}: {value} is outside {lo}..{hi}")
    return value


def _shown(value: object) -> str:
    """A request's value as JSON, cut to 40 characters (it goes into a one-line error)."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def number(field: str, value: object, hi: float) -> float:
    """A finite number between 0 and ``hi``, else a 400 naming ``field`` and the value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and 0 <= value <= hi):
        raise RequestError(400, f"{field}: must be a number between 0 and {hi:g}, got {_shown(value)}")
    return float(value)


def stop_rule(field: str, value: object) -> str:
    """One of ``STOPS``, else a 400 naming ``field`` and the value."""
    if not isinstance(value, str) or value not in STOPS:
        raise RequestError(400, f"{field}: must be one of {', '.join(STOPS)}, got {_shown(value)}")
    return value


def check_defaults(d: Defaults, limits: Limits) -> None:
    """The server's own defaults, checked as a request's fields are (a RequestError naming the flag)."""
    _int("--beam", d.beam, 1, limits.max_beam)
    number("--alpha", d.alpha, ALPHA_MAX)
    number("--beta", d.beta, BETA_MAX)
    stop_rule("--stop", d.stop)


def _model(field: str, value: object, n_models: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(400, f"{field}: expected a model id (integer), got {value!r}")
    if not 0 <= value < n_models:
        raise RequestError(404, f"{field}: no model {value}; this server has ids 0..{n_models - 1}")
    return value
