"""llama.cpp through its C API: one model with one context, and the sampler chains drawn from it.

``LlamaModel`` keeps llama-cpp-python's ``Llama`` settings: its model and context parameters, batches of
``n_batch`` with logits for the last token only (local.py decodes a prompt's last id apart). ``Llama``
itself is not used on the chat path, for the sake of the first token: its ``__init__`` runs Python
between its C calls (and compiles the GGUF's chat template, which we never use); here the loading thread
makes two C calls, and our main thread builds the tokenizer meanwhile. The bindings come from
bindings.py; the sampler chain is llama.cpp's own, built by llama_sampler.py.
"""
from __future__ import annotations

import ctypes
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from . import cpu_quirks, memory
from .base import BegunGrammar, StartRefused, trigger_patterns
from .bindings import backend, bindings, llama_log
from .llama_sampler import Sampler, build
from .sampler_chain import Stage
from .thread_choice import ThreadChoice
from .trigger_guard import TriggerGuard, ends_of, holding, piece

_FLASH_ATTN = {"on": "ENABLED", "off": "DISABLED", "auto": "AUTO"}


def ubatches(n: int, n_batch: int, n_ubatch: int) -> list[tuple[int, int]]:
    """The (start, end) of each micro-batch llama.cpp computes for ``n`` tokens of one sequence handed over
    ``n_batch`` at a time (llama-server, llama-cli), each cut into ``n_ubatch``-token pieces: decoding those
    pieces one by one is the same arithmetic, with a progress line and a Ctrl-C between them.

    >>> ubatches(1300, 1000, 512)
    [(0, 512), (512, 1000), (1000, 1300)]
    """
    return [(start, min(start + n_ubatch, batch + n_batch, n))
            for batch in range(0, n, n_batch) for start in range(batch, min(batch + n_batch, n), n_ubatch)]


class LoadError(Exception):
    """llama.cpp could not load the weights or make a context over them (its reason: ``llama_log()``)."""


class ContextTooLarge(LoadError):
    """The context asked for does not fit the memory available (``memory.context_shortfall`` says why)."""


