"""Long chats with the real SmolLM2: overflow keeps the KV cache (exact ids), cancelled evaluations keep
the cache consistent, a saved state resumes a chat without evaluating it again."""

from __future__ import annotations

import io
import json
import os

import pytest
from conftest import model_path

from rml_chat.core.conversation import Conversation
from rml_chat.core.message import Message
from rml_chat.core.model import load_model
from rml_chat.core.session import ChatSession, ContextOptions, SessionOptions
from rml_chat.engines.base import Generation, Sampling, common_prefix
from rml_chat.engines.kv_cache import read_state, stamp_of, state_path, write_state
from rml_chat.engines.local import LocalEngine
from rml_chat.frontends.progress import EvalProgress

GREEDY = Sampling(temp=0.0, seed=0, max_tokens=24)


@pytest.fixture(scope="module")
def model():
    return load_model(str(model_path("smollm2")))


def _session(model, n_ctx: int) -> ChatSession:
    return ChatSession(model, LocalEngine(model.weights, n_ctx=n_ctx, n_threads=2), SessionOptions(Sampling(**vars(GREEDY))))


def test_an_overflowing_chat_evaluates_only_what_is_new_and_the_cache_holds_the_prompts_ids(model) -> None:
    session = _session(model, 512)
    notes: list[str] = []
    shifts = 0
    try:
        for turn in range(26):
            text = f"Question {turn}: name one animal that lives in the sea, and say where it lives."
            new_tokens = len(model.encoder.encode(model.encoder.format([{"role": "user", "content": text}])))
            before = len(notes)
            result = session.turn(text, lambda _: None, notes.append)
            for note in notes[before:]:  # the notice says what was really evaluated
                assert f"; {result.generation.evaluated} to evaluate" in note, (note, result.generation.evaluated)
            cached = session.engine.cached_ids()
            assert cached[:len(result.prompt_ids)] == result.prompt_ids  # exactly the rendered kept conversation
            assert cached[len(result.prompt_ids):] == result.generation.tokens[:len(cached) - len(result.prompt_ids)]
            if turn:  # the previous reply is re-encoded to the ids generated: only the new message is evaluated
                assert result.generation.evaluated <= new_tokens + 8, (turn, result.generation.evaluated)
            shifts += result.dropped > 0
    finally:
        session.engine.close()
    assert shifts >= 2 and all("the cache kept" in note for note in notes if "context full" in note)
    assert any("left the model's window" in note for note in notes)


def test_a_shift_keeps_exactly_the_tokens_after_the_dropped_ones(model) -> None:
    engine = LocalEngine(model.weights, n_ctx=512, n_threads=2)
    try:
        text = " ".join(f"w{i}" for i in range(120))
        ids = model.encoder.encode(model.encoder.format([{"role": "user", "content": text}]))
        list(engine.generate(ids, Sampling(temp=0.0, max_tokens=1), model.stop_ids, Generation()))
        assert engine.cached_ids()[:len(ids)] == ids
        dropped = ids[:10] + ids[40:]  # as if the 30 tokens after the first 10 were an old exchange
        assert engine.shift(dropped).kept == len(ids) - 40
        assert engine.cached_ids() == dropped
        gen = Generation()
        list(engine.generate(dropped + ids[5:8], Sampling(temp=0.0, max_tokens=2), model.stop_ids, gen))
        assert gen.evaluated == 3  # only the three new ids
    finally:
        engine.close()


def test_replies_after_a_shift_agree_with_a_full_evaluation(model) -> None:
    session = _session(model, 512)
    reference = LocalEngine(model.weights, n_ctx=512, n_threads=2)
    agree = total = 0
    try:
        for turn in range(12):
            result = session.turn(f"Tell me fact number {turn} about the moon, briefly.", lambda _: None,
                                  lambda _: None)
            if turn >= 8:
                reference.reset()
                fresh = list(reference.generate(result.prompt_ids, session.options.sampling, model.stop_ids, Generation()))
                agree += sum(a == b for a, b in zip(result.generation.tokens, fresh))
                total += max(len(fresh), len(result.generation.tokens))
    finally:
        session.engine.close()
        reference.close()
    assert total and agree / total >= 0.5, (agree, total)  # a shifted cache is not bit-identical; sane, though


