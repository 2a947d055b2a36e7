#!/usr/bin/env python3
"""Fake stream servers for HTTPSourceTests, on 127.0.0.1 (a free port; prints "listening on PORT"
to stderr once it accepts). Every route is one way a server answers a radio player, good or bad.

  fake_radio.py --mp3 FILE --dir DIR [--no-range] [--tls CERT KEY] [--lifetime SECONDS]
"""
import argparse
import http.server
import itertools
import os
import socketserver
import ssl
import sys
import threading
import time

args = None
hits = {}
hits_lock = threading.Lock()
flooded = 0


def icy_block(text):
    """A metadata block: length byte (x16) and the NUL-padded text."""
    size = (len(text) + 15) // 16
    return bytes([size]) + text + b"\0" * (size * 16 - len(text))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *a):
        pass

    def raw(self, data):
        self.wfile.write(data)
        self.wfile.flush()

    def audio(self):
        with open(args.mp3, "rb") as f:
            return f.read()

    def live(self, blocks, seconds_apart):
        """A live station: each of the blocks (an endless iterator) a while after the last."""
        for block in blocks:
            self.raw(block)
            time.sleep(seconds_apart)

    def do_GET(self):
        path = self.path.split("?")[0]
        with hits_lock:
            hits[path] = hits.get(path, 0) + 1
        try:
            route = ROUTES.get(path)
            if route is None and path.startswith("/file/"):
                route = Handler.file
            if route is None and path.startswith("/status/"):
                route = Handler.status
            if route is None:
                return self.send_error(404)
            route(self)
        except (BrokenPipeError, ConnectionResetError):
            pass

    # -- SHOUTcast v1: "ICY 200 OK", Latin-1 station name, titles in Latin-1 and in UTF-8 ----------
    def shoutcast(self):
        metaint = 8192
        self.raw(b"ICY 200 OK\r\nicy-name: Radio Caf\xe9\r\ncontent-type: audio/mpeg\r\nicy-metaint: %d\r\n\r\n" % metaint)
        titles = [b"StreamTitle='Caf\xe9 del Mar';", "StreamTitle='Ünïcödé ♫ it's \"quoted\"';StreamUrl='http://x/';".encode()]
        data = self.audio()
        offsets = itertools.cycle(range(0, len(data) - metaint, metaint))
        self.live((data[i:i + metaint] + icy_block(titles[n % 2]) for n, i in enumerate(offsets)), seconds_apart=0.05)

    # -- ICY with a garbage block (claims 255x16 bytes of noise), then a good title, then the end ---
    def garbage(self):
        metaint = 16000
        data = self.audio()
        body = data[:metaint] + bytes([255]) + os.urandom(255 * 16) + data[metaint:2 * metaint] \
            + icy_block(b"StreamTitle='After garbage';") + data[2 * metaint:3 * metaint]
        self.raw(b"HTTP/1.0 200 OK\r\ncontent-type: audio/mpeg\r\nicy-metaint: %d\r\ncontent-length: %d\r\n\r\n" % (metaint, len(body)) + body)

    # -- a metadata block claiming more than the stream holds: the body ends inside it -----------
    def overclaim(self):
        metaint = 16000
        data = self.audio()
        body = data[:metaint] + icy_block(b"StreamTitle='Before the end';") + data[metaint:2 * metaint] + bytes([255]) + b"StreamTitle='cut"
        self.raw(b"HTTP/1.0 200 OK\r\ncontent-type: audio/mpeg\r\nicy-metaint: %d\r\ncontent-length: %d\r\n\r\n" % (metaint, len(body)) + body)

    # -- a live stream (no length) that drops after 64 KiB on its first connection -------------
    def drop(self):
        first = hits["/drop"] == 1
        self.raw(b"HTTP/1.0 200 OK\r\ncontent-type: audio/mpeg\r\nicy-name: Dropper\r\n\r\n")
        data = self.audio()
        if first:
            self.raw(data[:65536])
            return
        self.live(itertools.cycle([data[i:i + 8192] for i in range(0, len(data), 8192)]), seconds_apart=0.02)

    # -- the same, but the first connection goes silent instead (the socket stays open) ----------
    def stall(self):
        first = hits["/stall"] == 1
        self.raw(b"HTTP/1.0 200 OK\r\ncontent-type: audio/mpeg\r\n\r\n")
        data = self.audio()
        if first:
            self.raw(data[:65536])
            self.hold_until_the_client_leaves()
            return
        while True:
            self.raw(data)

    # -- redirects: relative Locations, 302 then 301, to the dropping stream -------------------
    def redirect_drop(self):
        self.send_response(302)
        self.send_header("Location", "hop")
        self.end_headers()

    def hop(self):
        self.send_response(301)
        self.send_header("Location", "/redirect-target")
        self.end_headers()

    def redirect_target(self):
        # The first visit drops, as /drop does; a reconnect must come back through /redirect-drop.
        first = hits["/redirect-target"] == 1
        self.raw(b"HTTP/1.0 200 OK\r\ncontent-type: audio/mpeg\r\n\r\n")
        data = self.audio()
        self.raw(data[:65536] if first else data)

    def redirect_loop(self):
        self.send_response(302)
        self.send_header("Location", "/redirect-loop")
        self.end_headers()

    # -- playlists -----------------------------------------------------------------------------
    def text(self, body, content_type):
        body = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.raw(body)

    def good_pls(self):
        self.text("[playlist]\nNumberOfEntries=2\nFile2=/shoutcast\nFile1=/status/404\nVersion=2\n", "audio/x-scpls")

    def good_m3u(self):  # by content: plain text, #EXTM3U, a nested playlist
        self.text("#EXTM3U\n#EXTINF:-1,Dead\nhttp://127.0.0.1:1/nothing\n#EXTINF:-1,Good\n/good.pls\n", "text/plain")

    def dead_m3u(self):
        self.text("/status/404\n/html\n", "audio/x-mpegurl")

    def self_m3u(self):
        self.text("#EXTM3U\nself.m3u\n", "application/octet-stream")

    def ping_m3u(self):  # ping -> pong -> ping
        self.text("/pong.m3u\n", "audio/x-mpegurl")

    def pong_m3u(self):
        self.text("/ping.m3u\n", "audio/x-mpegurl")

    def hls(self):
        self.text("#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nseg1.aac\n", "application/vnd.apple.mpegurl")

    # -- bad answers ---------------------------------------------------------------------------
    def html(self):
        self.text("<!DOCTYPE html><html><body>Listen live!</body></html>", "text/html; charset=utf-8")

    def html_as_audio(self):  # the registry's sniffing has to catch this one
        self.text("<!DOCTYPE html><html><body>" + "Listen live! " * 200 + "</body></html>", "audio/mpeg")

    def status(self):
        self.send_error(int(self.path.split("/")[2]))

    def endless(self):
        self.raw(b"HTTP/1.1 200 OK\r\n")
        for i in range(100000):
            self.raw(b"X-Filler-%d: %s\r\n" % (i, b"a" * 100))

    def silent(self):
        self.hold_until_the_client_leaves()

    def hold_until_the_client_leaves(self):
        """Says nothing more and keeps the connection open until the client closes it (or the server's lifetime ends)."""
        self.connection.settimeout(args.lifetime)
        try:
            while self.connection.recv(4096):
                pass
        except (TimeoutError, ConnectionResetError):
            pass

    # -- as fast as the client takes it, counting what it took: backpressure bounds that -------
    def flood(self):
        global flooded
        self.raw(b"HTTP/1.0 200 OK\r\ncontent-type: audio/mpeg\r\n\r\n")
        chunk = self.audio()[:65536]
        while True:
            self.raw(chunk)
            with hits_lock:
                flooded += len(chunk)

    def flooded_route(self):
        with hits_lock:
            self.text("%d" % flooded, "text/plain")

    def hits_route(self):
        with hits_lock:
            self.text("".join("%s %d\n" % kv for kv in hits.items()), "text/plain")

    # -- static files, with or without Range -------------------------------------------------
    def file(self):
        path = os.path.join(args.dir, os.path.basename(self.path))
        with open(path, "rb") as f:
            data = f.read()
        start = 0
        header = self.headers.get("Range")
        if header and not args.no_range and header.startswith("bytes=") and header.endswith("-"):
            start = int(header[6:-1])
        if start >= len(data) and start > 0:
            self.send_response(416)
            self.send_header("Content-Range", "bytes */%d" % len(data))
            self.end_headers()
            return
        self.send_response(206 if start else 200)
        self.send_header("Content-Type", "audio/mpeg")
        self.send_header("Content-Length", str(len(data) - start))
        if start:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        if not args.no_range:
            self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self.raw(data[start:])


