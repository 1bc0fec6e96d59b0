"""The fast-path emitter, as named passes (see :mod:`bytewright.generator.emit_fast`)."""
