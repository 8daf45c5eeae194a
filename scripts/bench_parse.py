"""What reading a reply costs, side by side with what generating it costs, in one run.

A reply of SmolLM2-135M (the default model, llama.cpp's generation through llama-cpp-python) is generated
once; its ids then go through the streaming path (``Reply``: decoding, the thought split, stop strings)
and the whole-reply reading (``parse_reply``: thought, answer and calls), under three templates whose
calls are read differently (Qwen 2.5's JSON, Qwen3-Coder's keyed values, gpt-oss's harmony). The figure
that matters is the reading's share of the generation's time: it must stay far under 1 %.

    python scripts/bench_parse.py [--tokens 256] [--repeat 20]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rml_chat.core.model import load_model  # noqa: E402
from rml_chat.core.read_reply import ReplyFormat, parse_reply  # noqa: E402
from rml_chat.core.reply import Reply  # noqa: E402
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
    print(f"{'template':28} {'stream (Reply)':>15} {'parse_reply':>12} {'parse / generation':>19}")
    for stem, call in TEMPLATES.items():
        source = (fetch.models_dir() / "templates" / f"{stem}.jinja").read_text(encoding="utf-8")
        reply_format = ReplyFormat.of_template(source)
        written = ("<|channel|>analysis<|message|>" if "gpt-oss" in stem else "") + text + call
        reply_ids_with_call = model.tokenizer.encode(written, parse_special=True)

        def stream(reply_format: ReplyFormat = reply_format, ids: list[int] = reply_ids_with_call) -> None:
            reply = Reply(model.tokenizer, reply_format.stop_strings, reply_format.reasoning)
            for i in ids:
                reply.feed(i)
            reply.finish()

        def parse(reply_format: ReplyFormat = reply_format, written: str = written, stem: str = stem) -> None:
            read = parse_reply(reply_format, written, schemas=SCHEMAS, in_thought=False)
            assert read.tool_calls and read.tool_calls[0].arguments == {"city": "Oslo"}, (stem, read)

        streamed, parsed = best(stream, args.repeat), best(parse, args.repeat)
        print(f"{stem:28} {streamed * 1000:12.2f} ms {parsed * 1000:9.2f} ms {100 * parsed / generating:17.3f} %")
    print(f"(best of {args.repeat}; the generation's time is one run of {generating * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
