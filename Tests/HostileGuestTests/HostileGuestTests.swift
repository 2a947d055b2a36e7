import Foundation
import PartyCastTestSupport
import PartyCastWire
import XCTest

/// The attacks that load the machine (a clock flood, a thousand connections): they run in the test
/// run's timing lane, never beside a class that measures sync or latency.
final class HostileGuestFloodTests: HostileGuestCase {
    /// Row 1: joined, then clock requests over TCP as fast as the socket takes them, never reading,
    /// while the party is paused (no audio flows, so the slow-listener cut-off cannot fire). Before:
    /// RSS 777 MB → 1.59 GB in 15 s. Now the flood is cut off and its answers never pile up.
    func testAClockFloodWhilePausedIsCutOff() throws {
        let directory = try temporaryDirectory()
        let party = try startParty(seconds: 12)
        XCTAssertEqual(try curl(["-X", "POST", "\(party.control)/api/pause"]).status, 200)
        let guest = try XCTUnwrap(GuestSocket(port: party.port, receiveBufferBytes: 2048))
        XCTAssertTrue(guest.hello())
        let joined = try join(party, recording: "\(directory)/played.wav")
        var request = PCEnvelope()
        request.body = .clockRequest(PCClockRequest())
        let frame = try WireFraming.encode(request)
        let batch = Array([[UInt8]](repeating: frame, count: 4096).joined())
        var peak = 0.0
        var sent = 0
        var cut = false
        // Bounded: 200 MB or 20 s, whichever comes first; the broadcaster closes it long before.
        let deadline = Date().addingTimeInterval(20)
        while sent < 200 << 20 && Date() < deadline {
            guard guest.send(batch) else { cut = true; break }
            sent += batch.count
            peak = max(peak, residentMiB(party.process.pid))
        }
        XCTAssertTrue(cut, "a flood of \(sent) bytes of clock requests was not cut off")
        let status = try curl(["\(party.control)/api/status"]).body
        XCTAssertEqual(try curl(["-X", "POST", "\(party.control)/api/resume"]).status, 200)
        peak = max(peak, residentMiB(party.process.pid))
        try assertPlayed(joined, recording: "\(directory)/played.wav", atLeast: 3, party)
        assertBounded(party, peakMiB: peak, refusals: "TCP clock requests over rate", atLeast: 1, status: status)
    }

    /// Row 3: 1,000 connections that only say Hello to a public party and never read. Before: all
    /// joined, 391 MB of audio sent in 20 s, a 445 KB snapshot. Now one address holds at most the
    /// per-address cap, and a listener from another address joins and plays throughout.
    func testAThousandHellosHoldNoMoreThanTheCap() throws {
        let directory = try temporaryDirectory()
        // The song outlasts the attack, which is bounded in time too (a loaded machine connects slowly).
        let party = try startParty(seconds: 30)
        var guests: [GuestSocket] = []
        var peak = 0.0
        var joined: BackgroundProcess?
        let attackDeadline = Date().addingTimeInterval(20)
        for k in 0..<1000 where Date() < attackDeadline {
            if k == 500 || (joined == nil && attackDeadline.timeIntervalSinceNow < 10) {
                joined = try join(party, recording: "\(directory)/played.wav")
            }
            guard let guest = GuestSocket(port: party.port, receiveBufferBytes: 4096) else { continue }
            _ = guest.hello(name: "crowd\(k)")
            guests.append(guest)
            if k % 50 == 0 { peak = max(peak, residentMiB(party.process.pid)) }
        }
        XCTAssertGreaterThan(guests.count, 200, "the attack itself got going")
        let evicted = guests.count - 40
        var status = try waitForRefusals("connections over the per-address cap", atLeast: evicted, party)
        // The census frees an evicted guest's place at once, the party's list once its connection has
        // closed: under load a moment later (35 listed at one make test).
        let settled = Date().addingTimeInterval(10)
        while Self.listenerCount(in: status) > 33 && Date() < settled {
            status = try curl(["\(party.control)/api/status"]).body
        }
        XCTAssertLessThanOrEqual(Self.listenerCount(in: status), 33, "at most the per-address cap of guests, and the real listener")
        try assertPlayed(try XCTUnwrap(joined), recording: "\(directory)/played.wav", atLeast: 3, party)
        peak = max(peak, residentMiB(party.process.pid))
        assertBounded(party, peakMiB: peak, refusals: "connections over the per-address cap", atLeast: evicted, status: status)
    }
}