class LlamaModel:
    """One model and one context over it, with llama-cpp-python's ``Llama`` settings; ``cached`` is the
    ids whose keys and values the context holds, in order."""

    def __init__(self, weights: Path, *, n_ctx: int, n_batch: int, threads: ThreadChoice, threads_batch: int | None,
                 gpu: tuple[int, str] = (-1, "layer"), n_seq: int = 1, n_ubatch: int = 512, flash_attn: str = "auto",
                 outputs_per_seq: int = 0):
        """``threads``: the count for each decode (thread_choice.py); ``threads_batch``: a fixed count for
        batches of several tokens, None: the same as ``threads``; ``n_batch``, ``n_ubatch`` and ``flash_attn``
        ("on", "off", "auto") as llama.cpp's ``-b``, ``-ub`` and ``-fa``; ``outputs_per_seq``: the most logits
        one decode gives a sequence whose sampler chain runs on the device (0: ``n_batch``; llama-server
        passes 1 without drafts, and only then can the penalties run there)."""
        lib = self._lib = backend()
        self.model = self.ctx = self._batch = None
        model_params = lib.llama_model_default_params()
        self.n_gpu_layers = gpu[0]  # without a GPU backend none fit: 0, as llama-cpp-python's Llama passes
        model_params.n_gpu_layers = gpu[0] if lib.llama_supports_gpu_offload() else 0
        model_params.split_mode = getattr(lib, f"LLAMA_SPLIT_MODE_{gpu[1].upper()}")
        model_params.load_mode = lib.LLAMA_LOAD_MODE_MMAP
        model_params.use_extra_bufts = not cpu_quirks.no_extra_buffers()
        self.model = lib.llama_model_load_from_file(os.fsencode(weights), model_params)  # (a name that is not UTF-8 too)
        if not self.model:
            raise LoadError(f"failed to load model from file: {weights}")
        self.vocab = lib.llama_model_get_vocab(self.model)
        self._pieces: list[bytes] | None = None  # (every token's text, read the first time a lazy grammar needs it)
        self._held: dict[tuple[bytes, ...], frozenset[int]] = {}
        self.n_ctx_train = lib.llama_model_n_ctx_train(self.model)
        n_ctx = n_ctx or self.n_ctx_train
        need = memory.MemoryNeed.of(self.kv_bytes_per_token(), lib.llama_model_n_head(self.model),
                                    lib.llama_vocab_n_tokens(self.vocab), min(n_ctx, n_batch, n_ubatch))
        shortfall = memory.context_shortfall(n_ctx, need, memory.available_bytes())
        if shortfall:  # before llama.cpp allocates it (and before ctypes truncates n_ctx to 32 bits)
            self.close()
            raise ContextTooLarge(shortfall)
        self.n_batch = min(n_ctx, n_batch)
        params = lib.llama_context_default_params()
        self.n_ubatch = min(self.n_batch, n_ubatch)
        params.n_ctx, params.n_batch, params.n_ubatch = n_ctx, self.n_batch, self.n_ubatch
        self.threads, self.threads_batch = threads, threads_batch
        self._counts = params.n_threads, params.n_threads_batch = self._thread_counts(threads.current)
        params.flash_attn_type = getattr(lib, f"LLAMA_FLASH_ATTN_TYPE_{_FLASH_ATTN[flash_attn]}")
        params.n_seq_max, params.kv_unified = n_seq, n_seq > 1  # (parallel.py: sequences share every cell)
        self.n_seq = n_seq
        params.n_outputs_max_per_seq = self.outputs_per_seq = outputs_per_seq
        params.no_perf = False
        log = llama_log()
        log.flash_attention = None
        self.ctx = lib.llama_init_from_model(self.model, params)
        self.flash_attn = flash_attn if flash_attn != "auto" else f"{'on' if log.flash_attention else 'off'} (auto)"
        if not self.ctx:
            self.close()
            raise LoadError("failed to create llama_context")
        self.n_ctx = min(lib.llama_n_ctx(self.ctx), n_ctx)
        self.n_vocab = lib.llama_vocab_n_tokens(self.vocab)
        self._memory = lib.llama_get_memory(self.ctx)
        self._batch = lib.llama_batch_init(self.n_batch, 0, 1)
        for i in range(self.n_batch):  # one sequence for every token (decode_seqs says which)
            self._batch.n_seq_id[i] = 1
        self.cached: list[int] = []

    def placement(self) -> str:
        """Where the layers went: "CPU only: …" or "31/31 layers on the GPU" (llama.cpp's count: the
        repeating layers and the output layer)."""
        quirk = cpu_quirks.no_extra_buffers()
        if not self._lib.llama_supports_gpu_offload():
            return "CPU only: this llama.cpp build has no GPU backend" + (f"; no extra CPU buffers: {quirk}" if quirk else "")
        total = self._lib.llama_model_n_layer(self.model) + 1
        on_gpu = total if self.n_gpu_layers < 0 else min(self.n_gpu_layers, total)
        return f"{on_gpu}/{total} layers on the GPU"

    def _meta(self, key: str) -> str | None:
        """A GGUF metadata value as llama.cpp gives it (a string), None where the file has no such key."""
        buffer = ctypes.create_string_buffer(64)
        if self._lib.llama_model_meta_val_str(self.model, key.encode(), buffer, len(buffer)) < 0:
            return None
        return buffer.value.decode("utf-8", "replace")

    def _meta_int(self, key: str) -> int | None:
        value = self._meta(key)
        return int(value) if value is not None and value.isascii() and value.isdigit() else None

    def kv_bytes_per_token(self) -> int:
        """The KV cache's bytes for one token (``memory.kv_bytes_per_token``), from the model's own
        hyperparameters: the head sizes its GGUF names, else the embedding split over the heads."""
        lib, model = self._lib, self.model
        n_head = max(lib.llama_model_n_head(model), 1)
        arch = self._meta("general.architecture") or ""
        key = self._meta_int(f"{arch}.attention.key_length") or lib.llama_model_n_embd(model) // n_head
        value = self._meta_int(f"{arch}.attention.value_length") or key
        return memory.kv_bytes_per_token(lib.llama_model_n_layer(model), lib.llama_model_n_head_kv(model), key, value)

    def token_bos(self) -> int:
        return self._lib.llama_vocab_bos(self.vocab)

    def token_eos(self) -> int:
        return self._lib.llama_vocab_eos(self.vocab)

    def keep(self, n: int) -> None:
        """Keep the cache's first ``n`` ids and drop the rest (all of it, where the memory can't drop part)."""
        if n >= len(self.cached):
            return
        if n > 0 and self._lib.llama_memory_seq_rm(self._memory, 0, n, -1):
            del self.cached[n:]
        else:
            self.reset()

    def reset(self) -> None:
        """Drop everything the cache holds (every kind of memory can drop it all; the buffers are not
        zeroed: what no cell refers to is never read)."""
        self.cached = []
        self._lib.llama_memory_seq_rm(self._memory, -1, 0, -1)

    def eval(self, ids: Sequence[int], logits: bool = True, every: bool = False) -> None:
        """Decode ``ids`` after the cached ones in one ``llama_decode`` (at most ``n_ubatch`` of them:
        ``ubatches`` says how a longer run is cut as llama.cpp cuts it), logits for the last where
        ``logits``, for each of them where ``every`` (a draft's check: ``sample`` at each index)."""
        self._lib.llama_memory_seq_rm(self._memory, 0, len(self.cached), -1)  # as Llama.eval: nothing stale after
        n, past = len(ids), len(self.cached)
        self.decode_seqs(ids, range(past, past + n), [0] * n, [True] * n if every else [False] * (n - 1) + [logits])
        self.cached.extend(ids)

    def logits(self, index: int = -1):  # type: ignore[no-untyped-def]
        """The last decoded id's logits, or those of the last batch's row ``index`` (a numpy view: copy it
        to keep it past the next decode)."""
        import numpy as np

        return np.ctypeslib.as_array(self._lib.llama_get_logits_ith(self.ctx, index), shape=(self.n_vocab,))

    @property
    def drops_part(self) -> bool:
        """Whether the memory can drop its last ids alone (a draft's rejected tokens): not a recurrent or
        hybrid model's, whose state holds every token it read."""
        lib = self._lib
        return not (lib.llama_model_is_recurrent(self.model) or lib.llama_model_is_hybrid(self.model))

    def sampler(self, chain: Sequence[Stage], grammar: str | None = None, history: Sequence[int] = (), *,
                seq: int = 0, on_device: bool = False, drafting: bool = False) -> Sampler:
        """llama.cpp's sampler chain for ``chain`` and ``grammar``, the prompt ``history`` handed to the
        samplers that look back (llama_sampler.build), with its lazy grammar's trigger guard; a
        ``BegunGrammar``'s reply start read into its grammar first (``StartRefused`` where it is refused).

        ``on_device`` (``-bs``): the chain is attached to sequence ``seq`` of the context, as llama-server
        attaches a slot's, and each decode runs it in the model's graph as far as its stages can run there.
        Where all of them can (the default chain can), the token is drawn there and only its id comes back;
        else the device's part narrows the candidates and the rest runs here. Not with a grammar (llama.cpp
        refuses the two together), nor where ``drafting`` and a decode gives the sequence one logits row only
        (``outputs_per_seq`` 1: a draft's check needs one for each of its tokens)."""
        made = build(self._lib, self.vocab, self.n_vocab, chain, grammar, history, window=self.n_ctx)
        refused = made.read(grammar.written) if isinstance(grammar, BegunGrammar) else -1
        if refused >= 0:
            made.close()
            raise StartRefused(refused)
        if grammar is not None and trigger_patterns(grammar):
            held = self._holding(ends_of(grammar))
            made.guard = TriggerGuard(self._lib, self.vocab, grammar, self._pieces or [], held,
                                      lambda text: _tokenize(self._lib, self.vocab, text, True))
        if on_device and grammar is None and not (drafting and self.outputs_per_seq == 1):
            made.attach(self.ctx, seq)
        return made

    def _holding(self, ends: tuple[bytes, ...]) -> frozenset[int]:
        """The tokens whose text holds one of ``ends`` whole and more (trigger_guard.holding), kept per
        ``ends``; every token's piece is read once, the first time (~50 ms for 50k tokens)."""
        if ends not in self._held:
            if self._pieces is None:
                self._pieces = [piece(self._lib, self.vocab, t) for t in range(self.n_vocab)]
            self._held[ends] = holding(self._pieces, ends)
        return self._held[ends]

    def sample(self, sampler: Sampler, index: int = -1) -> int:
        """The next id, from the logits of the last id decoded (``index``: of that batch position; the
        chain accepts it). Where a lazy grammar waits for its trigger and some token could fire it now, the
        trigger guard draws it instead (``TriggerGuard.draw``)."""
        guard = sampler.guard
        if guard is not None and guard.waiting and guard.may_fire():
            return guard.draw(sampler.chain, self._lib.llama_get_logits_ith(self.ctx, index))
        if sampler.may_run_dry():
            return sampler.sample_short(self._lib.llama_get_logits_ith(self.ctx, index), self.vocab, self.n_vocab)
        if sampler.attached is not None and self._lib.llama_get_sampled_token_ith(self.ctx, index) >= 0:
            sampler.on_device += 1  # (drawn in the graph: llama_sampler_sample hands it over and accepts it)
        token = self._lib.llama_sampler_sample(sampler.chain, self.ctx, index)
        if guard is not None:
            guard.accepted(token)
        return token

    def decode_seqs(self, tokens: Sequence[int], positions: Sequence[int], seqs: Sequence[int],
                    logits: Sequence[bool]) -> None:
        """One ``llama_decode`` of tokens (at most ``n_batch``), each of its sequence (0 for ``eval``;
        several: parallel.py), with logits where ``logits`` says."""
        lib, batch, n = self._lib, self._batch, len(tokens)
        ctypes.memmove(batch.token, (ctypes.c_int32 * n)(*tokens), 4 * n)
        ctypes.memmove(batch.pos, (ctypes.c_int32 * n)(*positions), 4 * n)
        ctypes.memmove(batch.logits, (ctypes.c_int8 * n)(*logits), n)
        for i in range(n):
            batch.seq_id[i][0] = seqs[i]
        batch.n_tokens = n
        counts = self._thread_counts(self.threads.now())
        if counts != self._counts:
            lib.llama_set_n_threads(self.ctx, *counts)
            self._counts = counts
        code = lib.llama_decode(self.ctx, batch)
        if code != 0:
            raise RuntimeError(f"llama_decode returned {code}")

    def _thread_counts(self, threads: int) -> tuple[int, int]:
        return threads, self.threads_batch or threads

    def seq_copy(self, source: int, target: int, n: int) -> None:
        self._lib.llama_memory_seq_cp(self._memory, source, target, 0, n)

    def seq_drop(self, seq: int, start: int = -1) -> None:
        """Drop a sequence's cells from position ``start`` on (-1: all of them)."""
        self._lib.llama_memory_seq_rm(self._memory, seq, start, -1)

    def can_shift(self) -> bool:
        """Whether this model's memory can move cached cells to other positions (a context shift)."""
        return bool(self._lib.llama_memory_can_shift(self._memory))

    def move_back(self, p: int, q: int, k: int) -> None:
        """Drop the cached cells at positions ``p..q`` and move the ``k`` after them back to ``p`` (the keys
        re-rotated, as llama.cpp's own context shift does); the rest after them is dropped too."""
        lib, memory = self._lib, self._memory
        lib.llama_memory_seq_rm(memory, -1, p, q)
        lib.llama_memory_seq_add(memory, 0, q, q + k, -(q - p))
        lib.llama_memory_seq_rm(memory, -1, p + k, -1)
        self.cached = self.cached[:p] + self.cached[q:q + k]

    def state(self) -> bytes:
        """llama.cpp's whole state of this context (the KV cache of what it holds)."""
        lib = self._lib
        size = lib.llama_state_get_size(self.ctx)
        buffer = (ctypes.c_uint8 * size)()
        written = lib.llama_state_get_data(self.ctx, buffer, size)
        return ctypes.string_at(buffer, written)  # (slicing the array would make a list of every byte first)

    def set_state(self, state: bytes, ids: Sequence[int]) -> bool:
        """Restore a state ``state()`` gave, holding ``ids``; False (the cache emptied) when llama.cpp refuses."""
        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if not ids or len(ids) > self.n_ctx or self._lib.llama_state_set_data(self.ctx, buffer, len(state)) == 0:
            self.reset()
            return False
        self.cached = list(ids)
        return True

    def grammar_problem(self, gbnf: str) -> str:
        """"" when llama.cpp's grammar parser takes ``gbnf``, else its complaint, so that a bad grammar is
        one line now, not a crash of the sampler later. The parser writes its complaint to stderr (caught
        here); the checks after it (a rule that starts with itself, no ``root``) say theirs to the log."""
        lib = self._lib
        sys.stderr.flush()
        saved = os.dup(2)
        with tempfile.TemporaryFile() as log, llama_log().caught() as logged:
            os.dup2(log.fileno(), 2)
            try:
                sampler = lib.llama_sampler_init_grammar(self.vocab, gbnf.encode("utf-8"), b"root")
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            log.seek(0)
            said = log.read(4096).decode("utf-8", "replace")
        if sampler:
            lib.llama_sampler_free(sampler)
            return ""
        parsed = next((line.split("error parsing grammar:", 1)[1].strip() for line in said.splitlines()
                       if "error parsing grammar:" in line), "")
        return parsed or _grammar_refusal(" ".join(line.strip() for line in logged))

    def tokenize(self, text: bytes, special: bool) -> list[int]:
        """llama.cpp's own tokenization (no BOS), only for comparing ours against it (--check)."""
        return _tokenize(self._lib, self.vocab, text, special)

    def close(self) -> None:
        lib = self._lib
        if self._batch is not None:
            lib.llama_batch_free(self._batch)
            self._batch = None
        if self.ctx:
            lib.llama_free(self.ctx)
            self.ctx = None
        if self.model:
            lib.llama_model_free(self.model)
            self.model = None


