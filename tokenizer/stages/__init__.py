"""The reference pipeline's stages, one module each, in the order encode runs them: specials (cut out special
tokens), normalize, pretokenizers (+ llama_regex, the regex dialects), merge_model (+ bpe, the merge loops;
byte_alphabet; fallback), and decode (+ token_bytes). ``tokenizer.core.Tokenizer`` holds one object of each.
"""
