"""What reading a reply costs, side by side with what generating it costs, in one run.

A reply of SmolLM2-135M (the default model, llama.cpp's generation through llama-cpp-python) is generated
once, a call in each template's syntax appended; the same ids then go through the tokenizer's stream
decoder alone (the reply unparsed) and through the reply parser (``ReplyParser``: decoding, the thought,
the stop strings, the calls as events, the message at the end), under three templates whose calls are
read differently (Qwen 2.5's JSON, Qwen3-Coder's keyed values, gpt-oss's harmony). The figure that
matters is what parsing adds, as a share of the generation's time: it must stay under 1 %.

    python scripts/bench_parse.py [--tokens 256] [--repeat 20] [--long 80000]

``--long N`` then reads a reply of about N tokens (a thought, then an answer, each one paragraph written over
and over; the loop guard left out) and prints what a token costs at the start and at the end of each: the
cost of reading a token must not grow with the reply.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rml_chat.core.model import load_model  # noqa: E402
from rml_chat.core.reply import ReplyFormat, ReplyParser  # noqa: E402
from rml_chat.engines.base import Generation, Sampling  # noqa: E402
from rml_chat.engines.local import LocalEngine  # noqa: E402

TEMPLATES = {  # a template of llama.cpp's set, a call in its syntax appended to the generated text
    "Qwen-Qwen2.5-7B-Instruct": '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
    "Qwen3-Coder": "\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>",
    "openai-gpt-oss-120b": '<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>'
                           '{"city": "Oslo"}',
}
SCHEMAS = {"get_weather": {"type": "object", "properties": {"city": {"type": "string"}}}}


def best(work, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--long", type=int, default=0, metavar="N", help="also a reply of about N tokens")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import fetch_test_data as fetch

    model = load_model(None)
    ids = model.encoder.encode(model.encoder.format([{"role": "user", "content": "Tell me about the sea, at length."}]))
    engine = LocalEngine(model.weights, n_ctx=2048, n_threads=2)
    gen = Generation()
    start = time.perf_counter()
    reply_ids = list(engine.generate(ids, Sampling(temp=0.0, max_tokens=args.tokens), (), gen))
    generating = time.perf_counter() - start
    engine.close()
    text = model.tokenizer.decode(reply_ids)
    print(f"generated {len(reply_ids)} tokens in {generating * 1000:.0f} ms ({len(reply_ids) / generating:.1f} tok/s), "
          f"{len(text)} characters")
    print(f"{'template':28} {'unparsed':>11} {'parsed':>11} {'added / generation':>19}")
    for stem, call in TEMPLATES.items():
        source = (fetch.models_dir() / "templates" / f"{stem}.jinja").read_text(encoding="utf-8")
        reply_format = ReplyFormat.of_template(source)
        written = ("<|channel|>analysis<|message|>" if "gpt-oss" in stem else "") + text + call
        reply_ids_with_call = model.tokenizer.encode(written, parse_special=True)

        def unparsed(ids: list[int] = reply_ids_with_call) -> None:
            decoder = model.tokenizer.stream(skip_special=True, continuation=True)
            for i in ids:
                decoder.feed(i)
            decoder.finish()

        def parsed(reply_format: ReplyFormat = reply_format, ids: list[int] = reply_ids_with_call, stem: str = stem) -> None:
            parser = ReplyParser(reply_format, tokenizer=model.tokenizer, schemas=SCHEMAS)
            for i in ids:
                parser.feed(i)
            parser.finish()
            read = parser.message
            assert read is not None and read.tool_calls and read.tool_calls[0].arguments == {"city": "Oslo"}, (stem, read)

        plain, read = best(unparsed, args.repeat), best(parsed, args.repeat)
        print(f"{stem:28} {plain * 1000:8.2f} ms {read * 1000:8.2f} ms {100 * (read - plain) / generating:17.3f} %")
    print(f"(best of {args.repeat}; the generation's time is one run of {generating * 1000:.0f} ms)")
    if args.long:
        long_reply(model, fetch, args.long)


LONG_OPENINGS = {"Qwen-Qwen3-0.6B": ("<think>\n", "</think>\n\n"),
                 "openai-gpt-oss-120b": ("<|channel|>analysis<|message|>",
                                         "<|end|><|start|>assistant<|channel|>final<|message|>"),
                 "Qwen-Qwen2.5-7B-Instruct": ("", "")}
PARAGRAPH = "Let me think about the problem carefully, step by step.\nFirst, the sea is large; second, it is deep. "


def long_reply(model, fetch, tokens: int) -> None:  # type: ignore[no-untyped-def]
    """µs a token at the start and at the end of a long reply's thought (its first half) and of its answer (the
    second), per template: each must cost the same at its end as at its start."""
    print(f"\n{'a long reply':28} {'tokens':>7} {'thought: start':>15} {'end':>9} {'answer: start':>14} {'end':>9}")
    repeats = max(tokens // 52, 1)  # (the paragraph is about 26 tokens; half thought, half answer)
    for stem, (opening, close) in LONG_OPENINGS.items():
        source = (fetch.models_dir() / "templates" / f"{stem}.jinja").read_text(encoding="utf-8")
        written = opening + PARAGRAPH * repeats + close + PARAGRAPH * repeats
        ids = model.tokenizer.encode(written, parse_special=True)
        parser = ReplyParser(ReplyFormat.of_template(source), tokenizer=model.tokenizer)
        part, marks = len(ids) // 20, []
        for n, token_id in enumerate(ids[:20 * part]):
            if n % part == 0:
                marks.append(time.perf_counter())
            parser.feed(token_id)
        marks.append(time.perf_counter())
        parser.finish()
        cost = [(marks[i + 1] - marks[i]) / part * 1e6 for i in (0, 9, 10, 19)]  # (a twentieth each)
        print(f"{stem:28} {len(ids):7} {cost[0]:12.1f} µs {cost[1]:6.1f} µs {cost[2]:11.1f} µs {cost[3]:6.1f} µs")


if __name__ == "__main__":
    main()
