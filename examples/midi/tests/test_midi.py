"""The MIDI example, on Standard MIDI Files written by mido.

mido (a MIDI library independent of bytewright) writes a two-track file in memory: a tempo
track of meta events and a track of channel messages on two channels, a system exclusive
message longer than 127 bytes (a two-byte length) and delta times up to four VLQ bytes; and
files with running status (consecutive messages of one status, whose status byte mido
leaves out).
The test walks the chunks with its own few lines and holds the generated codec to that and
to what mido reads back, on the fast path and the Construct path (interpreted and compiled).
"""

from __future__ import annotations

import io
import struct
from pathlib import Path

import mido
import pytest

from bytewright.generator import project
from bytewright.runtime.errors import ConstraintError, DecodeError, TruncatedError

ROOT = Path(__file__).resolve().parent.parent
TICKS = 480
SYSEX = bytes(range(0x7F)) + bytes(range(0x40))  # 191 bytes: the length takes two VLQ bytes
LONG_DELTA = 0x0FFFFFFF  # the largest four-byte VLQ

# The project's generated module, loaded as `bytewright check` loads it.
midi = project.load(ROOT / "bytewright.toml").load_module("midi")


def _messages() -> tuple[list, list]:
    tempo = [
        mido.MetaMessage("track_name", name="tempo map", time=0),
        mido.MetaMessage("set_tempo", tempo=400000, time=0),
        mido.MetaMessage("time_signature", numerator=6, denominator=8, time=0),
        mido.MetaMessage("key_signature", key="Eb", time=0),
        mido.MetaMessage("smpte_offset", frame_rate=25, hours=1, minutes=2, seconds=3,
                         frames=4, sub_frames=5, time=0),
        mido.MetaMessage("marker", text="B section", time=1920),
        mido.MetaMessage("set_tempo", tempo=600000, time=0),
    ]
    # Two channels take turns, so no two channel messages in a row share a status byte
    # (mido would otherwise leave the second one's out: running status).
    notes = [
        mido.Message("program_change", channel=0, program=40, time=0),
        mido.Message("program_change", channel=9, program=0, time=0),
        mido.Message("control_change", channel=0, control=7, value=100, time=0),
        mido.Message("note_on", channel=0, note=60, velocity=90, time=0),
        mido.Message("note_on", channel=9, note=36, velocity=127, time=0),
        mido.Message("note_off", channel=0, note=60, velocity=64, time=240),
        mido.Message("note_off", channel=9, note=36, velocity=0, time=0),
        mido.Message("sysex", data=SYSEX, time=130),            # two-byte delta
        mido.Message("pitchwheel", channel=0, pitch=-1234, time=20000),  # three-byte delta
        mido.Message("aftertouch", channel=0, value=33, time=0),
        mido.Message("polytouch", channel=9, note=38, value=77, time=0),
        mido.MetaMessage("lyrics", text="la", time=0),
        mido.Message("pitchwheel", channel=0, pitch=8191, time=LONG_DELTA),
    ]
    return tempo, notes


@pytest.fixture(scope="module")
def smf() -> bytes:
    mid = mido.MidiFile(type=1, ticks_per_beat=TICKS)
    for messages in _messages():
        mid.tracks.append(mido.MidiTrack(messages))
    out = io.BytesIO()
    mid.save(file=out)
    return out.getvalue()


def read_vlq(data: bytes, at: int) -> tuple[int, int]:
    value = 0
    while True:
        b = data[at]
        at += 1
        value = (value << 7) | (b & 0x7F)
        if b < 0x80:
            return value, at


def walk(data: bytes) -> list[list[tuple[int, int, int, bool]]]:
    """(absolute offset, delta, status in effect, status byte present) of every event of
    every track, by the spec: a first byte below 0x80 is a data byte, the status is the
    previous channel message's (running status; system messages cancel it)."""
    assert data[:4] == b"MThd" and struct.unpack(">I", data[4:8])[0] == 6
    ntracks = struct.unpack(">H", data[10:12])[0]
    pos, tracks = 14, []
    for _ in range(ntracks):
        assert data[pos:pos + 4] == b"MTrk"
        end = pos + 8 + struct.unpack(">I", data[pos + 4:pos + 8])[0]
        pos += 8
        events, running = [], None
        while pos < end:
            start = pos
            delta, pos = read_vlq(data, pos)
            status, present = data[pos], data[pos] >= 0x80
            if present:
                pos += 1
            else:
                assert running is not None, "a data byte where no status runs"
                status = running
            running = status if status < 0xF0 else None
            if status == 0xFF:
                pos += 1
                n, pos = read_vlq(data, pos)
                pos += n
            elif status in (0xF0, 0xF7):
                n, pos = read_vlq(data, pos)
                pos += n
            else:
                pos += 1 if status >> 4 in (0xC, 0xD) else 2
            events.append((start, delta, status, present))
        assert pos == end
        tracks.append(events)
    assert pos == len(data)
    return tracks


