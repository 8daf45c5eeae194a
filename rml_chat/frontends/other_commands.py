"""The commands of ``ollama run`` and ``llama-cli`` typed in this chat: run as ours where one of ours does the
same, else one line saying what does. Someone who has typed ``/bye`` for a year types it here too.

A line is looked up by its first words, the longest first (``/set parameter`` before ``/set``); what follows
them goes with the command. ollama's parameter names (``num_ctx``, ``num_predict``, ``mirostat_tau`` …) become
llama.cpp's, which ``/set`` takes::

    >>> as_ours("/bye")
    Translated(line='/exit', note='')
    >>> as_ours("/set parameter num_ctx 8192").line
    '/set ctx-size 8192'
    >>> as_ours("/set think high").line
    '/set reasoning-effort high'
    >>> as_ours("/show modelfile").line is None
    True
    >>> as_ours("/set temp 0.2") is None     # (ours: left to the command itself)
    True
"""

from __future__ import annotations

from dataclasses import dataclass

from .history import history_path


@dataclass(frozen=True)
class Translated:
    """``line``: our command to run (None: none does the same); ``note``: a line to show first ("": none)."""

    line: str | None
    note: str = ""


#: the same command under another tool's name: its words -> ours (what follows them goes with it)
SAME: dict[str, str] = {
    "/bye": "/exit",                      # ollama
    "/?": "/help",                        # ollama (/? shortcuts too: /help lists the keys)
    "/read": "/file",                     # llama-cli: a text file into the next message
    "/show info": "/info",                # ollama
    "/show system": "/system",
    "/show parameters": "/set",           # (the settings in use, each with its value)
    "/set system": "/system",
    "/set nothink": "/set think off",
    "/set format json": "/schema {}",     # ollama's JSON mode: any JSON (llama-server's json_object)
    "/set noformat": "/schema off",
    "/set wordwrap": "/set markdown on",  # (wrapped at spaces, as the Markdown view draws)
    "/set nowordwrap": "/set markdown off",
}

#: ollama's parameter names (its Modelfile's and API's options) -> the setting /set changes
OLLAMA_PARAMETERS: dict[str, str] = {
    "num_predict": "n", "num_ctx": "ctx-size", "num_batch": "batch-size", "num_gpu": "n-gpu-layers",
    "num_thread": "threads", "temperature": "temp", "mirostat_tau": "mirostat-ent", "mirostat_eta": "mirostat-lr",
}

#: another tool's command that has no like here: (whose, what does the same or why there is none)
NOTES: dict[str, tuple[str, str]] = {
    "/show": ("ollama", "here /info shows the model and its format, /system the system message, /set the "
                        "settings, /prompt the prompt its template writes"),
    "/show template": ("ollama", "the prompt the model's template writes for this chat is /prompt (its format: "
                                 "/info)"),
    "/show modelfile": ("ollama", "rml-chat reads no Modelfile: /info shows the model, its chat format and the "
                                  "settings in use, /set changes them"),
    "/show license": ("ollama", "rml-chat shows no license: the model's page or its GGUF's general.license has it"),
    "/set verbose": ("ollama", "the figures of each reply are the dim line after it; /stats shows them all"),
    "/set quiet": ("ollama", "the dim line after each reply stays: it is one line"),
    "/set history": ("ollama", "the input history (Up) is always kept"),
    "/set nohistory": ("ollama", "the input history (Up) is kept in {history}; start rml-chat with "
                                 "RML_CHAT_HISTORY=/dev/null to keep it in memory only"),
    "/list": ("ollama", "rml-chat --models lists the models on this machine; one chat opens one model"),
    "/glob": ("llama-cli", "here the files go one at a time: /file PATH"),
    **dict.fromkeys(("/image", "/audio", "/video"), ("llama-cli", "rml-chat reads text only")),
}

#: what ``/set think`` is followed by in ollama: nothing (thinking on) or a level (gpt-oss's)
OLLAMA_THINK = ("", "low", "medium", "high")

#: what ollama's /load MODEL is here, said where /load's file is not there (ours loads a chat)
LOAD_MODEL = "one chat opens one model: to chat with another, leave and run rml-chat NAME (ollama's /load NAME)"


def as_ours(line: str) -> Translated | None:
    """``line`` as our command, or a note, where it is another tool's; None where it is not (ours, or nobody's).
    No word of the tables is one of our commands alone (``/load FILE`` stays ours; ``/set parameter`` and
    ``/set think`` are read before our ``/set``)."""
    words = line.split()
    if not words or not words[0].startswith("/"):
        return None
    for size in range(min(len(words), 3), 0, -1):
        parts = line.split(maxsplit=size)  # (the rest as typed: a system message's spacing kept)
        found = _translated(" ".join(parts[:size]), parts[size].strip() if len(parts) > size else "")
        if found is not None:
            return found
    return None


def _translated(head: str, rest: str) -> Translated | None:
    if head == "/set parameter":
        name, _, value = rest.partition(" ")
        if not name:
            return Translated(None, "ollama's /set parameter NAME VALUE is /set NAME VALUE here; /set lists them")
        if name == "stop" and len(value.split()) > 1:
            return Translated(None, "/set stop TEXT sets one stop text; start rml-chat with --stop TEXT for each of "
                                    "several")
        return Translated(f"/set {OLLAMA_PARAMETERS.get(name, name)} {value}".rstrip())
    if head == "/set think" and rest in OLLAMA_THINK:  # (ollama's: on, or a level; ours alone is a usage line)
        return Translated(f"/set reasoning-effort {rest}" if rest else "/set think on")
    if head in SAME:
        return Translated(f"{SAME[head]} {rest}".rstrip())
    if head in NOTES:
        whose, text = NOTES[head]
        return Translated(None, f"{head} is {whose}'s: " + text.format(history=history_path()))
    return None
