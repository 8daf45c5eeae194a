"""A grammar deep enough to run llama.cpp's recursive parser or sampler off the stack (the process died
with SIGSEGV and no message, and a llama-server given it over --server died the same way) is one line and
exit 2 before llama.cpp sees it; every grammar llama.cpp ships, and wide grammars of thousands of rules,
pass as before."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import fetch, model_path

from rml_chat.core.grammar_depth import MAX_CHAIN, MAX_PARENTHESES, depth
from rml_chat.core.structured import Constraint, check
from rml_chat.errors import UsageError

NESTED = "root ::= " + "(" * 20_000 + '"a"' + ")" * 20_000
CHAIN = "root ::= r0\n" + "".join(f"r{i} ::= r{i + 1}\n" for i in range(100_000)) + 'r100000 ::= "a"\n'


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "-n", "2", *args],
                          capture_output=True, text=True, timeout=300)


def test_parentheses_nested_past_the_bound_are_one_line_not_a_crash() -> None:
    done = _run("-p", "hi", "--grammar", NESTED)
    assert done.returncode == 2, (done.returncode, done.stderr[-300:])  # (was -11: SIGSEGV in llama.cpp's parser)
    assert done.stderr == ("rml-chat: usage: --grammar: the grammar goes too deep: rule 'root' nests parentheses "
                           "20,000 deep; llama.cpp's parser takes up to 1,000 safely (rml-chat --help lists the "
                           "flags)\n")


def test_a_chain_of_rules_past_the_bound_is_one_line_not_a_crash(tmp_path) -> None:
    (tmp_path / "chain.gbnf").write_text(CHAIN)
    done = _run("-p", "hi", "--grammar-file", str(tmp_path / "chain.gbnf"))
    assert done.returncode == 2, (done.returncode, done.stderr[-300:])  # (was -11)
    assert "--grammar-file: the grammar goes too deep: its rules start with one another 100,002 deep, from 'root'; " \
           "llama.cpp takes up to 10,000 safely" in done.stderr and done.stderr.count("\n") == 1


class _NoEngine:
    """An engine that must not be asked: the grammar is refused before any engine, or server, sees it."""

    def grammar_problem(self, gbnf: str) -> str:
        raise AssertionError("the grammar reached the engine")


@pytest.mark.parametrize("gbnf", [NESTED, CHAIN], ids=["nested", "chain"])
def test_the_refusal_comes_before_the_engine_or_a_server_is_given_the_grammar(gbnf) -> None:
    with pytest.raises(UsageError, match="goes too deep"):
        check(Constraint(gbnf, None, "--grammar"), _NoEngine())


def test_every_grammar_llama_cpp_ships_is_within_the_bounds() -> None:
    shipped = sorted(fetch.llama_grammars().glob("*.gbnf"))
    assert len(shipped) >= 8, shipped
    for path in shipped:
        found = depth(path.read_text())
        assert found.problem() == "", (path.name, found)
        assert 0 < found.chain < 100 and found.parentheses < 10, (path.name, found)


def test_rules_named_later_in_an_alternative_cost_no_depth_and_wide_grammars_pass(tmp_path) -> None:
    later = "root ::= r0\n" + "".join(f'r{i} ::= "a" r{i + 1}\n' for i in range(100_000)) + 'r100000 ::= "a"\n'
    assert depth(later).chain == 2  # (llama.cpp runs it: a rule named after "a" is a stack entry, not a call)
    wide = "root ::= " + " | ".join(f"r{i}" for i in range(20_000)) + "\n" + \
        "".join(f'r{i} ::= "x{i}" ("," r{(i + 1) % 20_000})?\n' for i in range(20_000))
    assert depth(wide).chain == 2 and depth(wide).parentheses == 1
    (tmp_path / "later.gbnf").write_text(later)
    done = _run("-p", "hi", "--grammar-file", str(tmp_path / "later.gbnf"))
    assert done.returncode == 3 and set(done.stdout.strip()) == {"a"}, done.stderr[-300:]  # (cut by -n 2)


def test_what_can_match_nothing_lets_the_next_element_lead_too() -> None:
    chain = "".join(f"r{i} ::= ws? opt* r{i + 1}\n" for i in range(MAX_CHAIN)) + f'r{MAX_CHAIN} ::= "a"\n'
    optional = 'ws ::= " "?\nopt ::= "o"\n'
    assert depth(chain + optional).chain == MAX_CHAIN + 1  # (each r starts with ws or opt, which can be nothing)
    assert "10,001 deep, from 'r0'" in depth(chain + optional).problem()
    assert depth(chain.replace("opt*", '"x"') + optional).chain == 2  # ("x" must come first: r1 is not leading)


def test_the_parentheses_bound_is_exact() -> None:
    at_bound = "root ::= " + "(" * MAX_PARENTHESES + '"a"' + ")" * MAX_PARENTHESES
    assert depth(at_bound).problem() == ""
    assert "nests parentheses 1,001 deep" in depth(at_bound.replace("(", "((", 1).replace(")", "))", 1)).problem()
