"""Field values of the Avro fixtures: `bytewright fixtures write` encodes each one into
fixtures/avro/<name>.hex and refuses if an existing fixture's bytes would change."""

import json

SCHEMA = json.dumps({"type": "record", "name": "example.Reading",
                     "fields": [{"name": "id", "type": "long"},
                                {"name": "name", "type": "string"},
                                {"name": "payload", "type": "bytes"}]}).encode()
SYNC = bytes(range(0xA0, 0xB0))


def cases(codec):
    """(name, record, params, value, doc) per fixture; ``codec`` is the generated module."""
    R = codec.Reading
    first = [R(id=1, name="one", payload=b"\x01"), R(id=-2, name="two", payload=b"")]
    second = [R(id=2 ** 40, name="forty", payload=b"x" * 40)]
    for name in ("null", "deflate"):
        meta = [codec.MetaEntry(key="avro.codec", value=name.encode()),
                codec.MetaEntry(key="avro.schema", value=SCHEMA)]
        blocks = [codec.DataBlock(objects=first), codec.DataBlock(objects=second)]
        yield (f"two_blocks_{name}", "avro_file", {},
               codec.AvroFile(meta=meta, sync=SYNC, blocks=blocks),
               f"Header (codec {name}) and two data blocks of example.Reading records.")
