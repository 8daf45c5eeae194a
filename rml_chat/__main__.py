"""``python -m rml_chat``: the same as the ``rml-chat`` command (Ctrl-C while starting up is one line)."""

import sys

try:
    from .cli import main

    code = main()
except KeyboardInterrupt:
    print("\nrml-chat: interrupted", file=sys.stderr)
    code = 130
sys.exit(code)
