#!/usr/bin/env python3
"""A TCP relay that records every byte it forwards, each direction of each connection on its own:
what the network between a remote and the party's control port carries.

remote_test.py imports it for the page; as a program (ControlKeyTests, for `broadcaster ctl`):
  relay.py LISTEN_PORT TARGET_HOST:PORT
relays 127.0.0.1:LISTEN_PORT to the target, says "relay: listening" on stderr, and on SIGTERM (or
after 60 s) prints each stream it carried as one line of hex on stdout and exits 0.
"""
import signal
import socket
import sys
import threading


class Relay:
    def __init__(self, target, port=0, timeout=20):
        self.target = target
        self.timeout = timeout
        self.listener = socket.create_server(("127.0.0.1", port))
        self.port = self.listener.getsockname()[1]
        self.streams = []
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=self.timeout)
            except OSError:
                client.close()  # the party is gone: the remote must see its connection fail
                continue
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self.pump, args=(source, sink), daemon=True).start()

    def pump(self, source, sink):
        stream = bytearray()
        with self.lock:
            self.streams.append(stream)
        try:
            while chunk := source.recv(65536):
                with self.lock:
                    stream.extend(chunk)
                sink.sendall(chunk)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def recorded(self):
        with self.lock:
            return [bytes(stream) for stream in self.streams]


def main():
    host, port = sys.argv[2].rsplit(":", 1)
    relay = Relay((host, int(port)), port=int(sys.argv[1]))
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print("relay: listening on", relay.port, file=sys.stderr, flush=True)
    done.wait(60)
    for stream in relay.recorded():
        print(stream.hex())
    return 0


if __name__ == "__main__":
    sys.exit(main())