def decoders():
    yield "fast", lambda data: midi.decode_midi_file(data)[0]
    yield "construct", midi.construct_decode_midi_file
    yield "compiled", lambda data: midi.construct_decode_midi_file(data, compiled=True)


def encoders():
    yield "fast", midi.encode_midi_file
    yield "construct", midi.construct_encode_midi_file
    yield "compiled", lambda value: midi.construct_encode_midi_file(value, compiled=True)


def test_the_file_has_multi_byte_vlqs_and_every_status_byte(smf):
    tracks = walk(smf)
    deltas = [d for t in tracks for _, d, _, _ in t]
    assert LONG_DELTA in deltas and 20000 in deltas and 130 in deltas
    assert all(present for t in tracks for *_, present in t)
    # the four-byte VLQ of 0x0fffffff, by hand
    at = next(off for off, d, _, _ in tracks[1] if d == LONG_DELTA)
    assert smf[at:at + 4] == bytes([0xFF, 0xFF, 0xFF, 0x7F])


@pytest.mark.parametrize("path", ["fast", "construct", "compiled"])
def test_decodes_what_mido_wrote(smf, path):
    value = dict(decoders())[path](smf)
    read = mido.MidiFile(file=io.BytesIO(smf))
    assert value.format == midi.SmfFormat.SIMULTANEOUS == read.type
    assert not value.smpte and value.ticks == TICKS == read.ticks_per_beat
    assert len(value.tracks) == len(read.tracks) == 2
    for track, want in zip(value.tracks, read.tracks, strict=True):
        assert len(track.events) == len(want)
        for ev, msg in zip(track.events, want, strict=True):
            assert ev.delta == msg.time
            _same_message(ev, msg)


def _same_message(ev, msg) -> None:
    K = midi.EventKind
    body = ev.message
    kind, channel = ev.effective >> 4, ev.effective & 0xF
    if msg.is_meta:
        assert (kind, channel) == (K.SYSTEM, 0xF)
        meta = {
            "track_name": lambda d: d.text == msg.name.encode("latin-1"),
            "marker": lambda d: d.text == msg.text.encode("latin-1"),
            "lyrics": lambda d: d.text == msg.text.encode("latin-1"),
            "set_tempo": lambda d: d.tempo == msg.tempo,
            "time_signature": lambda d: (d.numerator, 2 ** d.denominator_log2,
                                         d.clocks_per_click, d.notated_32nd_notes_per_beat)
            == (msg.numerator, msg.denominator, msg.clocks_per_click,
                msg.notated_32nd_notes_per_beat),
            "key_signature": lambda d: (d.sharps, d.minor) == (-3, 0),  # E flat major
            "smpte_offset": lambda d: ([24, 25, 29.97, 30][d.frame_rate], d.hour, d.minutes,
                                       d.seconds, d.frames, d.sub_frames)
            == (msg.frame_rate, msg.hours, msg.minutes, msg.seconds, msg.frames,
                msg.sub_frames),
            "end_of_track": lambda d: d is None,
        }
        assert meta[msg.type](body.data), (msg, body)
        assert body.meta_type == getattr(midi.MetaType, msg.type.upper())
        return
    if msg.type == "sysex":
        assert (kind, channel) == (K.SYSTEM, 0) and body.data == bytes(msg.data)
        return
    assert channel == msg.channel
    want, names = _CHANNEL[msg.type]
    assert kind == want
    if msg.type == "pitchwheel":
        got = ((body.high << 7 | body.low) - 8192,)  # 14 bits, low 7 first, 0x2000 = 0
    else:
        got = tuple(getattr(body, n) for n in _FIELDS[type(body).__name__])
    assert got == tuple(getattr(msg, n) for n in names)


