"""A model's Jinja chat template, rendered exactly the way transformers' ``apply_chat_template`` renders it.

transformers' setup, reproduced here:

* ``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`` with ``loopcontrols`` and the
  ``{% generation %}`` tag (it marks assistant text for training masks; rendering just writes its body);
* a ``tojson`` filter that does not HTML-escape, ``raise_exception(message)`` and ``strftime_now(fmt)``;
* the variables ``messages``, ``tools=None``, ``documents=None``, ``add_generation_prompt``, the special
  tokens' texts (``bos_token``, ``eos_token``) and any extra keyword (``enable_thinking``).

A template that reads its tools as ``functions`` (a JSON text) and the date as ``datetime``, and never
reads ``tools`` (FireFunction v2), is handed them as llama.cpp's handler for it hands them: the tools
written as JSON with an indent of 2 (an empty text where there are none), the date as
``Dec 03 2026 00:52:16 GMT``.

Where transformers' sandbox refuses a template that llama.cpp renders, the template is rendered as
llama.cpp's engine (minja) renders it, and nowhere else: with ``tools`` undefined where ``tools=None``
breaks it, and where it changes a list of its own (``ids.append(x)``, ``ids.pop(0)``: Kimi K2's templates
queue their calls' ids so), in jinja2's sandbox that allows that (``SandboxedEnvironment``; still no
access to Python's internals), over a deep copy of what it is handed; and ``tojson`` writes a generator
(``tools | map(attribute='function')``, llama.cpp's own DeepSeek R1 template) as its list. A template
transformers renders is never rendered any other way.

jinja2 is imported on the first template, never by ``import tokenizer``.

Example::

    >>> t = ChatTemplate("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}")
    >>> t.render([{"role": "user", "content": "Hi"}], add_generation_prompt=True)
    '<user>Hi'
"""

from __future__ import annotations

import copy
import datetime
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache

from .budget import OverBudget, RenderBudget, active
from .errors import ChatFormatError
from .markers import THINK_CLOSE, THINK_OPEN


class TemplateRaised(ChatFormatError):
    """The template refused the conversation with ``raise_exception(message)``; str() is its message."""


class TemplateBroken(ChatFormatError):
    """The template can't be compiled, or failed while rendering (not through raise_exception)."""


class TemplateOverBudget(TemplateBroken):
    """The template's render went past its time or memory budget (budget.py); every later render of the
    same template fails at once with the same words (a loop that does not end does not end next time)."""


def _raise(message: object) -> None:
    raise TemplateRaised(str(message))


def _tojson(value: object, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys,
                      default=_listed)


def _listed(value: object) -> list:
    """What ``tojson`` writes of a value json can't: a generator (``tools | map(attribute='function')``, a
    list in llama.cpp's engine, a generator in jinja2) as the list it yields; anything else is refused as
    transformers refuses it."""
    if isinstance(value, Iterator):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


