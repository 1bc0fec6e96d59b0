"""Field values of the LevelDB log fixtures: `bytewright fixtures write` encodes each one
into fixtures/leveldb_log/<name>.hex and refuses if an existing fixture's bytes would change."""


def cases(codec):
    """(name, record, params, value, doc) per fixture; ``codec`` is the generated module."""
    V = codec.ValueType

    def put(key: bytes, value: bytes):
        return codec.BatchOp(tag=V.VALUE, body=codec.PutOp(key=key, value=value))

    def delete(key: bytes):
        return codec.BatchOp(tag=V.DELETION, body=codec.DeleteOp(key=key))

    batch = codec.WriteBatch(sequence=7, ops=[put(b"apple", b"red"), delete(b"pear"),
                                              put(b"", b"")])
    yield ("batch", "write_batch", {}, batch,
           "A WriteBatch: two puts (one with an empty key and value) and a delete.")
    yield ("fragment_full", "log_fragment", {},
           codec.LogFragment(kind=codec.FragmentKind.FULL, piece=b"\x01" * 13),
           "One FULL fragment: the masked CRC-32C comes first and covers kind and piece.")
    # 33000 bytes of value: the record spans two 32 KiB blocks (FIRST, LAST).
    log = codec.LogFile(batches=[
        codec.WriteBatch(sequence=1, ops=[put(b"k", b"v")]),
        codec.WriteBatch(sequence=2, ops=[put(b"big", bytes(range(250)) * 132),
                                          delete(b"k")]),
        codec.WriteBatch(sequence=4, ops=[delete(b"gone")]),
    ])
    yield ("log_two_blocks", "log_file", {}, log,
           "Three batches; the second spans a block boundary (FIRST and LAST fragments).")
