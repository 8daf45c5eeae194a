"""The chat core: the model (tokenizer, chat format, stop ids), the conversation, the session and its turns,
the reply as it streams, settings, constraints. May import ``tokenizer``, ``rml_chat.engines`` (its protocol
and plain data: ``base``; ``runtime`` for llama.cpp's schema converter alone) and rml_chat's shared modules
(errors, text_input, words); never a front end.
"""
