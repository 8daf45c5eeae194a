"""llama.cpp's server as the engine, fed our token ids: the chat beyond one machine.

``rml-chat --server URL [MODEL]``: the tokenizer and the chat format still come from MODEL (a GGUF, of
which only the metadata is read, or a model directory); the weights live behind the server — one
``llama-server``, or one spreading the model's layers over ggml RPC workers (``--rpc host:port,…``).

* A prompt goes as our ids (``POST /completion``, ``"prompt": [ids]``), never as text; the reply streams
  back as ids (``"return_tokens"``) through our streaming decoder. Our stop ids and stop strings decide
  where a reply ends, and ending it closes the request (the server cancels it).
* The server's prompt cache (``"cache_prompt"``) reuses the common prefix; the evaluated count is the
  server's own (its ``prompt_progress``: total less cached).
* At connect the server's model must fit our tokenizer: the vocabulary size, and the server's own
  tokenization of a probe text (and of BOS and EOS) against ours. A mismatch is an error.
* A refused connection, a timeout, or a server that dies mid-reply is one line (``kind`` "server"), and so
  is an answer that is not llama-server's: each field is read for the type it must have (the readers at
  the end), and a token id must be one of the vocabulary's.

Only the standard library's ``http.client`` is used: no dependency for this.
"""

from __future__ import annotations

import http.client
import json
import math
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import STOPPED, AppError, UsageError
from .base import BegunGrammar, Generation, Progress, Sampling, Shifted, common_prefix, trigger_patterns, triggers_of

MAX_ANSWER_BYTES = 64 * 2**20  # one JSON answer or one streamed event (/props holds the chat template: ~100 kB)
PROBE = "Hello, world! 123 — Grüße, 日本語 👋 <tag> and\nnew lines"


class ServerError(AppError):
    def __init__(self, message: str):
        super().__init__(message, "server")


#: what an answer of refusal adds: the server wants a key (llama-server --api-key)
_KEY_HINT = {401: "; --api-key or --api-key-file gives the server's key"}

#: why a server can't do what a local engine does with its cache
_OWN_CACHE = "the server keeps its own cache"


