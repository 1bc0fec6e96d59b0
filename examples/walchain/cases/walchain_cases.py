"""Field values of the walchain fixtures (encoded by `bytewright fixtures write`)."""


def cases(codec):
    def frame(n, commit, fill):
        return codec.Frame(page_number=n, commit_size=commit, salt1=0x1234, salt2=0xABCD,
                           data=bytes([fill]) * 64)

    for magic, label in ((0x377F0683, "big"), (0x377F0682, "little")):
        frames = [frame(1, 0, 0x11), frame(2, 0, 0x22), frame(3, 3, 0x33)]
        yield (f"three_frames_{label}", "wal_file", {},
               codec.WalFile(magic=magic, page_size=64, checkpoint_seq=5, salt1=0x1234,
                             salt2=0xABCD, frames=frames),
               f"Header and three 64-byte frames, checksum words {label}-endian.")
