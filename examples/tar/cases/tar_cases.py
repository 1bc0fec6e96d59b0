"""Field values of the tar fixtures (encoded by `bytewright fixtures write`)."""


def _name(text: str, width: int = 100) -> bytes:
    return text.encode().ljust(width, b"\0")


def cases(codec):
    """(name, record, params, value, doc) per fixture; ``codec`` is the generated module."""
    T = codec.Typeflag
    ustar = b"ustar\x0000"
    gnu = b"ustar  \x00"

    def member(data: bytes, magic: bytes, prefix: bytes = b"", *, typeflag=T.REGULAR,
               mode=0o644, linkname: str = "", dev=None):
        # prefix only in ustar headers; atime/ctime (GNU) left out: None, an empty field
        return codec.Member(mode=mode, uid=1000, gid=1000, mtime=1_700_000_000,
                            typeflag=typeflag, linkname=_name(linkname), magic=magic,
                            uname=_name("user", 32), gname=_name("users", 32),
                            devmajor=dev, devminor=dev, prefix=prefix, data=data)

    plain = bytes(155)
    end = codec.Block(name=bytes(100), member=None)
    hello = codec.Block(name=_name("hello.txt"),
                        member=member(b"hello, tar\n", ustar, plain, dev=0))
    yield ("hello_block", "block", {}, hello,
           "One USTAR member: an 11-byte file, its data padded to a block.")
    yield ("ustar_archive", "archive", {}, codec.Archive(blocks=[
        hello,
        codec.Block(name=_name("x" * 40 + ".txt"),
                    member=member(b"", ustar, _name("a/" + "p" * 60, 155), dev=0)),
        codec.Block(name=_name("link"),
                    member=member(b"", ustar, plain, typeflag=T.SYMLINK, mode=0o777,
                                  linkname="hello.txt", dev=0)),
        end]), "A USTAR archive: a file, an empty file with a name prefix, a symlink.")
    long_name = b"d/" + b"n" * 120
    yield ("gnu_archive", "archive", {}, codec.Archive(blocks=[
        codec.Block(name=_name("././@LongLink"),
                    member=member(long_name + b"\0", gnu, typeflag=T.GNU_LONGNAME, mode=0)),
        codec.Block(name=_name(long_name[:100].decode()),
                    member=member(b"\x5a" * 600, gnu)),
        end]), "A GNU archive: a long name member, then a 600-byte file (two blocks).")
    yield ("v7_archive", "archive", {}, codec.Archive(blocks=[
        codec.Block(name=_name("old.txt"),
                    member=member(b"v7\n", bytes(8), typeflag=T.REGULAR_V7, dev=0)),
        end]), "A V7 archive (no magic, NUL type flag).")