class ServerEngine:
    """The ``Engine`` protocol (base.py) over a llama-server."""

    def __init__(self, url: str, *, timeout: float = 60.0, api_key: str | None = None):
        self.url = server_url(url)
        parts = urlsplit(self.url)
        self._host, self._port, self._timeout, self._api_key = parts.hostname, parts.port, timeout, api_key
        self._headers = {"Content-Type": "application/json"}
        if api_key:  # (llama-server's --api-key: sent to this server alone, never shown)
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._cached: list[int] = []  # what the server's slot holds, as far as this client knows
        self._fresh = False  # after reset(): the next request does not reuse the server's cache
        self.n_ctx = _context_size(self._get("/props"), f"{self.url}/props")
        self.model_id, self.n_vocab = _model(self._get("/v1/models"))
        self.threads = self.placement = "the server's"
        self.name = f"{self.url} ({self.model_id})"
        self.timings: dict = {}  # the server's own timings of the last reply it finished

    # ----- HTTP -------------------------------------------------------------------------------------

    def _connection(self, timeout: float | None = None) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout or self._timeout)

    def _request(self, method: str, path: str, body: dict | None = None) -> dict:
        conn = self._connection()
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=self._headers)
            response = conn.getresponse()
            data = response.read(MAX_ANSWER_BYTES + 1)
        except (OSError, http.client.HTTPException) as err:
            raise ServerError(f"{self.url}{path}: {_why(err)}") from None
        finally:
            conn.close()
        if len(data) > MAX_ANSWER_BYTES:
            raise ServerError(f"{self.url}{path}: an answer of more than {MAX_ANSWER_BYTES:,} bytes; is it llama.cpp's "
                              "llama-server?")
        if response.status != 200:
            raise ServerError(f"{self.url}{path}: HTTP {response.status} ({data[:200].decode('utf-8', 'replace')})"
                              + _KEY_HINT.get(response.status, ""))
        try:
            return _object(json.loads(data), f"{self.url}{path}")
        except (json.JSONDecodeError, RecursionError):
            raise ServerError(f"{self.url}{path}: not JSON; {_NOT_LLAMA_SERVER}") from None

    def _get(self, path: str) -> dict:
        return self._request("GET", path)

    # ----- the Engine interface ---------------------------------------------------------------------

    def close(self) -> None:
        pass

    def reset(self) -> None:
        """The next request evaluates everything (the server's prompt cache is not used once)."""
        self._cached = []
        self._fresh = True

    def cached_ids(self) -> list[int]:
        return list(self._cached)

    def shift(self, ids: Sequence[int]) -> Shifted:
        """A server's cache is its own (its prompt cache still reuses the common prefix)."""
        return Shifted(-1, _OWN_CACHE)

    def save_state(self, path: Path, weights: Path | None) -> tuple[int, str]:
        return 0, _OWN_CACHE

    def load_state(self, path: Path, weights: Path | None) -> tuple[int, str]:
        return 0, _OWN_CACHE

    def lines(self, n: int) -> list:
        """``n`` connections to the server: its slots (``-np``) run them together."""
        others = [ServerEngine(self.url, timeout=self._timeout, api_key=self._api_key) for _ in range(n - 1)]
        for other in others:
            other.n_vocab = self.n_vocab
        return [self, *others]

    def use_prompt_cache(self, cache: object) -> None:
        """The server keeps its own prompt cache (``cache_prompt``); ours is not used."""

    def keep_prompt(self) -> str:
        return ""

    def reference_tokenize(self, text: str, special: bool) -> list[int]:
        """The server's own tokenization (for --check and the check at connect)."""
        found = self._request("POST", "/tokenize", {"content": text, "add_special": False, "parse_special": special})
        tokens = found.get("tokens", [])
        ids = [t.get("id", t) if isinstance(t, dict) else t for t in tokens] if isinstance(tokens, list) else [tokens]
        return [_token_id(i, f"{self.url}/tokenize", self.n_vocab) for i in ids]

    def grammar_problem(self, gbnf: str) -> str:
        """"" when the server takes the grammar, else its complaint (a request that generates nothing)."""
        try:
            self._request("POST", "/completion", {"prompt": [0], "n_predict": 0, "grammar": gbnf, "cache_prompt": False})
        except ServerError as err:
            return str(err).split(": ", 2)[-1]
        return ""

    def check_vocabulary(self, tokenizer, source: object) -> None:  # type: ignore[no-untyped-def]
        if self.n_vocab is not None and self.n_vocab != tokenizer.vocab_size:
            raise ServerError(f"the server's model ({self.model_id}: {self.n_vocab} tokens) does not fit the tokenizer "
                              f"from {source} ({tokenizer.vocab_size} tokens)")
        theirs, ours = self.reference_tokenize(PROBE, False), tokenizer.encode(PROBE)
        if theirs != ours:
            at = common_prefix(theirs, ours)
            raise ServerError(f"the server's model ({self.model_id}) tokenizes differently from the tokenizer from "
                              f"{source}: a probe text differs at token {at} (server {theirs[at:at + 3]}, ours "
                              f"{ours[at:at + 3]})")
        self.n_vocab = tokenizer.vocab_size  # (the server may not have said it; the probe says it fits ours)
        for name, token_id in (("BOS", tokenizer.bos_id), ("EOS", tokenizer.eos_id)):
            if token_id is not None and self.reference_tokenize(tokenizer.id_to_token(token_id), True) != [token_id]:
                raise ServerError(f"the server's model ({self.model_id}) has another {name} than the tokenizer from "
                                  f"{source} (ours: {token_id} {tokenizer.id_to_token(token_id)!r})")

    def generate(self, ids: Sequence[int], sampling: Sampling, stop_ids: Sequence[int], gen: Generation,
                 progress: Progress | None = None, grammar: str | None = None) -> Iterator[int]:
        """Stream the reply's ids for ``ids``; as ``Engine.generate`` (``grammar``, GBNF text, goes to the
        server; a reply begun before the call can't follow it there: ``BegunGrammar``)."""
        if isinstance(grammar, BegunGrammar):
            raise ServerError("a reply begun before its grammar (--prefill, /continue) follows the grammar on a "
                              "local model only: llama-server starts a grammar at the first token it draws")
        stops = set(stop_ids)
        budget = gen.begin(ids, self.n_ctx, sampling)
        gen.evaluated = len(ids) - min(common_prefix(self._cached, ids), len(ids) - 1)  # until the server says
        if budget <= 0 or not ids:
            gen.finished = time.perf_counter()
            return
        body = {"prompt": list(ids), "n_predict": budget, **request_fields(sampling, stop_ids, self.n_ctx),
                "stream": True, "return_tokens": True, "cache_prompt": not self._fresh, "return_progress": True}
        self._fresh = False
        if sampling.seed >= 0:
            body["seed"] = sampling.seed
        if grammar is not None:
            body["grammar"] = str(grammar)
            if triggers_of(grammar):  # llama-server's lazy grammar, its triggers as patterns (type 2: common/common.h)
                body["grammar_lazy"] = True
                body["grammar_triggers"] = [{"type": 2, "value": p} for p in trigger_patterns(grammar)]
        conn = self._connection()
        self._cached = list(ids)
        try:
            try:
                conn.request("POST", "/completion", body=json.dumps(body), headers=self._headers)
                response = conn.getresponse()
            except (OSError, http.client.HTTPException) as err:
                raise ServerError(f"{self.url}/completion: {_why(err)}") from None
            if response.status != 200:
                raise ServerError(f"{self.url}/completion: HTTP {response.status} "
                                  f"({response.read(300).decode('utf-8', 'replace')})" + _KEY_HINT.get(response.status, ""))
            where = f"{self.url}/completion"
            for event in _events(response, self.url):
                status = event.get("prompt_progress")
                if status:  # its "tokens" is a placeholder, not a token
                    total, cached, done = (_figure(status, key) for key in ("total", "cache", "processed"))
                    if total is not None:  # (figures only: a server that gives none shows no progress)
                        gen.to_evaluate, gen.evaluated = total - (cached or 0), (done or 0) - (cached or 0)
                        if progress is not None and done is not None:
                            progress(gen.evaluated, gen.to_evaluate, time.perf_counter() - gen.started)
                    continue
                tokens = _token_ids(event.get("tokens"), where, self.n_vocab)
                if tokens:  # the prompt is done
                    gen.evaluated = max(gen.evaluated, gen.to_evaluate)
                for token in tokens:
                    if not gen.record(token, stops):
                        return
                    self._cached.append(token)
                    yield token
                if event.get("stop"):  # the server's last event (its n_predict is our budget): its timings
                    if event.get("stop_type") in ("eos", "word"):
                        gen.stop_reason = "stop"
                    self.timings = event.get("timings") if isinstance(event.get("timings"), dict) else {}
                    if (prompt_n := _figure(self.timings, "prompt_n")) is not None:
                        gen.evaluated = gen.to_evaluate = prompt_n
                    return
            raise ServerError(f"{self.url}: the server closed the connection mid-reply")
        except STOPPED:
            gen.stop_reason = "interrupted"
            raise
        finally:
            conn.close()  # a reply we end early ends the request: the server cancels it
            gen.finished = time.perf_counter()


