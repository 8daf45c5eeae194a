"""The chat core: the model, the conversation, the session and its turns, the reply as it streams, settings, constraints.
May import ``tokenizer``, ``rml_chat.engines`` (the protocol and its sampler chain; runtime's schema converter)
and rml_chat's shared modules.
"""
