"""The pcap example, on capture files written by scapy in both byte orders.

scapy builds the Ethernet/IPv4/UDP packets (computing the IPv4 and UDP checksums itself)
and writes them with ``PcapWriter(..., endianness="<" or ">")``. One schema reads both
files: the magic decides the order of the file and record headers, while the network
headers stay big-endian. scapy's own dissection of each frame is the expected value.
"""

from __future__ import annotations

import io
import ipaddress
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from scapy.layers.inet import ICMP, IP, UDP, IPOption_RR
from scapy.layers.l2 import Ether
from scapy.packet import Padding, Raw
from scapy.utils import PcapWriter, rdpcap

from bytewright.generator import project
from bytewright.runtime.errors import ChecksumError, ConstraintError

ROOT = Path(__file__).resolve().parent.parent
FILE_HEADER, RECORD_HEADER, ETHER, UDP_HEADER = 24, 16, 14, 8

# The project's generated module, loaded as `bytewright check` loads it (plug-ins included).
pcap = project.load(ROOT / "bytewright.toml").load_module("pcap")


def scapy_packets() -> list:
    a, b = "02:00:00:00:00:01", "02:00:00:00:00:02"
    return [
        Ether(src=a, dst=b) / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1234, dport=5678)
        / Raw(b"hello, pcap"),
        # IPv4 options (a record-route option): the header checksum covers them too.
        Ether(src=b, dst="ff:ff:ff:ff:ff:ff")
        / IP(src="192.168.1.1", dst="8.8.8.8", ttl=3, options=[IPOption_RR(routers=["1.2.3.4"])])
        / UDP(sport=53, dport=40000) / Raw(bytes(range(33))),
        # An odd-length payload (the checksum pads it) and Ethernet padding after IP.
        Ether(src=a, dst=b) / IP(src="10.1.1.1", dst="10.2.2.2", id=7, flags="DF")
        / UDP(sport=7, dport=9) / Raw(b"abc") / Padding(b"\x00" * 9),
        # Not UDP: the IPv4 payload stays bytes.
        Ether(src=a, dst=b) / IP(src="10.1.1.1", dst="10.2.2.2") / ICMP(id=1, seq=2),
    ]


def write_pcap(endianness: str) -> bytes:
    out = io.BytesIO()
    writer = PcapWriter(out, endianness=endianness, linktype=1, sync=True)
    for i, pkt in enumerate(scapy_packets()):
        pkt.time = 1_700_000_000 + i + 0.25
        writer.write(pkt)
    writer.flush()
    return out.getvalue()


@pytest.fixture(scope="module", params=["<", ">"], ids=["little", "big"])
def capture(request) -> tuple[str, bytes]:
    return request.param, write_pcap(request.param)


def decoders():
    yield "fast", lambda data: pcap.decode_pcap_file(data)[0]
    yield "construct", pcap.construct_decode_pcap_file
    yield "compiled", lambda data: pcap.construct_decode_pcap_file(data, compiled=True)


def frame_offsets(data: bytes, order: str) -> list[int]:
    """Absolute offset of each packet's frame, by the file format's own rules."""
    out, pos = [], FILE_HEADER
    while pos < len(data):
        incl = struct.unpack_from(order + "I", data, pos + 8)[0]
        out.append(pos + RECORD_HEADER)
        pos += RECORD_HEADER + incl
    return out


def test_the_magic_is_written_in_the_files_byte_order(capture):
    order, data = capture
    assert data[:4] == (b"\xd4\xc3\xb2\xa1" if order == "<" else b"\xa1\xb2\xc3\xd4")