@lru_cache(maxsize=2)
def _environment(mutable: bool = False):
    """The sandboxed environment, made once (jinja2 is imported here, on first use); ``mutable``: the one
    that lets a template change its own lists and dicts (module docstring)."""
    import jinja2
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

    class GenerationTag(Extension):
        """``{% generation %}…{% endgeneration %}``: transformers tracks where the body lands; we write it."""

        tags = {"generation"}

        def parse(self, parser):  # type: ignore[no-untyped-def]
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):  # type: ignore[no-untyped-def]
            return caller()

    class Budgeted(SandboxedEnvironment if mutable else ImmutableSandboxedEnvironment):  # type: ignore[misc,valid-type]
        """The sandbox, its hooks holding the render to its budget (budget.py)."""

        intercepted_binops = frozenset({"*", "+", "**"})

        def call_binop(self, context, operator, left, right):  # type: ignore[no-untyped-def]
            if (budget := active()) is not None:
                budget.check(operator, left, right)
            return super().call_binop(context, operator, left, right)

        def call(__self, __context, __obj, *args, **kwargs):  # type: ignore[no-untyped-def]  # noqa: N805
            if (budget := active()) is not None:
                budget.tick()
            return super().call(__context, __obj, *args, **kwargs)

        def getattr(self, obj, attribute):  # type: ignore[no-untyped-def]
            if (budget := active()) is not None:
                budget.tick()
            return super().getattr(obj, attribute)

        def getitem(self, obj, argument):  # type: ignore[no-untyped-def]
            if (budget := active()) is not None:
                budget.tick()
            return super().getitem(obj, argument)

    env = Budgeted(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    return env


class ChatTemplate:
    """One compiled template. ``render`` returns the prompt text, or raises TemplateRaised / TemplateBroken."""

    def __init__(self, source: str):
        import jinja2

        self.source = source
        env = _environment()
        try:  # (``from_string``, with the parsed tree kept: the names it reads are looked up in it below)
            tree = env.parse(source)
            self._compiled = env.template_class.from_code(env, env.compile(tree), env.make_globals(None), None)
        except jinja2.TemplateError as err:
            raise TemplateBroken(f"the chat template does not compile ({type(err).__name__}: {err})") from None
        #: the template reads ``enable_thinking``: prompts are verified with it unset, on and off
        self.reads_thinking = "enable_thinking" in source
        #: the template reads ``reasoning_effort`` (gpt-oss, Solar Open, Hunyuan, DeepSeek V4, Command A)
        self.reads_effort = "reasoning_effort" in source
        #: the template changes lists of its own, which transformers' sandbox refuses (module docstring)
        self.mutates = False
        #: transformers passes ``tools=None``; a tool-use template that then fails on a plain message
        #: (``for tool in tools``) is rendered as llama.cpp renders it, with ``tools`` undefined.
        self.tools_undefined = False
        names = {(n.name, n.ctx) for n in tree.find_all(jinja2.nodes.Name)}
        handed = {name for name, ctx in names if ctx == "load" and (name, "store") not in names}  # never set
        #: the template reads its tools as ``functions``, a JSON text, and the date as ``datetime`` (module
        #: docstring)
        self.tools_as_functions = "functions" in handed and not any(name == "tools" for name, _ in names)
        self.reads_datetime = "datetime" in handed
        #: texts the template looks for in strings (``'/no_think' in system_message``, ``| replace('/think',
        #: '')``): a message whose text holds one may be written differently for it (``needle_in``)
        #: (a marker is left out: the tables are read off replies that hold them)
        looked_for = _looked_for(tree)
        self.needles = tuple(n for n in looked_for if not _MARKER.search(n))
        #: the thought's tags it looks for (``'<think>' in content``: Nemotron 3 writes an empty thought
        #: before an answer only where the answer has none), read in an answer's text after its thought
        self.thought_tags = tuple(t for t in (THINK_OPEN, THINK_CLOSE) if t in looked_for)
        #: set once a render went past its budget: later renders fail at once
        self.over_budget: TemplateOverBudget | None = None
        try:
            self.render([{"role": "user", "content": "x"}], True)
        except TemplateOverBudget:
            pass
        except TemplateBroken:
            self.tools_undefined = True
            try:
                self.render([{"role": "user", "content": "x"}], True)
            except TemplateBroken:
                self.tools_undefined = False
        except TemplateRaised:
            pass

    def needle_in(self, messages: Sequence[Mapping[str, object]]) -> str:
        """The first of ``needles`` a message's text holds ("" for none): where the template may write the
        prompt differently for what a message says (SmolLM3's ``/no_think``, Ling's ``detailed thinking
        off``), a table read off other texts can't be trusted to write it."""
        texts = [m.get("content") for m in messages]
        found = next((n for n in self.needles for t in texts if isinstance(t, str) and n in t), "")
        answers = [_after_thought(m["content"]) for m in messages
                   if m.get("role") == "assistant" and isinstance(m.get("content"), str)]
        return found or next((t for t in self.thought_tags for a in answers if t in a), "")

    def render(self, messages: Sequence[Mapping[str, object]], add_generation_prompt: bool, *,
               bos_token: str = "<s>", eos_token: str = "</s>", thinking: bool | None = None,
               strftime_now: Callable[[str], str] | None = None, now: datetime.datetime | None = None,
               effort: str | None = None, tools: Sequence[Mapping[str, object]] | None = None) -> str:
        """The template's text for ``messages``. ``thinking`` None leaves ``enable_thinking`` undefined, and
        ``effort`` None ``reasoning_effort``; ``strftime_now`` replaces the clock (``now`` fixes it; default:
        the real time). ``tools``: tool definitions (OpenAI's shape), as transformers hands them over."""
        import jinja2

        if strftime_now is None:
            moment = now or datetime.datetime.now()
            strftime_now = moment.strftime
        extra: dict[str, object] = {} if thinking is None else {"enable_thinking": thinking}
        if effort is not None:
            extra["reasoning_effort"] = effort
        if self.tools_as_functions:
            extra["functions"] = json.dumps([dict(t) for t in tools], indent=2, ensure_ascii=False) if tools else ""
        elif tools is not None:
            extra["tools"] = [dict(t) for t in tools]
        elif not self.tools_undefined:
            extra["tools"] = None
        if self.reads_datetime:
            extra["datetime"] = strftime_now("%b %d %Y %H:%M:%S GMT")
        variables = dict(messages=[dict(m) for m in messages], documents=None,
                         add_generation_prompt=add_generation_prompt, bos_token=bos_token, eos_token=eos_token,
                         strftime_now=strftime_now, **extra)
        if self.over_budget is not None:
            raise self.over_budget
        budget = RenderBudget()
        try:
            with budget.running():
                if self.mutates:
                    return budget.gathered(self._compiled.generate(copy.deepcopy(variables)))
                try:
                    return budget.gathered(self._compiled.generate(variables))
                except jinja2.sandbox.SecurityError:  # the two sandboxes differ only in what changes a list or
                    mutable = _environment(mutable=True).from_string(self.source)  # dict: all else is refused again
                    text = budget.gathered(mutable.generate(copy.deepcopy(variables)))
                    self._compiled, self.mutates = mutable, True
                    return text
        except (OverBudget, MemoryError) as err:
            why = str(err) if isinstance(err, OverBudget) else "it ran out of memory"
            self.over_budget = TemplateOverBudget(f"the chat template's render was stopped: {why} (a template renders "
                                                  f"in milliseconds and builds kilobytes)")
            raise self.over_budget from None
        except TemplateRaised:
            raise
        except (jinja2.TemplateError, TypeError, ValueError, KeyError, IndexError, AttributeError,
                ZeroDivisionError, OverflowError, RecursionError) as err:
            raise TemplateBroken(f"the chat template failed ({type(err).__name__}: {err})") from None


_TEXT_METHODS = frozenset({"replace", "split", "rsplit", "startswith", "endswith", "find", "count", "index", "partition"})
_MARKER = re.compile(r"[<>\[\]|]")  # (a tag or a bracketed name: <think>, [TOOL_CALLS], <|im_end|>)


def _after_thought(content: str) -> str:
    """An assistant's content after the thought it opens with, as the tables write one::

        >>> _after_thought("<think>hm</think>Use <think> tags"), _after_thought("Hi")
        ('Use <think> tags', 'Hi')
    """
    body = content.lstrip()
    if body.startswith(THINK_OPEN) and THINK_CLOSE in body:
        return body.split(THINK_CLOSE, 1)[1]
    return content


def _looked_for(tree: object) -> tuple[str, ...]:
    """The texts a template's code looks for in a string: the left of an ``in`` test, the first argument of
    ``replace``, ``split``, ``startswith`` and the like. A text of one character or of no letter is left out
    (Kimi K3's ``&``, functionary's ``,``): those escape or split values, never switch a prompt.

        >>> from tokenizer.chat.template import _environment
        >>> _looked_for(_environment().parse("{% if '/no_think' in messages[0].content %}x{% endif %}"
        ...                                  "{{ messages[1].content | replace('<think>', '') | replace('&', '') }}"))
        ('/no_think', '<think>')
    """
    from jinja2 import nodes

    found: list[object] = []
    for node in tree.find_all(nodes.Compare):  # type: ignore[attr-defined]
        if isinstance(node.expr, nodes.Const) and node.ops and node.ops[0].op in ("in", "notin"):
            found.append(node.expr.value)
    for node in tree.find_all(nodes.Call):  # type: ignore[attr-defined]
        if isinstance(node.node, nodes.Getattr) and node.node.attr in _TEXT_METHODS and node.args:
            found.append(getattr(node.args[0], "value", None))
    for node in tree.find_all(nodes.Filter):  # type: ignore[attr-defined]
        if node.name == "replace" and node.args:
            found.append(getattr(node.args[0], "value", None))
    return tuple(dict.fromkeys(n for n in found if isinstance(n, str) and len(n.strip()) > 1
                               and any(c.isalpha() for c in n)))


@lru_cache(maxsize=16)
def compiled(source: str) -> ChatTemplate:
    """The template compiled once per process (compiling costs far more than rendering)."""
    return ChatTemplate(source)
