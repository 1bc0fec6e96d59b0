"""Field values of the pcap fixtures (encoded by `bytewright fixtures write`)."""

import ipaddress


def _ip(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def cases(codec):
    """(name, record, params, value, doc) per fixture; ``codec`` is the generated module."""
    src, dst = _ip("192.0.2.1"), _ip("198.51.100.7")
    udp = codec.UdpDatagram(src_port=4000, dst_port=53, data=b"odd")
    yield ("udp", "udp_datagram", {"src": src, "dst": dst}, udp,
           "A UDP datagram; its checksum covers the pseudo-header from src/dst.")

    def header(total: int, options: bytes = b"", ttl: int = 64):
        return codec.Ipv4Header(
            version_ihl=codec.VersionIhl(ihl=5 + len(options) // 4, version=4), tos=0,
            total_length=total, identification=0x1c46,
            fragment=codec.Ipv4Fragment(fragment_offset=0, more_fragments=False,
                                        dont_fragment=True),
            ttl=ttl, protocol=17, src=src, dst=dst, options=options)

    ip = codec.Ipv4Packet(header=header(20 + 11), payload=udp, link_padding=b"")
    yield ("ipv4_udp", "ipv4_packet", {}, ip, "IPv4 (no options) carrying the UDP datagram.")
    ip_opts = codec.Ipv4Packet(header=header(24 + 11, options=b"\x01\x01\x01\x00"),
                               payload=udp, link_padding=b"\x00" * 3)
    eth = codec.EthernetFrame(dst=bytes.fromhex("020000000002"),
                              src=bytes.fromhex("020000000001"), ethertype=0x0800,
                              payload=ip_opts)
    yield ("ethernet", "ethernet_frame", {}, eth,
           "Ethernet II, IPv4 with 4 bytes of options, UDP, 3 bytes of link padding.")
    for magic, label in ((0xA1B2C3D4, "little"), (0xD4C3B2A1, "big")):
        packets = [
            codec.Packet(ts_sec=1_700_000_000, ts_usec=250_000, orig_len=14 + 20 + 11,
                         frame=codec.EthernetFrame(dst=eth.dst, src=eth.src, ethertype=0x0800,
                                                   payload=ip)),
            codec.Packet(ts_sec=1_700_000_001, ts_usec=0, orig_len=14 + 24 + 11 + 3,
                         frame=eth),
        ]
        value = codec.PcapFile(magic=magic, thiszone=0, sigfigs=0, snaplen=65535,
                               network=codec.LinkType.ETHERNET, packets=packets)
        yield (f"capture_{label}", "pcap_file", {}, value,
               f"A {label}-endian capture of two Ethernet/IPv4/UDP packets.")
