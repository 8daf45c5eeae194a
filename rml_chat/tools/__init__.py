"""Tools the model calls: where they come from (a functions file), how a call is written and constrained
(the template's own syntax, a grammar from the tool's schema), and the loop that runs a call with the
user's consent and hands its result back as the template's tool message.
May import ``tokenizer``, ``rml_chat.core`` (the session it runs turns on), ``rml_chat.engines.runtime``
(the schema converter) and rml_chat's shared modules.
"""
