"""bytewright: a declarative, schema-driven codec generator for append-only binary formats.

The repository root is the ``bytewright`` package; its sub-packages are the layers:
``generator`` (YAML -> IR -> Jinja), ``generated`` (emitted codecs, never edited by hand),
``runtime`` (codec support and per-format semantics) and ``cli``.
"""

__version__ = "0.1.0"