def test_a_resumed_chat_evaluates_only_the_new_message(model, tmp_path) -> None:
    session = _session(model, 1024)
    saved = tmp_path / "chat.json"
    try:
        session.turn("What is the capital of France?", lambda _: None, lambda _: None)
        session.turn("And of Italy?", lambda _: None, lambda _: None)
        session.conversation.save(saved)
        assert session.engine.save_state(state_path(saved), model.weights)[0] > 0
    finally:
        session.engine.close()
    resumed = _session(model, 1024)
    try:
        resumed.conversation = Conversation.load(saved)
        restored, why = resumed.restore_state(state_path(saved))
        cached = resumed.engine.cached_ids()  # (the reply's text encodes to other ids than the model wrote)
        assert len(cached) - 20 < restored == common_prefix(cached, resumed.prompt_ids()) and why == ""
        text = "And of Spain?"
        new_tokens = len(model.encoder.encode(model.encoder.format([{"role": "user", "content": text}])))
        result = resumed.turn(text, lambda _: None, lambda _: None)
        assert result.generation.evaluated <= new_tokens + 2
    finally:
        resumed.engine.close()


def test_a_damaged_stale_or_foreign_state_is_ignored_with_a_reason(model, tmp_path) -> None:
    engine = LocalEngine(model.weights, n_ctx=512, n_threads=2)
    try:
        ids = model.encoder.encode(model.encoder.format([{"role": "user", "content": "Hi"}]))
        list(engine.generate(ids, Sampling(temp=0.0, max_tokens=1), model.stop_ids, Generation()))
        path = tmp_path / "chat.json.kv"
        engine.save_state(path, model.weights)
        good = path.read_bytes()
        cases = {"damaged": good[:-100] + b"x" * 100, "not ours": b"GGUF" + good[4:], "empty": b""}
        for name, data in cases.items():
            path.write_bytes(data)
            assert engine.load_state(path, model.weights)[0] == 0, name
        path.write_bytes(good)
        assert engine.load_state(path, model_path("gemma3")) == (0, "its state was saved with other weights")
        other = LocalEngine(model.weights, n_ctx=1024, n_threads=2)
        try:
            assert other.load_state(path, model.weights) == (0, "its state was saved with another context size")
        finally:
            other.close()
        assert engine.load_state(tmp_path / "missing.kv", model.weights) == (0, "no saved state beside it")
        os.mkfifo(tmp_path / "fifo.kv")  # (read, it would wait for a writer for ever)
        assert engine.load_state(tmp_path / "fifo.kv", model.weights) == (
            0, "its state file is not a regular file (a folder, a FIFO or a device)")
        assert engine.load_state(path, model.weights)[0] == len(engine.cached_ids()) > 0
    finally:
        engine.close()


def test_a_state_beside_a_chat_counts_only_what_the_chat_gains(model, tmp_path) -> None:
    """A state file that is whole (its CRC holds) but lists ids no vocabulary has is damaged; one that holds
    another chat is restored, and said to give nothing; one that holds the chat's start counts that."""
    session = _session(model, 1024)
    saved = tmp_path / "chat.json"
    try:
        session.turn("What is the capital of France?", lambda _: None, lambda _: None)
        session.conversation.save(saved)
        session.engine.save_state(state_path(saved), model.weights)
        stamp = stamp_of(model.weights, session.engine.n_ctx)
        ids, state, _ = read_state(state_path(saved), stamp)
        write_state(state_path(saved), state, stamp, [10**9, *ids[1:]])
        assert session.restore_state(state_path(saved)) == (0, "its state file is damaged")
        write_state(state_path(saved), state, stamp, ids[::-1])  # (what a chat that starts otherwise holds)
        assert session.restore_state(state_path(saved)) == (0, "its state holds another chat")
        write_state(state_path(saved), state, stamp, ids)
        session.conversation = Conversation()
        session.turn("Name a colour.", lambda _: None, lambda _: None)
        held, why = session.restore_state(state_path(saved))  # (the system prompt and the user's header)
        assert why == "" and 0 < held == common_prefix(ids, session.prompt_ids()) < len(ids) // 2
        session.conversation = Conversation.load(saved)
        held, why = session.restore_state(state_path(saved))
        assert why == "" and len(ids) - 20 < held == common_prefix(ids, session.prompt_ids())
    finally:
        session.engine.close()


