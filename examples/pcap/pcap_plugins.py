"""The UDP checksum (RFC 768), registered as a bytewright plug-in.

It is the Internet checksum (RFC 1071) of a pseudo-header taken from the enclosing IPv4
header (source and destination address, a zero byte, protocol 17, the UDP length)
followed by the whole UDP datagram with its checksum field as zero. A computed zero is
sent as 0xffff, because a stored zero means "no checksum".
"""

from __future__ import annotations

import struct

_UDP = 17


def _ones_complement_sum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def udp_checksum(data: bytes, src: int = 0, dst: int = 0) -> int:
    """``data`` is the UDP datagram (header and payload, checksum field zeroed);
    ``src``/``dst`` are the IPv4 addresses as integers."""
    data = bytes(data)
    pseudo = struct.pack(">IIBBH", src, dst, 0, _UDP, len(data))
    value = ~_ones_complement_sum(pseudo + data) & 0xFFFF
    return value or 0xFFFF


def register(reg) -> None:
    """Called once by ``registry.load_plugin("pcap_plugins:register")``."""
    reg.add_checksum("udp_checksum", bits=16, func=udp_checksum, params=("src", "dst"),
                     doc="RFC 768 UDP checksum over the IPv4 pseudo-header and the datagram")
