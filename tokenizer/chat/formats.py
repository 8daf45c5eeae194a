"""The chat-format table: one record per prompt format, written as the official templates write it.

A record is data, not code: role templates with ``{content}``, ``{bos}`` and ``{eos}`` holes, the
generation prompt, how the system message is placed, and the texts that mark it in a Jinja template.
``render.py`` turns a record plus messages into segments; ``detect.py`` picks a record.

Worked example, ChatML with [system "S", user "Hi"] and a generation prompt::

    <|im_start|>system\\nS<|im_end|>\\n<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n

``<|im_start|>`` and ``<|im_end|>`` are markers (special segments); "system\\n", "S", "\\n" … are text.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

# How the system message is placed.
SYSTEM_TURN = "turn"            # its own turn, written with roles["system"]
SYSTEM_FOLD_FIRST = "fold_first"  # prepended to the first user message with `fold`
SYSTEM_FOLD_LAST = "fold_last"    # prepended to the last user message with `fold`
SYSTEM_FORBIDDEN = "forbidden"    # the template raises on a system message

# When message contents are stripped of surrounding whitespace.
TRIM_NONE = "none"
TRIM_CONTENT = "content"  # each message's own content, before folding the system text in
TRIM_FOLDED = "folded"    # the content after folding (Llama 2 strips "<<SYS>>…" + user text)


@dataclass(frozen=True)
class ChatFormat:
    """One prompt format. Strings may hold ``{content}``, ``{bos}``, ``{eos}`` and ``{role}``."""

    name: str
    roles: dict[str, str]
    generation_prompt: str
    markers: tuple[str, ...] = ()          # special-token texts the role strings contain
    #: turn terminators and openers (a model that opens the next turn has finished its reply): stop ids
    #: when they are single tokens of the vocabulary, stop strings otherwise.
    stops: tuple[str, ...] = ()
    bos: bool = False                      # the template writes BOS once, at the very start
    system: str = SYSTEM_TURN
    fold: str = "{system}\n\n{content}"
    default_system: str | None = None      # written when the conversation has no system message
    skip_empty_system: bool = False        # Phi-3 drops a system message with empty content
    trim: str = TRIM_NONE
    trim_system: bool = True               # with TRIM_CONTENT: the system text too
    alternate: bool = False                # user/assistant must alternate after the system message
    strip_think: str = ""                  # "" | "split" | "split_lstrip": drop reasoning from history
    end_without_prompt: str = ""           # written instead of the generation prompt (Phi-3: EOS)
    think: tuple[str, str, str] = ("", "", "")  # appended to the prompt for thinking None / on / off
    role_names: dict[str, str] = field(default_factory=dict)  # e.g. assistant -> "model"
    detect: tuple[str, ...] = ()           # every one of these is in the Jinja template …
    exclude: tuple[str, ...] = ()          # … and none of these
    notes: str = ""
    #: the model's own template, once this record is verified against it: what the record can't write
    #: is rendered by the template (``render.format_chat``)
    template: str | None = None

    def with_name(self, name: str, **changes: object) -> ChatFormat:
        return replace(self, name=name, **changes)

    @property
    def writes_bos(self) -> bool:
        return self.bos or any("{bos}" in text for text in self.roles.values())

    @property
    def ends_turns(self) -> bool:
        """Whether the format marks where an answer ends (a stop, or text after an assistant's content):
        "raw" marks none, so no reply can be expected to stop."""
        return bool(self.stops) or bool(self.roles["assistant"].split("{content}", 1)[-1].strip())

    @property
    def thinking_switch(self) -> bool:
        """Thinking on and off write different prompts."""
        return self.think[1] != self.think[2]

    def template_texts(self) -> list[str]:
        return list(self.markers)

    def after_assistant_texts(self) -> list[str]:
        return []


_QWEN35_PREFILL = "{{- '<think>\\n' }}"
_QWEN3_HISTORY = "split('</think>')[-1].lstrip('\\n')"
_CHATML_TURN = "<|im_start|>{role}\n{content}<|im_end|>\n"
CHATML = ChatFormat(
    name="chatml",
    roles={"system": _CHATML_TURN, "user": _CHATML_TURN, "assistant": _CHATML_TURN, "tool": _CHATML_TURN},
    generation_prompt="<|im_start|>assistant\n",
    markers=("<|im_start|>", "<|im_end|>", "<think>", "</think>"),
    stops=("<|im_end|>", "<|endoftext|>", "<|im_start|>"),
    detect=("<|im_start|>", "<|im_end|>"),
    exclude=("bos_token", "<think>", "<|im_sep|>", "Reasoning Mode", "<|im_start|>system\nYou are"),
)

_LLAMA3_TURN = "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>"
LLAMA3 = ChatFormat(
    name="llama3",
    roles={"system": _LLAMA3_TURN, "user": _LLAMA3_TURN, "assistant": _LLAMA3_TURN, "tool": _LLAMA3_TURN},
    role_names={"tool": "ipython"},
    generation_prompt="<|start_header_id|>assistant<|end_header_id|>\n\n",
    markers=("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>"),
    stops=("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|start_header_id|>"),
    bos=True,
    trim=TRIM_CONTENT,
    detect=("<|start_header_id|>", "<|eot_id|>"),
    exclude=("Cutting Knowledge", "<|im_start|>", "functions"),
)
_LLAMA31_SYSTEM = ("<|start_header_id|>system<|end_header_id|>\n\n"
                   "Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n{content}<|eot_id|>")

_GEMMA_TURN = "<start_of_turn>{role}\n{content}<end_of_turn>\n"
GEMMA = ChatFormat(
    name="gemma",
    roles={"user": _GEMMA_TURN, "assistant": _GEMMA_TURN},
    role_names={"assistant": "model"},
    generation_prompt="<start_of_turn>model\n",
    markers=("<start_of_turn>", "<end_of_turn>"),
    stops=("<end_of_turn>", "<eos>", "<start_of_turn>"),
    bos=True,
    system=SYSTEM_FOLD_FIRST,
    trim=TRIM_CONTENT,
    alternate=True,
    detect=("<start_of_turn>", "first_user_prefix"),
    notes="Gemma 3: the system message is folded into the first user turn",
)

_GEMMA4_TURN = "<|turn>{role}\n{content}<turn|>\n"
_GEMMA4_NO_THOUGHT = "<|channel>thought\n<channel|>"

_MISTRAL_ASSISTANT = "{content}{eos}"
MISTRAL_V7_TEKKEN = ChatFormat(
    name="mistral-v7-tekken",
    roles={"system": "[SYSTEM_PROMPT]{content}[/SYSTEM_PROMPT]", "user": "[INST]{content}[/INST]",
           "assistant": _MISTRAL_ASSISTANT},
    generation_prompt="",
    markers=("[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[INST]", "[/INST]"),
    stops=("</s>",),
    bos=True,
    alternate=True,
    detect=("[SYSTEM_PROMPT]", "[INST]"),
    exclude=("You are", "[THINK]", "tools"),
)
MISTRAL_V3_TEKKEN = ChatFormat(
    name="mistral-v3-tekken",
    roles={"user": "[INST]{content}[/INST]", "assistant": _MISTRAL_ASSISTANT},
    generation_prompt="",
    markers=("[INST]", "[/INST]"),
    stops=("</s>",),
    bos=True,
    system=SYSTEM_FOLD_LAST,
    alternate=True,
    detect=('"[INST]" + system_message + "\\n\\n"', "loop.last and system_message is defined"),
    exclude=("[SYSTEM_PROMPT]",),
    notes="Mistral Nemo: the system message goes into the LAST user turn",
)

_PHI3_TURN = "<|{role}|>\n{content}<|end|>\n"
PHI3 = ChatFormat(
    name="phi3",
    roles={"system": _PHI3_TURN, "user": _PHI3_TURN, "assistant": _PHI3_TURN},
    generation_prompt="<|assistant|>\n",
    end_without_prompt="{eos}",
    markers=("<|system|>", "<|user|>", "<|assistant|>", "<|end|>"),
    stops=("<|end|>", "<|endoftext|>", "<|user|>", "<|assistant|>"),
    skip_empty_system=True,
    detect=("<|assistant|>", "<|end|>", "<|user|>"),
    exclude=("<|im_start|>", "bos_token", "<|begin_"),
)

_PHI4_TURN = "<|im_start|>{role}<|im_sep|>{content}<|im_end|>"
_DEEPSEEK_USER = "<｜User｜>{content}"
_DEEPSEEK = ChatFormat(
    name="deepseek-r1",
    roles={"system": "{content}", "user": _DEEPSEEK_USER,
           "assistant": "<｜Assistant｜>{content}<｜end▁of▁sentence｜>"},
    generation_prompt="<｜Assistant｜><think>\n",
    markers=("<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>", "<think>", "</think>"),
    stops=("<｜end▁of▁sentence｜>", "<｜User｜>"),
    bos=True,
    strip_think="split",
    detect=("<｜User｜>", "<｜Assistant｜><think>\\n'}}", "ns.system_prompt = message['content']"),
    exclude=("enable_thinking", "<｜User｜>' + message['content'] + '<｜end▁of▁sentence｜>"),
    notes="DeepSeek R1 and its distills: the system text is written bare after BOS; <think> prefill",
)

_GRANITE_TURN = "<|start_of_role|>{role}<|end_of_role|>{content}<|end_of_text|>\n"
GRANITE = ChatFormat(
    name="granite",
    roles={"system": _GRANITE_TURN, "user": _GRANITE_TURN, "assistant": _GRANITE_TURN, "tool": _GRANITE_TURN},
    generation_prompt="<|start_of_role|>assistant<|end_of_role|>",
    markers=("<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>"),
    stops=("<|end_of_text|>", "<|start_of_role|>"),
    detect=("<|start_of_role|>", "<|end_of_role|>"),
    exclude=("You are a helpful assistant. Please", "Knowledge Cutoff"),
    notes="Granite 4.1: no default system prompt",
)

_COMMAND_R_TURN = "<|START_OF_TURN_TOKEN|><|{role}|>{content}<|END_OF_TURN_TOKEN|>"
_ZEPHYR_TURN = "<|{role}|>\n{content}{eos}\n"
_RWKV_TURN = "{role}: {content}\n\n"

FORMATS: dict[str, ChatFormat] = {f.name: f for f in (
    CHATML.with_name("qwen3", strip_think="split_lstrip", think=("", "", "<think>\n\n</think>\n\n"),
                     detect=("<|im_start|>", "enable_thinking", "last_query_index"),
                     exclude=("<|im_sep|>", "bos_token", _QWEN35_PREFILL),
                     notes="Qwen3: enable_thinking=False writes an empty think block"),
    CHATML.with_name("qwen3.5", strip_think="split_lstrip",
                     generation_prompt="<|im_start|>assistant\n<think>\n",
                     think=("", "", "</think>\n\n"), trim=TRIM_CONTENT,
                     detect=("<|im_start|>", "enable_thinking", "last_query_index", _QWEN35_PREFILL),
                     exclude=("<|im_sep|>", "bos_token"),
                     notes="Qwen3.5: thinking on by default (a <think> prefill)"),
    CHATML.with_name("qwen2.5", default_system="You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
                     detect=("<|im_start|>", "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."),
                     exclude=("<think>",)),
    CHATML.with_name("qwen2", default_system="You are a helpful assistant.",
                     detect=("<|im_start|>system\nYou are a helpful assistant.<|im_end|>",), exclude=()),
    CHATML.with_name("smollm2", default_system="You are a helpful AI assistant named SmolLM, trained by Hugging Face",
                     detect=("<|im_start|>", "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>"),
                     exclude=("Reasoning Mode",)),
    CHATML.with_name("mimo", default_system="You are MiMo, an AI assistant developed by Xiaomi.",
                     detect=("<|im_start|>", "You are MiMo, an AI assistant developed by Xiaomi."), exclude=()),
    CHATML.with_name("chatml-bos", bos=True, detect=("<|im_start|>", "bos_token"),
                     exclude=("<|im_start|>assistant\n<think>", "<|im_start|>system\nYou are", "<|im_sep|>",
                              "</think>", "You are a function calling")),
    CHATML.with_name("chatml-bos-reasoning", bos=True, strip_think="split_lstrip",
                     detect=("<|im_start|>", "bos_token", _QWEN3_HISTORY),
                     exclude=("<|im_start|>assistant\n<think>", "<|im_start|>system\nYou are", "<|im_sep|>"),
                     notes="MiniCPM5: BOS, reasoning dropped from history as Qwen3 does"),
    CHATML.with_name("chatml-bos-think", bos=True, generation_prompt="<|im_start|>assistant\n<think>\n",
                     strip_think="split_lstrip",
                     detect=("<|im_start|>", "bos_token", "'<|im_start|>assistant\\n<think>\\n'", _QWEN3_HISTORY),
                     exclude=("<|im_start|>system\nYou are", "<|im_sep|>"), notes="StepFun: BOS and a <think> prefill"),
    CHATML,
    ChatFormat(
        name="phi4",
        roles={"system": _PHI4_TURN, "user": _PHI4_TURN, "assistant": _PHI4_TURN},
        generation_prompt="<|im_start|>assistant<|im_sep|>",
        markers=("<|im_start|>", "<|im_sep|>", "<|im_end|>"),
        stops=("<|im_end|>", "<|endoftext|>"),
        detect=("<|im_start|>", "<|im_sep|>")),
    LLAMA3.with_name("llama3.1", roles={**LLAMA3.roles,
                                        "system": _LLAMA31_SYSTEM.replace("{date}", "26 Jul 2024")}, default_system="",
                     detect=("<|start_header_id|>", "Cutting Knowledge Date: December 2023", '"26 Jul 2024"'),
                     exclude=("strftime_now", "<|im_start|>"),
                     notes="Llama 3.1/3.3: the system turn always carries the cutoff and a fixed date"),
    LLAMA3.with_name("llama3.2", roles={**LLAMA3.roles,
                                        "system": _LLAMA31_SYSTEM.replace("{date}", "{today:%d %b %Y}")}, default_system="",
                     detect=("<|start_header_id|>", "Cutting Knowledge Date: December 2023", "strftime_now"),
                     exclude=("<|im_start|>",),
                     notes="Llama 3.2: as 3.1, with today's date"),
    LLAMA3,
    GEMMA.with_name("gemma4", roles={"system": _GEMMA4_TURN, "user": _GEMMA4_TURN, "assistant": _GEMMA4_TURN},
                    system=SYSTEM_TURN, alternate=False, generation_prompt="<|turn>model\n",
                    think=(_GEMMA4_NO_THOUGHT, "", _GEMMA4_NO_THOUGHT),
                    markers=("<|turn>", "<turn|>", "<|channel>", "<channel|>"), stops=("<turn|>", "<eos>", "<|turn>"),
                    detect=("<|turn>", "<turn|>", "strip_thinking"),
                    notes="Gemma 4: system turn; an empty thought channel unless thinking is on "
                          "(thinking on is written without the <|think|> system flag)"),
    GEMMA.with_name("gemma2", system=SYSTEM_FORBIDDEN, detect=("<start_of_turn>", "System role not supported")),
    GEMMA,
    MISTRAL_V7_TEKKEN,
    MISTRAL_V7_TEKKEN.with_name(
        "mistral-v7", roles={"system": "[SYSTEM_PROMPT] {content}[/SYSTEM_PROMPT]", "user": "[INST] {content}[/INST]",
                             "assistant": " {content}{eos}"},
        detect=("[SYSTEM_PROMPT] ", "[INST] "), notes="Mistral Large 2411: v7 with spaces"),
    MISTRAL_V3_TEKKEN,
    MISTRAL_V3_TEKKEN.with_name(
        "mistral-v3", roles={"user": "[INST] {content}[/INST]", "assistant": " {content}{eos}"},
        detect=('"[INST] " + system_message + "\\n\\n"',), notes="Mistral 7B v0.3: [INST] with a space"),
    MISTRAL_V3_TEKKEN.with_name(
        "mistral-v1", roles={"user": " [INST] {content} [/INST]", "assistant": " {content}{eos}"},
        detect=('" [INST] "',), notes="Mistral 7B v0.1/0.2 era (llama.cpp's mistral-v1)"),
    ChatFormat(
        name="llama2",
        roles={"user": "{bos}[INST] {content} [/INST]", "assistant": " {content} {eos}"},
        generation_prompt="",
        markers=("[INST]", "[/INST]"),
        stops=("</s>",),
        system=SYSTEM_FOLD_FIRST,
        fold="<<SYS>>\n{system}\n<</SYS>>\n\n{content}",
        trim=TRIM_FOLDED,
        alternate=True,
        detect=("[INST]", "<<SYS>>"),
        notes="Llama 2: BOS before every [INST]; the system block sits inside the first user turn"),
    PHI3,
    _DEEPSEEK,
    _DEEPSEEK.with_name("deepseek-r1-llama.cpp", roles={**_DEEPSEEK.roles, "user": "<｜User｜>{content}<｜end▁of▁sentence｜>"},
                        detect=("<｜User｜>' + message['content'] + '<｜end▁of▁sentence｜>",), exclude=(),
                        notes="llama.cpp's own R1 template: an end-of-sentence after each user turn"),
    _DEEPSEEK.with_name("deepseek-r1-qwen", think=("</think>", "", "</think>"),
                        detect=("<｜User｜>", "<｜Assistant｜><think>\\n'}}{% if not enable_thinking %}"), exclude=(),
                        notes="R1-Distill-Qwen as llama.cpp ships it: enable_thinking unset closes the think block"),
    GRANITE.with_name("granite-4.0",
                      default_system="You are a helpful assistant. Please ensure responses are professional, "
                                     "accurate, and safe.",
                      detect=("<|start_of_role|>", "You are a helpful assistant. Please ensure responses are professional"),
                      exclude=()),
    GRANITE.with_name("granite-3",
                      default_system="Knowledge Cutoff Date: April 2024. Today's Date: {today:%B %d, %Y}. You are "
                                     "Granite, developed by IBM. You are a helpful AI assistant.",
                      detect=("<|start_of_role|>", "Knowledge Cutoff Date: April 2024.", "You are Granite, developed by IBM."),
                      exclude=()),
    GRANITE,
    ChatFormat(
        name="command-r",
        roles={"system": _COMMAND_R_TURN, "user": _COMMAND_R_TURN, "assistant": _COMMAND_R_TURN},
        role_names={"system": "SYSTEM_TOKEN", "user": "USER_TOKEN", "assistant": "CHATBOT_TOKEN"},
        generation_prompt="<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
        markers=("<|START_OF_TURN_TOKEN|>", "<|SYSTEM_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>",
                 "<|END_OF_TURN_TOKEN|>"),
        stops=("<|END_OF_TURN_TOKEN|>", "<|START_OF_TURN_TOKEN|>"),
        bos=True,
        alternate=True,
        detect=("<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>"),
        exclude=("Preamble", "START_TEXT")),
    ChatFormat(
        name="zephyr",
        roles={"system": _ZEPHYR_TURN, "user": _ZEPHYR_TURN, "assistant": _ZEPHYR_TURN},
        generation_prompt="<|assistant|>\n",
        markers=("<|system|>", "<|user|>", "<|assistant|>"),
        stops=("</s>", "<|endoftext|>", "<|user|>"),
        detect=("<|user|>", "<|assistant|>", "eos_token"),
        exclude=("<|end|>", "<|im_start|>")),
    ChatFormat(
        name="rwkv-world",
        roles={"system": _RWKV_TURN, "user": _RWKV_TURN, "assistant": _RWKV_TURN},
        role_names={"system": "System", "user": "User", "assistant": "Assistant"},
        generation_prompt="Assistant:",
        think=("", "", " <think>\n</think>"),
        stops=("\n\nUser",),
        bos=True,
        trim=TRIM_CONTENT,
        trim_system=False,
        skip_empty_system=True,
        strip_think="split",
        detect=("'User: '", "'Assistant: '"),
        notes="RWKV World: plain role names, a blank line between turns"),
    ChatFormat(
        name="raw",
        roles={"system": "{content}\n\n", "user": "{content}\n", "assistant": "{content}\n"},
        generation_prompt="",
        notes="no template: the messages' texts one after another (base models)"),
)}

# Family markers: a template (or a vocabulary) holding the marker belongs to that family, most specific
# first. Used for the closest format when no record's fingerprint matches exactly, and to pick a format
# from the special tokens of a vocabulary that came without a template.
FAMILY_MARKERS: tuple[tuple[str, str], ...] = (
    ("<|im_sep|>", "phi4"),
    ("<|im_start|>", "chatml"),
    ("<|start_header_id|>", "llama3"),
    ("<start_of_turn>", "gemma"),
    ("<|turn>", "gemma4"),
    ("[SYSTEM_PROMPT]", "mistral-v7-tekken"),
    ("<<SYS>>", "llama2"),
    ("[INST]", "mistral-v3-tekken"),
    ("<｜User｜>", "deepseek-r1"),
    ("<|start_of_role|>", "granite"),
    ("<|START_OF_TURN_TOKEN|>", "command-r"),
    ("<|end|>", "phi3"),
    ("<|assistant|>", "zephyr"),
)