@pytest.mark.parametrize("path", ["fast", "construct", "compiled"])
def test_decodes_what_scapy_wrote(capture, path):
    order, data = capture
    value = dict(decoders())[path](data)
    assert struct.unpack_from(order + "HH", data, 4) == (2, 4)  # constants: not in the model
    assert value.network == pcap.LinkType.ETHERNET
    assert len(value.packets) == len(scapy_packets())
    for i, (rec, sent) in enumerate(zip(value.packets, scapy_packets(), strict=True)):
        wire = bytes(sent)
        assert (rec.ts_sec, rec.ts_usec) == (1_700_000_000 + i, 250_000)
        assert rec.orig_len == len(wire)
        want = Ether(wire)  # scapy's own dissection, checksums filled in
        eth = rec.frame
        assert eth.dst == bytes.fromhex(want.dst.replace(":", ""))
        assert eth.src == bytes.fromhex(want.src.replace(":", ""))
        assert eth.ethertype == 0x0800  # big-endian in both files
        ip = eth.payload.header
        assert ip.version_ihl.version == 4 and ip.version_ihl.ihl == want[IP].ihl
        assert ipaddress.IPv4Address(ip.src) == ipaddress.IPv4Address(want[IP].src)
        assert ipaddress.IPv4Address(ip.dst) == ipaddress.IPv4Address(want[IP].dst)
        assert (ip.ttl, ip.protocol, ip.total_length) == (want[IP].ttl, want[IP].proto,
                                                          want[IP].len)
        assert ip.identification == want[IP].id
        assert ip.fragment.dont_fragment == bool(want[IP].flags.DF)
        if UDP in want:
            udp = eth.payload.payload
            assert (udp.src_port, udp.dst_port) == (want[UDP].sport, want[UDP].dport)
            assert udp.data == want[Raw].load
        else:
            assert eth.payload.payload == bytes(want[IP].payload)
    assert value.packets[1].frame.payload.header.options == bytes(scapy_packets()[1][IP])[20:28]
    assert value.packets[2].frame.payload.link_padding == b"\x00" * 9


def test_all_paths_agree_and_re_encode_byte_identical(capture):
    _, data = capture
    value, end = pcap.decode_pcap_file(data)
    assert end == len(data)
    assert pcap.construct_decode_pcap_file(data) == value
    assert pcap.construct_decode_pcap_file(data, compiled=True) == value
    assert pcap.encode_pcap_file(value) == data
    assert pcap.construct_encode_pcap_file(value) == data
    assert pcap.construct_encode_pcap_file(value, compiled=True) == data


def test_both_files_hold_the_same_packets():
    little, _ = pcap.decode_pcap_file(write_pcap("<"))
    big, _ = pcap.decode_pcap_file(write_pcap(">"))
    assert little.magic != big.magic and little.packets == big.packets


@pytest.mark.parametrize("encode", ["fast", "construct"])
def test_scapy_reads_what_the_encoders_write(capture, encode):
    """Change a packet's payload, addresses and port and encode: the encoders compute the
    record length and both checksums, which scapy recomputes to compare."""
    order, data = capture
    value, _ = pcap.decode_pcap_file(data)
    rec = value.packets[0]
    ip = rec.frame.payload
    ip.header.src, ip.header.dst = (int(ipaddress.IPv4Address(a))
                                    for a in ("172.16.0.9", "172.16.1.10"))
    ip.payload.dst_port = 9999
    ip.payload.data = b"a longer payload than before"
    ip.header.total_length = 20 + UDP_HEADER + len(ip.payload.data)
    rec.orig_len = ETHER + ip.header.total_length
    out = (pcap.encode_pcap_file if encode == "fast" else pcap.construct_encode_pcap_file)(value)
    assert out[:4] == data[:4]  # same byte order
    (first, *rest) = rdpcap(io.BytesIO(out))
    assert [bytes(p) for p in rest] == [bytes(p) for p in rdpcap(io.BytesIO(data))[1:]]
    assert (first[IP].src, first[IP].dst) == ("172.16.0.9", "172.16.1.10")
    assert first[UDP].dport == 9999 and first[Raw].load == b"a longer payload than before"
    fresh = first.copy()
    del fresh[IP].chksum, fresh[UDP].chksum, fresh[IP].len, fresh[UDP].len
    assert bytes(fresh) == bytes(first)  # scapy recomputes both checksums: they agree