_CHANNEL = {  # mido's message type -> (kind, mido's attributes in the record's order)
    "note_on": (midi.EventKind.NOTE_ON, ("note", "velocity")),
    "note_off": (midi.EventKind.NOTE_OFF, ("note", "velocity")),
    "polytouch": (midi.EventKind.POLY_PRESSURE, ("note", "value")),
    "control_change": (midi.EventKind.CONTROL_CHANGE, ("control", "value")),
    "program_change": (midi.EventKind.PROGRAM_CHANGE, ("program",)),
    "aftertouch": (midi.EventKind.CHANNEL_PRESSURE, ("value",)),
    "pitchwheel": (midi.EventKind.PITCH_BEND, ("pitch",)),
}
_FIELDS = {
    "Note": ("note", "velocity"),
    "ControlChange": ("control", "value"),
    "ProgramChange": ("program",),
    "ChannelPressure": ("pressure",),
}


def test_all_paths_agree_and_re_encode_byte_identical(smf):
    value, end = midi.decode_midi_file(smf)
    assert end == len(smf)
    for name, decode in decoders():
        assert decode(smf) == value, name
    for name, encode in encoders():
        assert encode(value) == smf, name


@pytest.mark.parametrize("path", ["fast", "construct", "compiled"])
def test_mido_reads_what_the_encoders_write(smf, path):
    """Edit the file (a new tempo, a longer sysex, a longer delta): the encoders derive
    the VLQs, the sysex length and the track length, and mido reads the result."""
    value, _ = midi.decode_midi_file(smf)
    tempo = next(e for e in value.tracks[0].events
                 if e.effective == 0xFF and e.message.meta_type == midi.MetaType.SET_TEMPO)
    tempo.message.data.tempo = 750000
    sysex = next(e for e in value.tracks[1].events if e.effective == 0xF0)
    sysex.message.data = b"\x7d" * 20000            # a three-byte length
    sysex.delta = 1
    out = dict(encoders())[path](value)
    assert len(out) == len(smf) + 20000 - len(SYSEX) + 1 - 1  # 3-byte length, 1-byte delta
    read = mido.MidiFile(file=io.BytesIO(out))
    assert [m.tempo for m in read.tracks[0] if m.type == "set_tempo"] == [750000, 600000]
    got = [m for m in read.tracks[1] if m.type == "sysex"]
    assert len(got) == 1 and bytes(got[0].data) == b"\x7d" * 20000 and got[0].time == 1
    assert dict(decoders())[path](out) == value


def _running_file() -> tuple[bytes, list]:
    """Format 0: note-ons and a control change on channel 2 in a row (mido leaves the
    status byte out of each message after the first of a run), a meta event, then a new
    run; and the messages as mido made them."""
    messages = [
        mido.Message("note_on", channel=2, note=60, velocity=80, time=0),
        mido.Message("note_on", channel=2, note=64, velocity=80, time=10),
        mido.Message("note_on", channel=2, note=67, velocity=80, time=10),
        mido.Message("note_on", channel=2, note=60, velocity=0, time=200),
        mido.Message("control_change", channel=2, control=7, value=90, time=0),
        mido.Message("control_change", channel=2, control=10, value=64, time=0),
        mido.MetaMessage("marker", text="A", time=0),
        mido.Message("note_on", channel=2, note=72, velocity=1, time=0),
        mido.Message("note_on", channel=2, note=73, velocity=2, time=0),
    ]
    mid = mido.MidiFile(type=0, ticks_per_beat=TICKS)
    mid.tracks.append(mido.MidiTrack(messages))
    out = io.BytesIO()
    mid.save(file=out)
    return out.getvalue(), messages


def test_mido_writes_running_status():
    data, _ = _running_file()
    (events,) = walk(data)
    assert [present for *_, present in events] == [
        True, False, False, False, True, False, True, True, False, True]
    # the second note-on by hand: delta 10, then the data bytes 64 80 (no 0x92)
    at = events[1][0]
    assert data[at:at + 3] == bytes([10, 64, 80]) and data[at - 1] == 80


@pytest.mark.parametrize("path", ["fast", "construct", "compiled"])
def test_running_status_decodes_as_mido_reads_it(path):
    data, messages = _running_file()
    value = dict(decoders())[path](data)
    (events,) = walk(data)
    (track,) = value.tracks
    want = list(mido.MidiFile(file=io.BytesIO(data)).tracks[0])
    assert [m.type for m in want[:-1]] == [m.type for m in messages]
    assert len(track.events) == len(want) == len(events)
    for ev, msg, (_, delta, status, present) in zip(track.events, want, events, strict=True):
        assert ev.delta == msg.time == delta
        assert ev.effective == status
        assert ev.status == (status if present else None)  # None: left out, running
        _same_message(ev, msg)