def server_url(text: str) -> str:
    """``--server``'s URL as ``http://HOST:PORT`` (an IPv6 address in brackets, port 80 where none is
    given), or UsageError saying what is wrong with it.

        >>> server_url("127.0.0.1:8080"), server_url("http://[::1]:8080/"), server_url("http://box")
        ('http://127.0.0.1:8080', 'http://[::1]:8080', 'http://box:80')
    """
    usage = f"--server {text[:80]!r}{'...' if len(text) > 80 else ''}: give http://HOST:PORT"
    try:
        parts = urlsplit(text if "://" in text else "http://" + text)
        host, port = parts.hostname, parts.port
    except ValueError as err:  # ("http://[::1", a port that is not a number or past 65535)
        raise UsageError(f"{usage} ({'a port from 1 to 65535' if 'Port' in str(err) else err})") from None
    if parts.scheme != "http" or not host:
        raise UsageError(usage + (" (rml-chat reaches llama-server over plain http://)" if parts.scheme == "https"
                                  else ""))
    if parts.username is not None or parts.password is not None:
        raise UsageError("--server: the URL holds a user or a password; llama-server takes a key: --api-key or "
                         "--api-key-file")
    if port == 0:
        raise UsageError(f"{usage} (a port from 1 to 65535)")
    try:
        host.encode("idna")
    except UnicodeError:
        raise UsageError(f"{usage} (the host is not a host name)") from None
    return f"http://{f'[{host}]' if ':' in host else host}:{port or 80}"


def _events(response: http.client.HTTPResponse, url: str) -> Iterator[dict]:
    """The server-sent events of a streamed completion, as JSON objects."""
    while True:
        try:
            line = response.readline(MAX_ANSWER_BYTES + 1)
        except (OSError, http.client.HTTPException) as err:
            raise ServerError(f"{url}: the reply broke off ({_why(err)})") from None
        if not line:
            return
        if len(line) > MAX_ANSWER_BYTES:
            raise ServerError(f"{url}: a streamed event of more than {MAX_ANSWER_BYTES:,} bytes")
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            return
        try:
            event = _object(json.loads(payload), f"{url}: a streamed event")
        except (json.JSONDecodeError, RecursionError):
            raise ServerError(f"{url}: a streamed event is not JSON") from None
        if "error" in event:
            error = event["error"]
            raise ServerError(f"{url}: {error.get('message', error) if isinstance(error, dict) else error}")
        yield event


def _why(err: BaseException) -> str:
    if isinstance(err, ConnectionRefusedError):
        return "connection refused (is the server running?)"
    if isinstance(err, (socket.timeout, TimeoutError)):
        return "no answer in time"
    if isinstance(err, socket.gaierror):
        return f"unknown host ({err})"
    return f"{type(err).__name__}: {err}"


