"""Field values of the MIDI fixtures (encoded by `bytewright fixtures write`)."""


def cases(codec):
    """(name, record, params, value, doc) per fixture; ``codec`` is the generated module."""
    K, M = codec.EventKind, codec.MetaType

    def meta(delta, kind, data):
        return codec.Event(delta=delta, status=0xFF, effective=0xFF,
                           message=codec.Meta(meta_type=kind, data=data))

    def channel(delta, kind, ch, message, running=False):
        status = kind << 4 | ch  # left out (None) where the previous event's applies
        return codec.Event(delta=delta, status=None if running else status,
                           effective=status, message=message)

    end = meta(0, M.END_OF_TRACK, None)
    tempo = codec.Track(events=[
        meta(0, M.TRACK_NAME, codec.Text(text=b"tempo")),
        meta(0, M.SET_TEMPO, codec.SetTempo(tempo=500000)),
        meta(0, M.TIME_SIGNATURE, codec.TimeSignature(
            numerator=4, denominator_log2=2, clocks_per_click=24, notated_32nd_notes_per_beat=8)),
        end])
    notes = codec.Track(events=[
        channel(0, K.PROGRAM_CHANGE, 0, codec.ProgramChange(program=1)),
        channel(0, K.NOTE_ON, 0, codec.Note(note=60, velocity=100)),
        channel(480, K.NOTE_OFF, 0, codec.Note(note=60, velocity=0)),
        channel(200_000, K.PITCH_BEND, 1, codec.PitchBend(low=0, high=64)),
        codec.Event(delta=0, status=0xF0, effective=0xF0,
                    message=codec.Sysex(data=bytes([0x7E, 0x7F, 0x09, 0x01]))),
        end])
    yield ("two_tracks", "midi_file", {},
           codec.MidiFile(format=codec.SmfFormat.SIMULTANEOUS, smpte=False, ticks=480,
                          tracks=[tempo, notes]),
           "Format 1: a tempo track and a note track (a three-byte delta, a pitch bend, sysex).")
    yield ("note_on", "event", {}, notes.events[1], "A note-on on channel 0, delta 0.")
    yield ("long_delta", "event", {}, notes.events[3],
           "A pitch bend after 200000 ticks: a three-byte VLQ (8c 9a 40).")
    yield ("sysex", "event", {}, notes.events[4],
           "A universal sysex (GM system on): F0, length 5, data, F7.")
    running = codec.Track(events=[
        channel(0, K.NOTE_ON, 3, codec.Note(note=60, velocity=80)),
        channel(10, K.NOTE_ON, 3, codec.Note(note=64, velocity=80), running=True),
        channel(10, K.NOTE_ON, 3, codec.Note(note=60, velocity=0), running=True),
        end])
    yield ("running_status", "track", {}, running,
           "Running status: two note-ons on channel 3 leave out their status byte 93.")