ROUTES = {
    "/shoutcast": Handler.shoutcast, "/garbage": Handler.garbage, "/overclaim": Handler.overclaim,
    "/drop": Handler.drop, "/stall": Handler.stall, "/redirect-drop": Handler.redirect_drop, "/hop": Handler.hop,
    "/redirect-target": Handler.redirect_target, "/redirect-loop": Handler.redirect_loop,
    "/good.pls": Handler.good_pls, "/good.m3u": Handler.good_m3u, "/dead.m3u": Handler.dead_m3u,
    "/self.m3u": Handler.self_m3u, "/ping.m3u": Handler.ping_m3u, "/pong.m3u": Handler.pong_m3u, "/hls.m3u8": Handler.hls,
    "/html": Handler.html, "/html-as-audio": Handler.html_as_audio, "/endless": Handler.endless,
    "/silent": Handler.silent, "/hits": Handler.hits_route, "/flood": Handler.flood, "/flooded": Handler.flooded_route,
}


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global args
    parser = argparse.ArgumentParser()
    parser.add_argument("--mp3", required=True)
    parser.add_argument("--dir", default=".")
    parser.add_argument("--no-range", action="store_true")
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    parser.add_argument("--lifetime", type=float, default=120, help="exit after this many seconds, whatever happens")
    args = parser.parse_args()
    server = Server(("127.0.0.1", 0), Handler)
    if args.tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*args.tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Timer(args.lifetime, lambda: os._exit(0)).start()
    print("listening on %d" % server.server_address[1], file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