@pytest.mark.parametrize("which", range(4))
def test_a_flipped_ipv4_header_byte_fails_the_header_checksum(capture, which):
    order, data = capture
    frame = frame_offsets(data, order)[which]
    ip = frame + ETHER
    ihl = (data[ip] & 0x0F) * 4
    for at in (ip + 8, ip + ihl - 1):  # the TTL; the last byte (an option or the address)
        bad = bytearray(data)
        bad[at] ^= 0x01
        for name, decode in decoders():
            with pytest.raises(ChecksumError) as info:
                decode(bytes(bad))
            assert info.value.offset == ip + 10, name
            assert info.value.path.endswith(f"packets[{which}].frame.payload.header"
                                            ".header_checksum"), (name, info.value.path)


@pytest.mark.parametrize("which", range(3))
def test_a_flipped_udp_byte_fails_the_udp_checksum(capture, which):
    order, data = capture
    frame = frame_offsets(data, order)[which]
    udp = frame + ETHER + (data[frame + ETHER] & 0x0F) * 4
    for at in (udp, udp + UDP_HEADER + 1):  # the source port; a payload byte
        bad = bytearray(data)
        bad[at] ^= 0x04
        for name, decode in decoders():
            with pytest.raises(ChecksumError) as info:
                decode(bytes(bad))
            assert info.value.offset == udp + 6, name
            assert info.value.path.endswith(f"packets[{which}].frame.payload.payload"
                                            ".checksum"), (name, info.value.path)


def test_the_udp_checksum_covers_the_addresses_from_the_ip_header(capture):
    """Change the destination address and fix the IPv4 header checksum by hand: only the
    UDP checksum (whose pseudo-header holds the address) still fails."""
    order, data = capture
    ip = frame_offsets(data, order)[0] + ETHER
    bad = bytearray(data)
    bad[ip + 19] ^= 0x01
    bad[ip + 10:ip + 12] = b"\x00\x00"
    words = struct.unpack(">10H", bytes(bad[ip:ip + 20]))
    total = sum(words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    bad[ip + 10:ip + 12] = struct.pack(">H", ~total & 0xFFFF)
    for name, decode in decoders():
        with pytest.raises(ChecksumError) as info:
            decode(bytes(bad))
        assert info.value.offset == ip + 20 + 6, name


def test_a_file_that_is_not_pcap_is_refused(capture):
    """A magic that is 0xa1b2c3d4 in neither order (here the nanosecond variant, which
    this schema does not describe) is refused on every path."""
    _, data = capture
    bad = b"\x4d\x3c\xb2\xa1" + data[4:]
    for name, decode in decoders():
        with pytest.raises(ConstraintError) as info:
            decode(bad)
        assert info.value.offset == 0 and "magic" in info.value.path, name


def bytewright(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("bytewright") or str(Path(sys.executable).with_name("bytewright"))
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_check_is_green():
    r = bytewright("check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 failed" in r.stdout


def test_inspect_detects_both_byte_orders(tmp_path):
    for order in "<>":
        path = tmp_path / "capture.pcap"
        path.write_bytes(write_pcap(order))
        r = bytewright("inspect", str(path))
        assert r.returncode == 0, r.stderr
        assert "pcap.pcap_file (detected" in r.stdout


def fixture_bytes(name: str) -> bytes:
    text = (ROOT / "fixtures" / "pcap" / f"{name}.hex").read_text()
    return bytes.fromhex("".join(line for line in text.splitlines()
                                 if not line.startswith("#")))


@pytest.mark.parametrize("name", ["capture_little", "capture_big"])
def test_the_fixture_captures_are_valid_for_scapy(name):
    """The committed fixtures, made by the encoder from cases/: scapy reads them and its
    recomputed IPv4 and UDP checksums equal the encoder's."""
    data = fixture_bytes(name)
    assert data[:4] == (b"\xd4\xc3\xb2\xa1" if name.endswith("little") else b"\xa1\xb2\xc3\xd4")
    packets = rdpcap(io.BytesIO(data))
    assert len(packets) == 2
    for pkt in packets:
        assert pkt[IP].src == "192.0.2.1" and pkt[UDP].dport == 53
        fresh = pkt.copy()
        del fresh[IP].chksum, fresh[UDP].chksum
        assert bytes(fresh) == bytes(pkt)
    assert packets[1][IP].options and bytes(packets[1])[-3:] == b"\x00\x00\x00"
