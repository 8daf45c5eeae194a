"""``python -m rml_chat``: the same as the ``rml-chat`` command."""

import sys

from .cli import main

sys.exit(main())
