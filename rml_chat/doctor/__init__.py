"""The model doctor behind ``--check``: it examines a GGUF or a model directory and says what is wrong with
it, each finding with its evidence and its fix (``findings.py``).

The checks are a table (``CHECKS``), each a function of the *patient* — our tokenizer and chat format
(``core.model``), llama.cpp's vocabulary of the same file (``engines.llama_vocab.LlamaVocab``, no weights), and
the GGUF's metadata as written — that yields findings:

- ``vocabulary.py``: our ids against llama.cpp's (a sample of text and the model's own special tokens), a
  model directory's tokenizer.json against its GGUF, the stop ids against the template's end of turn, the
  BOS, the pre-tokenizer, token types where the template writes them;
- ``template.py``: whether the template compiles and renders, what it refuses, its default system
  prompt, whether our prompt is verified, whether its markers are tokens of this vocabulary (a template of
  another family), reasoning markers;
- ``reply.py``: a real turn through the chat session, which must end on a stop.

May import: rml_chat.core, rml_chat.engines (base, runtime, llama_vocab), rml_chat.errors, rml_chat.words.
"""