/// The attacks that hold connections or send little (half-sent frames, idle control connections,
/// foreign origins, escapes in a title): light enough to run beside any other class.
final class HostileGuestTests: HostileGuestCase {
    /// Row 2: 300 connections, each holding the start of a 1 MiB frame before Hello. Before: +350 MB
    /// in 0.3 s. Now each is refused from its length prefix (a few KiB until a peer has joined).
    func testHalfSentMegabyteFramesBeforeHelloCostNothing() throws {
        let directory = try temporaryDirectory()
        let party = try startParty(seconds: 15)
        let joined = try join(party, recording: "\(directory)/played.wav")
        var prefix = withUnsafeBytes(of: UInt32(1 << 20).bigEndian) { Array($0) }
        prefix += [UInt8](repeating: 0x0A, count: 64 * 1024)
        var peak = 0.0
        var guests: [GuestSocket] = []
        for _ in 0..<300 {
            guard let guest = GuestSocket(port: party.port) else { continue }
            _ = guest.send(prefix)
            guests.append(guest)
            peak = max(peak, residentMiB(party.process.pid))
        }
        let closed = guests.filter { $0.closedByPeer(within: 5) }.count
        XCTAssertEqual(closed, guests.count, "every half-sent frame's connection is closed")
        let status = try curl(["\(party.control)/api/status"]).body
        try assertPlayed(joined, recording: "\(directory)/played.wav", atLeast: 4, party)
        assertBounded(party, peakMiB: peak, refusals: "frame over budget", atLeast: 1, status: status)
    }

    /// Row 4: idle connections to the control port. Before: at the 1,024-descriptor limit a real
    /// listener's join timed out and the accept-error log wrote 255 MB in 3 s. Now one address holds
    /// at most 16, each closed when it sends no request in 10 s; the listener joins and plays.
    func testIdleControlConnectionsStarveNoListener() throws {
        let directory = try temporaryDirectory()
        let party = try startParty(seconds: 20)
        var guests: [GuestSocket] = []
        for _ in 0..<1030 {
            guard let guest = GuestSocket(port: party.controlPort) else { continue }
            guests.append(guest)
        }
        let joined = try join(party, recording: "\(directory)/played.wav")
        let closed = guests.filter { $0.closedByPeer(within: 13) }.count
        XCTAssertEqual(closed, guests.count, "every idle control connection is closed: refused over the cap, or after 10 s")
        let status = try curl(["\(party.control)/api/status"]).body
        try assertPlayed(joined, recording: "\(directory)/played.wav", atLeast: 12, party)
        XCTAssertGreaterThanOrEqual(Self.refusalCount("control: no request in time", in: status), 1, status)
        assertBounded(party, peakMiB: residentMiB(party.process.pid), refusals: "control: connections over cap", atLeast: 1000, status: status)
    }