def request_fields(s: Sampling, stop_ids: Sequence[int] = (), window: int | None = None) -> dict:
    """The sampling settings as llama-server's ``/completion`` request fields (its names for the same
    settings; it builds the same chain as sampler_chain.py from them). DRY without sequence breakers is
    the one setting its request can't say (it takes no empty list): a usage error, not another chain.
    ``window``: the context's size, past which the penalties and DRY see nothing (llama_sampler.build)."""
    if window is not None:
        s = replace(s, repeat_last_n=min(s.repeat_last_n, window), dry_penalty_last_n=min(s.dry_penalty_last_n, window))
    if not s.dry_sequence_breakers:
        raise UsageError("--dry-sequence-breaker none: llama-server takes no empty list of DRY sequence breakers "
                         "(--server); give one, or leave the defaults")
    fields = {"temperature": s.temp, "top_k": s.top_k, "top_p": s.top_p, "min_p": s.min_p, "typical_p": s.typical_p,
              "top_n_sigma": s.top_n_sigma, "xtc_probability": s.xtc_probability, "xtc_threshold": s.xtc_threshold,
              "repeat_last_n": s.repeat_last_n, "repeat_penalty": s.repeat_penalty,
              "presence_penalty": s.presence_penalty, "frequency_penalty": s.frequency_penalty,
              "dry_multiplier": s.dry_multiplier, "dry_base": s.dry_base, "dry_allowed_length": s.dry_allowed_length,
              "dry_penalty_last_n": s.dry_penalty_last_n, "dry_sequence_breakers": list(s.dry_sequence_breakers),
              "dynatemp_range": s.dynatemp_range, "dynatemp_exponent": s.dynatemp_exp, "mirostat": s.mirostat,
              "mirostat_tau": s.mirostat_ent, "mirostat_eta": s.mirostat_lr, "samplers": list(s.samplers),
              "logit_bias": [[token, bias if bias != -math.inf else False] for token, bias in s.logit_bias]}
    if s.ignore_eos:  # (llama-server's ignore_eos bars its vocabulary's end-of-generation tokens; ours are named)
        fields["logit_bias"] += [[token, False] for token in stop_ids]
    if s.backend_sampling:  # (with a grammar, llama-server turns it off itself, as we do)
        fields["backend_sampling"] = True
    return fields


# ----- llama-server's answers, read for the types they must have ----------------------------------------
# Whatever answers at the URL is read by these: a field of another type is one line naming it (or, for a
# figure that only counts, a figure not given), never an exception from deep in the chat.

_NOT_LLAMA_SERVER = "is it llama.cpp's llama-server?"
_MAX_CONTEXT = 2**32 - 1  # llama.cpp's n_ctx is a uint32_t


def _object(value: object, where: str) -> dict:
    if not isinstance(value, dict):
        raise ServerError(f"{where}: not a JSON object but {_shown(value)}; {_NOT_LLAMA_SERVER}")
    return value


def _figure(found: object, key: str) -> int | None:
    """``found[key]`` when it is a whole number from 0 up (JSON's ``true`` is not one), else None.

        >>> _figure({"total": 12}, "total"), _figure({"total": "12"}, "total"), _figure([], "total")
        (12, None, None)
    """
    value = found.get(key) if isinstance(found, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _context_size(props: dict, where: str) -> int:
    """The context size /props names (in its ``default_generation_settings``, or at its top level)."""
    settings = props.get("default_generation_settings")
    n_ctx = _figure(settings, "n_ctx") or _figure(props, "n_ctx")
    if not n_ctx or n_ctx > _MAX_CONTEXT:
        raise ServerError(f"{where} names no context size from 1 to {_MAX_CONTEXT:,}; {_NOT_LLAMA_SERVER}")
    return n_ctx


def _model(models: dict) -> tuple[str, int | None]:
    """The served model's name and vocabulary size (None: not said) from /v1/models."""
    data = models.get("data")
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
    name = first.get("id")
    return (name if isinstance(name, str) else "?"), _figure(first.get("meta"), "n_vocab")


def _token_id(value: object, where: str, n_vocab: int | None) -> int:
    """``value`` as a token id of the vocabulary (``n_vocab`` tokens; None: any id from 0)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < (n_vocab or 2**31):
        return value
    of = f"the vocabulary's {n_vocab:,}" if n_vocab else "a vocabulary's"
    raise ServerError(f"{where}: the server sent {_shown(value)} as a token id, not one of {of}; {_NOT_LLAMA_SERVER}")


def _token_ids(value: object, where: str, n_vocab: int | None) -> list[int]:
    """A streamed event's ``tokens`` (absent or null: none)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ServerError(f"{where}: the server sent {_shown(value)} as a list of token ids; {_NOT_LLAMA_SERVER}")
    return [_token_id(token, where, n_vocab) for token in value]


def _shown(value: object) -> str:
    """A short sight of a value that came from the server, as JSON writes it."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
