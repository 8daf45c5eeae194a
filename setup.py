"""The one thing pyproject.toml cannot say with every setuptools: the optional C merge loops.

``tokenizer._cmerge`` (tokenizer/_cmerge.c) runs bpe.py's short-word merge loops ~20x faster per merge, and
reads GGUF string arrays (_cmerge_gguf.c) ~10x faster.
It is optional: where it does not compile, the install goes on and the Python loops give the same ids.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tokenizer._cmerge",
            sources=["tokenizer/_cmerge.c", "tokenizer/_cmerge_scored.c", "tokenizer/_cmerge_ranked.c",
                     "tokenizer/_cmerge_gguf.c"],
            depends=["tokenizer/_cmerge.h"],
            optional=True,
        )
    ]
)