def test_the_progress_line_shows_on_a_terminal_after_half_a_second_and_is_erased() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    progress = EvalProgress(stream)
    progress(512, 4096, 0.2)
    assert stream.getvalue() == ""  # a short evaluation shows nothing
    progress(1024, 4096, 0.8)
    assert "evaluating the prompt: 1024/4096 tokens · 1280 tok/s" in stream.getvalue()
    progress.clear()
    assert stream.getvalue().endswith("\r\x1b[K") and not progress.shown
    quiet = EvalProgress(io.StringIO())
    quiet(1024, 4096, 5.0)
    assert not quiet.shown


def test_a_cut_evaluation_keeps_the_message_records_no_reply_and_the_next_message_goes_with_it(model) -> None:
    session = _session(model, 2048)
    calls = []

    def interrupt(done: int, total: int, seconds: float) -> None:
        calls.append(done)
        raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            session.turn("word " * 1200, lambda _: None, lambda _: None, interrupt)
        assert calls and session.conversation.messages == [Message("user", "word " * 1200)]
        cached = session.engine.cached_ids()
        assert cached == session.prompt_ids()[:len(cached)]  # consistent: a prefix of the prompt
        result = session.turn("Now just say OK.", lambda _: None, lambda _: None)
        assert [m.role for m in session.conversation.messages] == ["user", "assistant"]
        assert session.conversation.messages[0].content.endswith("\n\nNow just say OK.")
        assert result.generation.evaluated < len(result.prompt_ids)  # what was evaluated before the cut stayed
    finally:
        session.engine.close()


@pytest.mark.whitebox
def test_threads_and_threads_batch_reach_llama_cpp(model) -> None:
    engine = LocalEngine(model.weights, n_ctx=256, n_threads=1, n_threads_batch=2)
    try:
        import llama_cpp

        assert engine.threads == "1 (prompt evaluation: 2)"
        assert llama_cpp.llama_n_threads(engine._llama.ctx) == 1
        assert llama_cpp.llama_n_threads_batch(engine._llama.ctx) == 2
    finally:
        engine.close()


def test_json_report_counts_stay_honest_after_a_resume(tmp_path) -> None:
    """The JSON a script gets after --resume FILE reports what llama.cpp really evaluated."""
    import subprocess
    import sys

    chat = tmp_path / "chat.json"
    Conversation(None, [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
                 str(model_path("smollm2"))).save(chat)
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--resume", str(chat), "-p", "Bye", "--temp", "0", "-n",
                           "4", "--json"], capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["prompt_tokens_evaluated"] == report["prompt_tokens"]  # no state beside it: all evaluated
    assert b"no saved state beside it" in done.stderr