    /// Rows 8 and 9: a page on evil.example whose name resolves to the broadcaster (DNS rebinding)
    /// sends Host evil.example; a page on any origin opens /api/events. Before: 200 and 101. Now 421
    /// and 403 (400 for the upgrade), and the party is not paused. The same requests with the broadcaster's own name pass.
    func testRebindingAndForeignOriginsAreRefused() throws {
        let party = try startParty(seconds: 30)
        defer { party.process.signal(SIGINT); _ = party.process.wait(timeout: 30) }
        let evilHost = ["-H", "Host: evil.example"]
        let evilOrigin = ["-H", "Origin: http://evil.example"]
        XCTAssertEqual(try curl(evilHost + evilOrigin + ["-X", "POST", "\(party.control)/api/pause"]).status, 421)
        XCTAssertEqual(try curl(evilHost + ["\(party.control)/api/library"]).status, 421)
        XCTAssertEqual(try curl(evilHost + ["\(party.control)/"]).status, 421)
        XCTAssertEqual(try curl(evilOrigin + ["-X", "POST", "\(party.control)/api/pause"]).status, 403)
        let upgrade = ["-H", "Connection: Upgrade", "-H", "Upgrade: websocket", "-H", "Sec-WebSocket-Version: 13",
                       "-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="]
        // Hummingbird answers every refused upgrade 400, whichever check refused it.
        XCTAssertEqual(try curl(upgrade + evilOrigin + ["\(party.control)/api/events"]).status, 400)
        XCTAssertEqual(try curl(upgrade + evilHost + ["\(party.control)/api/events"]).status, 400)
        // The page's own origin does get its event stream: the refusals above are not an accident.
        let own = try runProcess("curl", ["-s", "-i", "--max-time", "2", "-H", "Origin: http://127.0.0.1:\(party.controlPort)"] + upgrade
                                 + ["\(party.control)/api/events"], timeout: 10)
        XCTAssertTrue(own.stdout.hasPrefix("HTTP/1.1 101"), own.stdout)
        let status = try curl(["\(party.control)/api/status"])
        XCTAssertEqual(status.status, 200)
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(status.body.utf8)) as? [String: Any])
        XCTAssertEqual(json["paused"] as? Bool, false, "no refused request paused the party")
        XCTAssertGreaterThanOrEqual(Self.refusalCount("control: foreign Host", in: status.body), 4)
        XCTAssertGreaterThanOrEqual(Self.refusalCount("control: foreign Origin", in: status.body), 2)
    }

    /// Row 10: a title with terminal escapes. Before: it reached the broadcaster's console as
    /// escapes. Now what the file says is cleaned before any terminal, log or page sees it.
    func testTerminalEscapesInATitleReachNoConsole() throws {
        let directory = try temporaryDirectory()
        // An ID3v2.3 tag in front: a TIT2 frame in ISO-8859-1 that clears the screen and retitles the terminal.
        let title: [UInt8] = [0x1B] + Array("[2J\u{07}Evil".utf8) + [0x1B] + Array("]0;pwned".utf8) + [0x07]
        let frame = Array("TIT2".utf8) + withUnsafeBytes(of: UInt32(title.count + 1).bigEndian) { Array($0) } + [0, 0, 0] + title
        let size = frame.count  // under 128: its syncsafe form is the byte itself
        var mp3 = Data(Array("ID3".utf8) + [3, 0, 0, 0, 0, 0, UInt8(size)] + frame)
        mp3.append(try Data(contentsOf: URL(fileURLWithPath: try fixture("cbr.mp3"))))
        let path = "\(directory)/escapes.mp3"
        try mp3.write(to: URL(fileURLWithPath: path))
        let port = freePort()
        let controlPort = freePort()
        let shared = try startProcess(broadcaster, ["share", path, "--no-mdns", "--port", "\(port)", "--control-port", "\(controlPort)",
                                                    "--log-level", "debug"])
        XCTAssertTrue(shared.waitForStderr("remote control: http://", timeout: 30), shared.stderr)
        let status = try curl(["http://127.0.0.1:\(controlPort)/api/status"]).body
        let ctl = try runProcess(broadcaster, ["ctl", "--url", "http://127.0.0.1:\(controlPort)", "status"], timeout: 30)
        shared.signal(SIGINT)
        let served = shared.wait(timeout: 30)
        XCTAssertTrue(status.contains("[2J Evil ]0;pwned"), "the title, cleaned: \(status)")
        for (what, text) in [("the broadcaster's console", served.stderr + served.stdout), ("ctl", ctl.stdout + ctl.stderr), ("the API", status)] {
            XCTAssertFalse(text.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 }, "\(what) carries a control character: \(text)")
        }
    }
}
