#!/usr/bin/env python3
"""Shows the kernel behaviour behind engine::demux::Strays: in a SO_REUSEPORT group whose
steering program (SO_ATTACH_REUSEPORT_CBPF) sends each datagram to the socket its first byte
names, an unconnected member that joins once the group holds a connected socket receives
every datagram, whatever the program says. A QUIC connection served inline is such a member
between its bind and its connect (engine::quic::inline_server).

Loopback only; no root. Prints which socket got the datagrams steered to index 0, 1 and 2 at
each step. Measured on Linux 6.18 (2026-11-30): the second newcomer, while unconnected, gets
all three; connected, the steering holds again.

Usage: python3 lab/reuseport-window.py
"""
import ctypes
import select
import socket
import time

SO_ATTACH_REUSEPORT_CBPF = 51


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def main():
    # A = the payload's first byte; return A (the group index).
    program = (SockFilter * 2)(SockFilter(0x30, 0, 0, 0), SockFilter(0x16, 0, 0, 0))
    fprog = SockFprog(2, ctypes.cast(program, ctypes.POINTER(SockFilter)))
    libc = ctypes.CDLL(None, use_errno=True)

    # As the server: the shared socket bound alone, then opened to the group, two lanes.
    shared = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    shared.bind(("127.0.0.1", 0))
    port = shared.getsockname()[1]
    shared.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)

    def member():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind(("127.0.0.1", port))
        s.setblocking(False)
        return s

    lanes = [member(), member()]
    if libc.setsockopt(shared.fileno(), socket.SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF,
                       ctypes.byref(fprog), ctypes.sizeof(fprog)) != 0:
        raise OSError(ctypes.get_errno(), "SO_ATTACH_REUSEPORT_CBPF")
    shared.setblocking(False)
    names = {shared: "shared", lanes[0]: "lane 0", lanes[1]: "lane 1"}
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.bind(("127.0.0.1", 0))
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.bind(("127.0.0.1", 0))

    def probe(step):
        for index in (0, 1, 2):
            client.sendto(bytes([index]) + b"payload", ("127.0.0.1", port))
        # Wait for all three (a busy machine delivers late), at most 2 s.
        got = []
        deadline = time.monotonic() + 2.0
        while len(got) < 3 and time.monotonic() < deadline:
            readable, _, _ = select.select(list(names), [], [], deadline - time.monotonic())
            for s in readable:
                got.append((s.recv(64)[0], names[s]))
        print(f"{step:55} " + ", ".join(f"{i} -> {n}" for i, n in sorted(got)))

    def newcomer(which):
        """A socket joins the group, is probed unconnected (the inline socket between its bind
        and its connect), then connected."""
        s = member()
        names[s] = f"{which}, unconnected"
        probe(f"{which} joins, unconnected")
        s.connect(peer.getsockname())
        names[s] = f"{which}, connected"
        probe(f"{which} connected")

    probe("the group alone")
    newcomer("a first newcomer")  # no connected member yet: the steering holds
    newcomer("a second newcomer")  # the group holds a connected one: it takes all three

if __name__ == "__main__":
    main()
