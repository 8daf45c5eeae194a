"""The front ends: the command line (cli, launch), the REPL (repl, repl_commands), one-shot and scripted
runs (scripted), --batch (batch) and --check (check). May import everything else; nothing imports them.
"""