def test_two_hundred_exchanges_through_512_tokens_keep_every_message_and_resume_with_the_same_window(
        model, tmp_path) -> None:
    session = ChatSession(model, LocalEngine(model.weights, n_ctx=512, n_threads=2),
                          SessionOptions(Sampling(temp=0.0, max_tokens=4)))
    saved = tmp_path / "chat.json"
    notes: list[str] = []
    try:
        for turn in range(200):
            session.turn(f"Item {turn}: say a colour.", lambda _: None, notes.append)
        conversation = session.conversation
        conversation.save(saved)
        assert len(conversation.messages) == 400 and conversation.messages[0].content == "Item 0: say a colour."
        assert 0 < conversation.window_start < 400 and conversation.messages[conversation.window_start].role == "user"
        assert sum("left the model's window" in note for note in notes) >= 2
        window = session.prompt_ids()
    finally:
        session.engine.close()
    resumed = Conversation.load(saved)
    assert len(resumed.messages) == 400 and resumed.window_start == conversation.window_start
    again = ChatSession(model, LocalEngine(model.weights, n_ctx=512, n_threads=2),
                        SessionOptions(Sampling(temp=0.0, max_tokens=4)))
    try:
        again.conversation = resumed
        assert again.prompt_ids() == window  # the same window: the model sees what it saw before
        result = again.turn("Item 200: say a colour.", lambda _: None, lambda _: None)
        assert len(again.conversation.messages) == 402 and result.context_used <= 512
    finally:
        again.engine.close()


@pytest.mark.offline
def test_a_window_start_out_of_range_is_one_line() -> None:
    from rml_chat.core.conversation import ChatError

    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert Conversation.from_json({"messages": messages}, "f.json").window_start == 0  # older files: the whole
    with pytest.raises(ChatError, match="'window_start' must be a message index from 0 to 2"):
        Conversation.from_json({"messages": messages, "window_start": 5}, "f.json")
    conversation = Conversation(None, list(messages), window_start=2)
    assert conversation.for_prompt() == [] and conversation.undo() and conversation.window_start == 0


def _filled_session(model, context_shift: bool) -> ChatSession:
    """512 tokens of context, two exchanges of ~130 tokens each: the next long reply fills it."""
    session = ChatSession(model, LocalEngine(model.weights, n_ctx=512, n_threads=2),
                          SessionOptions(Sampling(temp=0.0, seed=0, max_tokens=-1), context=ContextOptions(shift=context_shift)))
    for n in (1, 2):
        session.conversation.add(Message("user", f"Exchange {n}: list some numbers."))
        session.conversation.add(Message("assistant", " ".join(str(i) for i in range(60))))
    return session


def test_a_reply_that_fills_the_context_moves_the_window_and_goes_on_with_context_shift(model) -> None:
    shifted, notes = _filled_session(model, True), []
    try:
        result = shifted.turn("Write a very long story about a dragon and a knight.", lambda _: None, notes.append)
        assert result.shifts >= 1
        assert any(note.startswith("context full during the reply: the 1 oldest exchange left") for note in notes)
        tokens = result.generation.tokens
        assert len(tokens) > 512 - result.generation.prompt_tokens  # more than fitted at first
        assert result.context_used <= 512 and shifted.engine.cached_ids()[:len(result.prompt_ids)] == result.prompt_ids
        assert shifted.conversation.messages[-1].content == result.reply and len(shifted.conversation.messages) == 6
    finally:
        shifted.engine.close()
    went_on = tokens[len(tokens) - (result.context_used - len(result.prompt_ids)):]  # after the last shift
    fresh = LocalEngine(model.weights, n_ctx=512, n_threads=2)  # the oracle: the same ids, evaluated whole
    try:
        again = list(fresh.generate(result.prompt_ids, Sampling(temp=0.0, max_tokens=8), model.stop_ids, Generation()))
    finally:
        fresh.close()
    assert again == went_on[:8]
    cut = _filled_session(model, False)
    try:
        plain = cut.turn("Write a very long story about a dragon and a knight.", lambda _: None, lambda _: None)
    finally:
        cut.engine.close()
    assert plain.generation.stop_reason == "context" and plain.shifts == 0
    assert cut.conversation.window_start < shifted.conversation.window_start  # only the fit before the reply moved it
    assert tokens[:len(plain.generation.tokens)] == plain.generation.tokens  # the same reply, cut where it filled
