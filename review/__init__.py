"""Tools that read layouts rather than emit code: drift and fixture checks, version diffs
and their rules, docs and diagrams, the file inspector, and the Kaitai export.

Everything here builds on ``generator`` (load, validate, resolve, layout) and the runtime;
nothing in ``generator`` or ``runtime`` imports from here.
"""
