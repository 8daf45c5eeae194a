"""The tool loop, above the session: the user's turn, the calls the reply makes run with consent, their
results handed back, and the model's next turn, until it answers without a call.

Three parts, and only this loop talks to more than one of them:

- the session runs a turn and takes results (``ChatSession.turn``, ``read_calls``, ``answer_calls``); it
  never calls the toolbox;
- the toolbox runs a call (``Toolbox.run``: consent, a timeout, the result as text) and makes the call
  grammars; it never writes the session;
- ``exchange`` here decides when a reply may call, under which grammar, and when the loop ends (a reply
  without a call, or ``MAX_CALLS`` calls).

Without tools, or under a schema or grammar that shapes the whole reply, an exchange is one turn.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.continuation import Prefill
from ..core.conversation import ChatError
from ..core.session import ChatSession, ToolResult, TurnResult
from ..core.structured import Constraint
from ..engines.base import Progress, triggers_of
from .toolbox import MAX_CALLS, MAX_RESULT_SHARE, capped

Emit = Callable[[str], None]


def exchange(session: ChatSession, text: str | None, emit: Emit, notify: Emit, progress: Progress | None = None,
             think: Emit | None = None, constraint: Constraint | None = None, ctrl_c_ends_thought: bool = False,
             prefill: Prefill | None = None) -> TurnResult:
    """The user's message (None: the last reply made again, or gone on from ``prefill``) and everything it
    leads to. A schema or grammar (``constraint``, else the session's) shapes the whole reply, so such a
    turn makes no call."""
    constraint = constraint or session.options.constraint
    box = session.options.tools
    if constraint is not None or box is None or not box.definitions() or box.choice == "none":
        return session.turn(text, emit, notify, progress, constraint=constraint, think=think,
                            ctrl_c_ends_thought=ctrl_c_ends_thought, prefill=prefill)

    def turn(message: str | None, grammar: Constraint | None, prefilled: Prefill | None = None,
             calls: bool = True) -> TurnResult:
        """One turn whose reply may call (its calls read, not shown; ``calls`` False: past the limit, a call
        the model still writes is its answer's text, shown and kept as such); a lazy grammar's reply is not
        judged (free text until a call opens)."""
        result = session.turn(message, emit, notify, progress, constraint=grammar, think=think, calls=calls,
                              ctrl_c_ends_thought=ctrl_c_ends_thought, prefill=prefilled)
        if grammar is not None and triggers_of(grammar.gbnf):
            result.outcome = None
        return result

    lazy = Constraint(box.lazy_grammar(), None, "--tool-choice auto")
    first = lazy if box.choice != "required" else Constraint(
        box.required_grammar(session.model.reasoning), None, "--tool-choice required")
    result = turn(text, first, prefill)
    steps, records = [result.generation], []
    while len(records) <= MAX_CALLS:  # (past the limit, the model's last turn is its answer, whatever it says)
        calls = session.read_calls(notify, box.new_id)
        if not calls:
            break
        answered = []
        for call in calls:
            outcome = box.run(call) if len(records) < MAX_CALLS else \
                box.run(call, f"this turn's limit of {MAX_CALLS} tool calls is reached; answer without more calls")
            answered.append(ToolResult(call, capped(outcome, session.model.tokenizer.encode,
                                                    session.engine.n_ctx // MAX_RESULT_SHARE)))
            records.append(answered[-1])
        session.answer_calls(answered)
        result = turn(None, lazy, calls=True) if len(records) < MAX_CALLS else turn(None, None, calls=False)
        steps.append(result.generation)
    result.tool_calls, result.steps = records, steps
    return result


def go_on(session: ChatSession, emit: Emit, notify: Emit, progress: Progress | None = None, think: Emit | None = None,
          ctrl_c_ends_thought: bool = False) -> TurnResult:
    """The last reply continued (``/continue``: one cut by -n, Ctrl-C or a full context): it leaves the
    conversation, and the model goes on from it (``continuation.Prefill``); the reply recorded is the
    whole. A ChatError (the reply can't go on) leaves the conversation as it was."""
    last = session.conversation.take_last_reply()
    prefill = Prefill(last.content, last.reasoning or "")
    try:
        return exchange(session, None, emit, notify, progress, think=think, ctrl_c_ends_thought=ctrl_c_ends_thought,
                        prefill=prefill)
    except ChatError:
        session.conversation.add(last)
        raise
