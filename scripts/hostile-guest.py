#!/usr/bin/env python3
# Hostile-guest loads from issue 26's table, against a broadcaster on 127.0.0.1, sent from 127.0.0.2
# (so a real listener on 127.0.0.1 is another machine to the per-address caps). Each load is bounded
# in count and in seconds; the sockets are this process's own and close when it exits.
#   hostile-guest.py clockflood PORT BYTES SECONDS   join, then clock requests over TCP, never reading
#   hostile-guest.py frames PORT COUNT SECONDS       connections holding half of a 1 MiB frame before Hello
#   hostile-guest.py hellos PORT COUNT SECONDS       connections that only say Hello, never reading
#   hostile-guest.py idle CONTROL_PORT COUNT SECONDS idle connections to the remote control
# The protobuf is written by hand from Proto/partycast.proto (Envelope.hello = 1, .clock_request = 9).
import socket, struct, sys, time
mode, port, count, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
def frame(body): return struct.pack(">I", len(body)) + body
def field(n, wire, payload): return bytes([n << 3 | wire]) + payload
def varint(v):
    out = b""
    while True:
        b = v & 0x7f; v >>= 7
        out += bytes([b | (0x80 if v else 0)])
        if not v: return out
def ld(n, data): return field(n, 2, varint(len(data)) + data)
def hello(i): return frame(ld(1, field(1, 0, varint(5)) + ld(2, b"guest%d" % i) + ld(3, b"guesthost") + ld(4, b"g%d" % i)))
def sock(rcvbuf=None):
    s = socket.socket(); s.bind(("127.0.0.2", 0))
    if rcvbuf: s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port)); return s
end = time.time() + seconds
held = []
if mode == "clockflood":
    s = sock(2048); s.sendall(hello(0))
    req = frame(ld(9, field(1, 0, varint(1)))) * 4096
    sent = 0
    try:
        while time.time() < end and sent < count:
            s.sendall(req); sent += len(req)
        print("not cut off after", sent, "bytes")
    except OSError as e: print("cut off after", sent, "bytes:", e)
elif mode == "frames":
    for i in range(count):
        try:
            s = sock(); s.sendall(struct.pack(">I", 1 << 20) + b"\n" * 65536); held.append(s)
        except OSError as e: print("connect/send", i, e)
    print("opened", len(held))
elif mode == "hellos":
    for i in range(count):
        try:
            s = sock(4096); s.sendall(hello(i)); held.append(s)
        except OSError as e: print("connect/send", i, e)
    print("opened", len(held))
elif mode == "idle":
    for i in range(count):
        try: held.append(sock())
        except OSError as e: print("connect", i, e); break
    print("opened", len(held))
while time.time() < end and mode != "clockflood": time.sleep(0.2)
