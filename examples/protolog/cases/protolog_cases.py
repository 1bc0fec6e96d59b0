"""Field values of the protolog fixtures (encoded by `bytewright fixtures write`)."""


def cases(codec):
    K = codec.EventKind
    events = [
        codec.Event(seq=1, kind=K.START, time_delta=0, value=0, offset=0, source="sensor-a",
                    tags=[], note="", payload=b""),
        codec.Event(seq=2, kind=K.SAMPLE, time_delta=-3, value=-129, offset=64, source="sensor-a",
                    tags=["cold", "outdoor"], note="first sample", payload=b"\x01\x02"),
        codec.Event(seq=300, kind=K.SAMPLE, time_delta=1_000_000, value=2**40, offset=-65,
                    source="s" * 200, tags=["x" * 130], note="long names need 2-byte varints",
                    payload=bytes(range(16))),
        codec.Event(seq=301, kind=K.STOP, time_delta=-(2**33), value=-(2**62), offset=-1,
                    source="", tags=[], note="bye", payload=b""),
    ]
    records = [codec.Record(body=e) for e in events]
    yield ("four_records", "log_file", {}, codec.LogFile(version=1, records=records),
           "START, two SAMPLEs (one with 2-byte varint prefixes), STOP.")
    yield ("one_record", "record", {}, records[1], "One SAMPLE record on its own.")
    yield ("empty_log", "log_file", {}, codec.LogFile(version=1, records=[]),
           "A header and no records.")
