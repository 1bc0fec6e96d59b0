"""ZE (zeppelin-embed) runtime semantics built on the generated ``bytewright.generated.ze``.

- :mod:`.registry`  family registry checks (version acceptance, retired scheme ids)
- :mod:`.wal`       WAL family 11: writer, prefix replay, torn-tail vs middle corruption,
                    batch-run commit (ops 8 and 11), the mixed-group size helper
- :mod:`.segment`   segment files: open with lazy region checksums, unknown kinds skipped,
                    writer (16 KiB regions, checksum table, trailer)
- :mod:`.graph`     graph node blocks as a zero-copy numpy view
- :mod:`.artifacts` framed artifacts: frame, manifest (v2/v3 rules), purge intent (token)
- :mod:`.envelope`  family-19 envelope validation (sequence, digest, counts, limits),
                    CommitState ref and transition rules, the envelope writer
- :mod:`.graphwal`  family-19 graph WAL files: writer, multi-envelope replay, torn tails
- :mod:`.files`     files on disk: atomic artifact writes, the WAL appender (torn tail
                    cut, damage in the middle refused unless discard_after; every cut
                    through runtime.cut, so its bytes are kept), WAL salvage
- :mod:`.seals`     covering checksums verified before the fields they cover
- :mod:`.limits`    resource limits and format bounds as named constants
"""
