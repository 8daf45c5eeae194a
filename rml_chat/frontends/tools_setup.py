"""The session's tools from the flags: the functions files, the template's call syntax, the consent rule
of a script (``--tools-approve``) and where a call's line goes."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from tokenizer.chat.errors import ChatFormatError
from tokenizer.chat.template import ChatTemplate, compiled
from tokenizer.chat.tool_calls import CallSyntax, ToolCall

from ..core.model import Model
from ..core.read_reply import model_call_syntax
from ..engines.runtime import schema_to_gbnf
from ..errors import AppError, UsageError
from ..terminal import visible
from ..tools.functions import Tool, load_functions
from ..tools.grammar import call_grammar
from ..tools.mcp_tools import McpError, McpServer
from ..tools.toolbox import Toolbox
from .signals import asked

#: a small model whose template calls tools, named where the model given can't
SMALL_TOOL_MODEL = "Qwen/Qwen2.5-0.5B-Instruct-GGUF"


def tools_for(model: Model, args: argparse.Namespace, say: Callable[[str], None]) -> Toolbox | None:
    """The session's tools (None: none could be given), or UsageError where the model's template can't take
    them (it is not made up)."""
    flag = "--functions" if args.functions else "--mcp"
    tools = [tool for path in args.functions for tool in load_functions(path, say)]  # (a bad file is said first)
    template = model.detection.format.template
    if template is None:
        raise UsageError(f"{flag}: the model's chat format has no template, so it has no way to be told of "
                         "tools (none is made up)")
    syntax, why, known = model_call_syntax(model)
    if syntax is not None and known:  # (a family that lists tools and leaves the call to the model's training)
        say(f"note: the chat template renders no tool calls; calls are read as {known} "
            f"({syntax.trigger()}…), from the table of known syntaxes")
    if syntax is None:  # (the model, not the flags: one line saying which models can)
        raise AppError(f"{flag}: {model.name} can't call tools: {why}; a model whose template does can, a "
                       f"small one: rml-chat -hf {SMALL_TOOL_MODEL} (others in docs/tools.md)", "tools")
    required = args.tool_choice == "required"
    for command in args.mcp:
        try:
            server = McpServer(command, sdk_log=_on_stderr if args.verbose else None)
        except McpError as err:
            if required:  # (the user asked for a call: a run without the tools they named is not that run)
                raise AppError(f"{err}; --tool-choice required needs every tool given", "tools") from None
            say(f"note: {err}; its tools are left out")
            continue
        tools += server.tools()
    tools = [tool for tool in _first_of_each_name(tools, say) if _writable(tool, syntax, compiled(template), say)]
    if not tools:
        if required:
            raise AppError("--tool-choice required: none of the tools given can be offered to the model", "tools")
        say("note: no tools to give the model")
        return None
    scripted = args.prompt is not None or args.batch is not None or not sys.stdin.isatty()
    box = Toolbox(tools, syntax, choice=args.tool_choice, approve=lambda call: args.tools_approve if scripted else False,
                  markers=syntax.markers(model.tokenizer.special_texts()))
    box.shown = lambda line: print(visible(line), file=sys.stderr)
    if args.verbose:
        say(f"tools: {', '.join(box.tools)} (calls written as {syntax.trigger()!r}…)")
    return box


def _first_of_each_name(tools: list[Tool], say: Callable[[str], None]) -> list[Tool]:
    """One tool a name, the first given: a call names a tool, so a second of the same name (two MCP servers'
    ``search``) could never be called; a note says which was left out."""
    kept: dict[str, Tool] = {}
    for tool in tools:
        if tool.name in kept:
            say(f"note: tool {tool.name!r} of {tool.source} is left out: {kept[tool.name].source} gives one of that name")
        else:
            kept[tool.name] = tool
    return list(kept.values())


def _on_stderr(line: str) -> None:
    print(visible(line), file=sys.stderr, flush=True)


def _writable(tool: Tool, syntax: CallSyntax, template: ChatTemplate, say: Callable[[str], None]) -> bool:
    """Whether the template writes the tool's definition, and a call grammar can be made of its schema (else
    it is left out, in one line)."""
    try:
        template.render([{"role": "user", "content": "Hi"}], True, tools=[tool.definition()])
    except ChatFormatError as err:  # (Command R+ writes every parameter's description: an Args: section)
        say(f"note: tool {tool.name!r} ({tool.source}) left out: the chat template can't write its definition ({err})")
        return False
    try:
        call_grammar(syntax, [tool], schema_to_gbnf)
    except AppError:  # (llama-cpp-python missing: said as such, not as the schema's fault)
        raise
    except Exception as err:  # the converter raises what it likes
        say(f"note: tool {tool.name!r} ({tool.source}) left out: llama.cpp's converter can't take its schema "
            f"({type(err).__name__}: {err})")
        return False
    return True


class Consent:
    """The REPL's question before each call: yes, no, or always (this tool, this session)."""

    def __init__(self, prompt, say: Callable[[str], None]):  # type: ignore[no-untyped-def]
        self.prompt, self.say, self.always = prompt, say, set()

    def __call__(self, call: ToolCall) -> bool:
        if call.name in self.always:
            return True
        line = f"{call.name}({json.dumps(call.arguments, ensure_ascii=False)})"
        try:
            answer = asked(self.prompt, visible(f"\nrun {line}? [y]es, [n]o, [a]lways for {call.name}: ")).strip().lower()
        except (KeyboardInterrupt, EOFError):
            answer = ""
        if answer in ("a", "always"):
            self.always.add(call.name)
        return answer in ("y", "yes", "a", "always")
