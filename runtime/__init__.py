"""bytewright's public runtime API: what generated modules and plug-ins build on.

Public modules (see docs/runtime-api.md for the stability note): ``errors`` (the one
error hierarchy), ``registry`` (checksums, codecs and numeric conversions by name;
plug-ins), ``checksums``, ``compression``, ``varint``, ``fixedpoint``, ``hilbert``, ``cut``
(the one way to shorten or overwrite a file: removed bytes are kept in a side file first).
``codec`` is the support library of generated code. Sub-packages named after a format
(one per shipped format) are that format's runtime, not part of this API.
"""