def test_running_status_re_encodes_byte_identical_on_every_path():
    data, _ = _running_file()
    value, end = midi.decode_midi_file(data)
    assert end == len(data)
    for name, decode in decoders():
        assert decode(data) == value, name
    for name, encode in encoders():
        assert encode(value) == data, name
    # the model decides: a status given where the file ran on is written out again
    value.tracks[0].events[1].status = 0x92
    longer = midi.encode_midi_file(value)
    assert len(longer) == len(data) + 1
    assert [m.note for m in mido.MidiFile(file=io.BytesIO(longer)).tracks[0]
            if m.type == "note_on"] == [60, 64, 67, 60, 72, 73]
    for name, encode in encoders():
        assert encode(value) == longer, name


def test_a_data_byte_after_a_system_message_is_refused_where_it_stands():
    """A meta event cancels running status: a data byte right after one has no status.
    Every path refuses it at that byte, naming the message it would start."""
    track = bytes([0x00, 0x92, 0x3C, 0x50,        # note-on, channel 2
                   0x00, 0xFF, 0x06, 0x01, 0x41,  # marker "A"
                   0x00, 0x40, 0x50])             # a data byte: no status runs
    data = (b"MThd" + struct.pack(">IHHH", 6, 0, 1, TICKS)
            + b"MTrk" + struct.pack(">I", len(track)) + track)
    at = 14 + 8 + 10  # header, track header, the two events, the third one's delta
    assert data[at] == 0x40
    for name, decode in decoders():
        with pytest.raises(ConstraintError) as err:
            decode(data)
        assert (err.value.offset, err.value.path) == (
            at, "midi_file.tracks[0].events[2].message"), name


@pytest.mark.parametrize("path", ["fast", "construct", "compiled"])
def test_a_cut_file_is_a_truncation(smf, path):
    with pytest.raises(TruncatedError):
        dict(decoders())[path](smf[:-3])
    with pytest.raises(DecodeError):
        dict(decoders())[path](smf[:40])


def test_the_fixture_file_is_one_mido_reads():
    """fixtures/midi/two_tracks.hex is encoded from cases/midi_cases.py by bytewright;
    mido reads it as the case says."""
    text = (ROOT / "fixtures" / "midi" / "two_tracks.hex").read_text()
    data = bytes.fromhex("".join(line for line in text.splitlines()
                                 if not line.startswith("#")).replace(" ", ""))
    read = mido.MidiFile(file=io.BytesIO(data))
    assert (read.type, read.ticks_per_beat, len(read.tracks)) == (1, 480, 2)
    assert [m.type for m in read.tracks[0]] == [
        "track_name", "set_tempo", "time_signature", "end_of_track"]
    notes = list(read.tracks[1])
    assert [(m.type, m.time) for m in notes] == [
        ("program_change", 0), ("note_on", 0), ("note_off", 480), ("pitchwheel", 200_000),
        ("sysex", 0), ("end_of_track", 0)]
    assert notes[3].pitch == 0 and notes[3].channel == 1
    assert bytes(notes[4].data) == bytes([0x7E, 0x7F, 0x09, 0x01])


def test_an_smpte_time_division_and_a_format_0_file():
    """mido writes an SMPTE division as a negative ticks_per_beat: the high byte is minus
    the frame rate, the low byte the ticks per frame. The bit fields split it."""
    mid = mido.MidiFile(type=0, ticks_per_beat=-(25 << 8) + 40)  # 25 fps, 40 ticks a frame
    mid.tracks.append(mido.MidiTrack([mido.Message("note_on", note=1, velocity=2, time=0)]))
    out = io.BytesIO()
    mid.save(file=out)
    data = out.getvalue()
    assert data[12:14] == bytes([0xE7, 0x28])  # -25, 40
    for name, decode in decoders():
        value = decode(data)
        assert value.format == midi.SmfFormat.SINGLE_TRACK, name
        assert value.smpte and (value.ticks >> 8) - 0x80 == -25 and value.ticks & 0xFF == 40
    value = midi.decode_midi_file(data)[0]
    for name, encode in encoders():
        assert encode(value) == data, name
