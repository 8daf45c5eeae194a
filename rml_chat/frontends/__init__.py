"""The front ends: the command line (cli, launch), the REPL (repl, repl_commands), -p/stdin (scripted), --batch, --check.
May import everything else of rml_chat; nothing imports them (launch is the one place that makes an engine).
"""