def _tokenize(lib: ModuleType, vocab: object, text: bytes, special: bool) -> list[int]:
    size = len(text) + 8
    for _ in range(2):
        out = (ctypes.c_int32 * size)()
        n = lib.llama_tokenize(vocab, text, len(text), out, size, False, special)
        if n >= 0:
            return list(out[:n])
        size = -n
    raise RuntimeError("llama_tokenize failed")


def _grammar_refusal(logged: str) -> str:
    """llama.cpp's reason for a grammar that parses but is refused, in a user's words::

        >>> print(_grammar_refusal("unsupported grammar, left recursion detected for nonterminal at index 0"))
        a rule starts with itself (left recursion, as in x ::= x "a" | "b"), which llama.cpp's grammars can't take
    """
    if "left recursion" in logged:
        return ("a rule starts with itself (left recursion, as in x ::= x \"a\" | \"b\"), which llama.cpp's "
                "grammars can't take")
    if "does not contain a 'root' symbol" in logged:
        return "it has no rule named root, where a grammar starts"
    return logged.removeprefix("invalid grammar: ") or "llama.cpp can't parse it"


def schema_to_gbnf(schema_json: str) -> str:
    """A JSON schema as GBNF, by llama-cpp-python's port of llama.cpp's converter (pure Python; it raises
    what it likes on a schema it can't take), with llama.cpp's own repetitions: the port writes an item
    out ``minLength`` times and nests ``maxItems`` groups, so ``"maxLength": 100000000`` took gigabytes of
    memory before llama.cpp ever saw the grammar."""
    bindings()  # (the package's absence said as everywhere else)
    from llama_cpp import llama_grammar

    ported = llama_grammar._build_repetition
    llama_grammar._build_repetition = repetition
    try:
        return llama_grammar.json_schema_to_gbnf(schema_json)
    finally:
        llama_grammar._build_repetition = ported


def repetition(item: str, min_items: int, max_items: int | None, separator_rule: str | None = None,
               item_rule_is_literal: bool = False) -> str:
    """``item`` from ``min_items`` to ``max_items`` times (None: no most), as llama.cpp's converter writes
    it (``build_repetition``, common/json-schema-to-grammar.cpp): GBNF's own ``{m,n}``, which its parser
    takes, and the separator before each item but the first.

        >>> repetition("[a-z]", 2, 5), repetition("item", 0, None, '","'), repetition('"ab"', 3, 3)
        ('[a-z]{2,5}', '(item ("," item)*)?', '"ab"{3,3}')
    """
    if max_items == 0:
        return ""
    if min_items == 0 and max_items == 1:
        return f"{item}?"
    if not separator_rule:
        if min_items == 1 and max_items is None:
            return f"{item}+"
        if min_items == 0 and max_items is None:
            return f"{item}*"
        return f"{item}{{{min_items},{'' if max_items is None else max_items}}}"
    rest = repetition(f"({separator_rule} {item})", max(min_items - 1, 0), None if max_items is None else max_items - 1)
    return f"({item} {rest})?" if min_items == 0 else f"{item} {rest}"
