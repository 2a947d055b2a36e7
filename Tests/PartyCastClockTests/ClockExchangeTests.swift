#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
@testable import PartyCastClock
@testable import PartyCastClockExchange
import PartyCastCore
import PartyCastSources
import PartyCastWire
import PartyCastTestSupport
import XCTest

/// The UDP clock channel against a real responder on loopback: what it answers, what it ignores
/// (counted), what a listener believes, and the fallback to TCP.
final class ClockExchangeTests: XCTestCase {
    private var responder: ClockResponder!

    override func setUpWithError() throws {
        responder = try ClockResponder(host: "127.0.0.1", port: 0)
    }

    override func tearDown() {
        responder.shutdown()
    }

    private func client() throws -> ClockSocket { try ClockSocket(connectingTo: "127.0.0.1", port: responder.port) }

    private func request(token: UInt64, sequence: UInt64, key: ClockDatagramKey? = nil, answer: Bool = false,
                         padding: Data = Data(count: Exchange.requestPaddingBytes)) throws -> [UInt8] {
        var datagram = PCClockDatagram()
        datagram.token = token
        datagram.sequence = sequence
        datagram.padding = padding
        datagram.t1 = Int64(bitPattern: monotonicNanoseconds())
        datagram.answer = answer
        key?.seal(&datagram, answer ? .broadcasterToListener : .listenerToBroadcaster)
        return try datagram.serializedBytes()
    }

    /// Answers arriving on `socket` until `enough` holds (5 s at most), with their kernel arrival times.
    private func answers(on socket: ClockSocket, until enough: ([PCClockDatagram]) -> Bool) throws -> [(PCClockDatagram, UInt64)] {
        var received: [(PCClockDatagram, UInt64)] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        let deadline = monotonicNanoseconds() + 5_000_000_000
        while !enough(received.map(\.0)), monotonicNanoseconds() < deadline {
            var fds = [pollfd(fd: socket.fd, events: Int16(POLLIN), revents: 0)]
            _ = poll(&fds, 1, 100)
            while let datagram = socket.receive(into: &buffer) {
                received.append((try PCClockDatagram(serializedBytes: Array(buffer[..<datagram.count])), datagram.arrivedAt))
            }
        }
        return received
    }

    func testAnswersALiveSessionsRequestWithKernelTimesAndIgnoresTheRest() throws {
        let token = responder.admit(key: nil)
        let socket = try client()
        socket.send([0x08, 0xFF, 0xFF])                                       // not a datagram of ours
        socket.send([UInt8](repeating: 0x2A, count: 300))                     // longer than any of ours
        socket.send(try request(token: token &+ 1, sequence: 1))              // no such session
        socket.send(try request(token: token, sequence: 2, answer: true))     // an answer, bounced back
        socket.send(try request(token: token, sequence: 6, padding: Data()))  // shorter than its answer would be
        let padded = try request(token: token, sequence: 3)
        socket.send(padded)
        let got = try answers(on: socket) { $0.contains { $0.sequence == 3 } }

        XCTAssertEqual(got.map(\.0.sequence), [3], "only the live session's request is answered")
        let (answer, arrivedAt) = try XCTUnwrap(got.first)
        XCTAssertEqual((try answer.serializedBytes() as [UInt8]).count, padded.count, "an answer is exactly as long as its request")
        XCTAssertTrue(answer.answer)
        XCTAssertEqual(answer.token, token)
        // One machine, one CLOCK_MONOTONIC: t1 ≤ t2 (kernel receive) ≤ t3 (just before sending) ≤ t4 (kernel receive).
        XCTAssertLessThanOrEqual(answer.t1, answer.t2)
        XCTAssertLessThanOrEqual(answer.t2, answer.t3)
        XCTAssertLessThanOrEqual(answer.t3, Int64(bitPattern: arrivedAt))
        XCTAssertEqual(responder.ignoredDatagrams, 5)
        XCTAssertEqual(responder.answeredDatagrams, 1)

        // A connection that ended: its token is dead. The other session's answer shows the first was read.
        responder.dismiss(token)
        let other = responder.admit(key: nil)
        socket.send(try request(token: token, sequence: 4))
        socket.send(try request(token: other, sequence: 5))
        XCTAssertEqual(try answers(on: socket) { $0.contains { $0.sequence == 5 } }.map(\.0.sequence), [5])
        XCTAssertEqual(responder.ignoredDatagrams, 6)
    }

    /// The clock key of one run of the key handshake with `secret` on both sides.
    private func clockKey(_ secret: String) throws -> ClockDatagramKey {
        let listener = KeyHandshake.Initiator(key: PartyKey(secret: secret))
        let broadcaster = try XCTUnwrap(KeyHandshake.Responder(key: PartyKey(secret: secret), sessionID: listener.sessionID,
                                                               listenerShare: listener.share))
        return broadcaster.session.clockKey
    }

    func testAPrivatePartysDatagramsAreSealedBothWaysAndTakenOnce() throws {
        let key = try clockKey("correct horse")
        let wrongKey = try clockKey("battery staple")
        let otherHandshake = try clockKey("correct horse")
        let token = responder.admit(key: key)
        let socket = try client()
        socket.send(try request(token: token, sequence: 1))                      // in the clear
        socket.send(try request(token: token, sequence: 2, key: wrongKey))       // another party's key
        socket.send(try request(token: token, sequence: 3, key: otherHandshake)) // another connection's key
        socket.send(try request(token: token, sequence: 7, key: key, answer: true)) // an answer, reflected
        socket.send(try request(token: token, sequence: 4, key: key))
        socket.send(try request(token: token, sequence: 4, key: key))            // a replay
        socket.send(try request(token: token, sequence: 6, key: key))
        socket.send(try request(token: token, sequence: 5, key: key))            // late, but new
        let got = try answers(on: socket) { $0.contains { $0.sequence == 5 } }
        XCTAssertEqual(got.map(\.0.sequence), [4, 6, 5])
        XCTAssertEqual(responder.ignoredDatagrams, 5)

        var answer = try XCTUnwrap(got.first).0
        XCTAssertEqual([answer.t1, answer.t2, answer.t3], [0, 0, 0], "no time travels in the clear")
        let opened = try XCTUnwrap(key.open(answer, .broadcasterToListener), "the answer is sealed with the connection's key")
        XCTAssertTrue(opened.answer)
        XCTAssertLessThanOrEqual(opened.t2, opened.t3)
        XCTAssertNil(wrongKey.open(answer, .broadcasterToListener), "another key opens nothing")
        XCTAssertNil(key.open(answer, .listenerToBroadcaster), "an answer does not open as a request")
        var sealed = [UInt8](answer.sealed)
        sealed[3] ^= 1
        answer.sealed = Data(sealed)
        XCTAssertNil(key.open(answer, .broadcasterToListener), "a changed byte no longer opens")
    }

    /// A flood from one token (stolen, or a broken listener) gets its allowance and no more; the
    /// allowance refills with time. Arrival times are given, so the count is exact.
    func testAFloodFromOneTokenIsCutToItsAllowance() throws {
        let token: UInt64 = 42
        var sessions = [token: ClockResponder.Session(key: nil, rate: TokenBucket(burst: ClockResponder.burst, perSecond: ClockResponder.requestsPerSecond, now: 1_000_000_000))]
        func answered(_ count: Int, at arrivedAt: UInt64) throws -> Int {
            try (0..<count).filter { _ in
                ClockResponder.admitted(ArraySlice(try request(token: token, sequence: 1)), at: arrivedAt, sessions: &sessions) != nil
            }.count
        }
        XCTAssertEqual(try answered(300, at: 1_000_000_000), Int(ClockResponder.burst))
        XCTAssertEqual(try answered(300, at: 1_100_000_000), Int(ClockResponder.requestsPerSecond / 10), "100 ms refill")
        XCTAssertEqual(try answered(300, at: 9_000_000_000), Int(ClockResponder.burst), "refilled to the burst, no further")
        XCTAssertEqual(try answered(1, at: 500_000_000), 0, "an earlier arrival time refills nothing")
    }

    /// What the listener believes: only the authentic answer to a request in flight, once.
    func testAListenerBelievesEachAnswerOnceAndOnlyIfItMatchesARequestInFlight() throws {
        let key = try clockKey("k")
        let datagrams = ClockRequester.Datagrams(host: "127.0.0.1", port: 9, token: 77, key: key)
        var exchange = Exchange(datagrams: datagrams, sync: ClockSync(clock: .system))
        let sent = exchange.nextRequest(datagrams)
        XCTAssertEqual(sent.t1, 0, "t1 travels sealed")
        let request = try XCTUnwrap(key.open(sent, .listenerToBroadcaster), "the request is sealed with the connection's key")

        func answer(_ change: (inout PCClockDatagram) -> Void = { _ in }, sealedWith sealer: ClockDatagramKey? = key,
                    as direction: RecordDirection = .broadcasterToListener) throws -> ArraySlice<UInt8> {
            var datagram = request
            datagram.answer = true
            datagram.t2 = request.t1 + 1000
            datagram.t3 = request.t1 + 2000
            change(&datagram)
            sealer?.seal(&datagram, direction)
            return ArraySlice(try datagram.serializedBytes() as [UInt8])
        }
        let t4 = request.t1 + 3000
        XCTAssertNil(exchange.accept(try answer(sealedWith: nil), arrivedAt: t4), "in the clear at a private party")
        XCTAssertNil(exchange.accept(try answer { $0.token = 78 }, arrivedAt: t4), "another connection's token")
        XCTAssertNil(exchange.accept(try answer { $0.sequence += 1 }, arrivedAt: t4), "no such request in flight")
        XCTAssertNil(exchange.accept(try answer { $0.t1 -= 1 }, arrivedAt: t4), "t1 not the one sent")
        XCTAssertNil(exchange.accept(try answer(as: .listenerToBroadcaster), arrivedAt: t4), "sealed as a request, not an answer")
        XCTAssertNil(exchange.accept([1, 2, 3], arrivedAt: t4), "not a datagram of ours")
        let sample = try XCTUnwrap(exchange.accept(try answer(), arrivedAt: t4))
        XCTAssertEqual(sample, ClockSample(t1: request.t1, t2: request.t1 + 1000, t3: request.t1 + 2000, t4: t4))
        XCTAssertNil(exchange.accept(try answer(), arrivedAt: t4 + 10), "the same answer again (a replay or a duplicate)")
    }

    /// Listener and responder over loopback: the listener's simulated clock (−5 s, −150 ppm) is
    /// mapped onto the responder's CLOCK_MONOTONIC, without a single exchange over TCP.
    func testAListenerLearnsTheBroadcastersClockOverUDP() throws {
        let clock = LocalClock(offsetSeconds: -5, driftPPM: -150)
        let sync = ClockSync(clock: clock)
        sync.connected()
        let tcpRequests = LockedValueBox(0)
        let requester = try ClockRequester(datagrams: .init(host: "127.0.0.1", port: responder.port, token: responder.admit(key: nil), key: nil),
                                           sync: sync, logger: Logger(label: "test")) { _ in tcpRequests.withLockedValue { $0 += 1 } }
        defer { requester.stop() }
        waitUntil(timeout: 10) { responder.answeredDatagrams >= 40 }
        XCTAssertGreaterThanOrEqual(responder.answeredDatagrams, 40)
        let mapping = try XCTUnwrap(sync.mapping)
        let local = clock.now(), truth = Int64(bitPattern: monotonicNanoseconds())
        XCTAssertLessThan(abs(mapping.remote(fromLocal: local) - truth), 200_000, "within 200 µs of the truth on loopback")
        XCTAssertEqual(tcpRequests.withLockedValue { $0 }, 0, "UDP was answered: no exchange went over TCP")
    }

    /// A request sent after a quiet spell (the pace of a quiet link, from its second second on)
    /// finds the path cold; its answer brings a follow-up at once, which finds the path awake.
    func testARequestAfterAQuietSpellIsFollowedAtOnceByAnother() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("clock-follow-up-\(getpid()).txt").path
        defer { unlink(path) }
        let sync = ClockSync(clock: .system, log: try ClockExchangeLog(path: path, clock: .system))
        sync.connected()
        let requester = try ClockRequester(datagrams: .init(host: "127.0.0.1", port: responder.port, token: responder.admit(key: nil), key: nil),
                                           sync: sync, logger: Logger(label: "test")) { _ in }
        defer { requester.stop() }
        func exchanges() throws -> [ClockSample] {
            try XCTUnwrap(ClockExchangeLog.read(try String(contentsOfFile: path, encoding: .utf8)[...])).samples.sorted { $0.t1 < $1.t1 }
        }
        /// The exchanges whose request went `coldAfter` or more after the one before, and one came after them.
        func cold(_ exchanges: [ClockSample]) -> [Int] {
            exchanges.indices.dropFirst().dropLast().filter { exchanges[$0].t1 - exchanges[$0 - 1].t1 >= ClockExchangeSchedule.coldAfter }
        }
        XCTAssertTrue(try waitUntil(timeout: 20) { try cold(exchanges()).count >= 4 }, "a quiet link's pace is sparser than coldAfter")
        let taken = try exchanges()
        for index in cold(taken) {
            let wait = taken[index + 1].t1 - taken[index].t4
            // Unfollowed, the next would wait the pace, coldAfter or more; the follow-up waits only
            // for the answer (40 ms: room for a loaded machine's scheduling).
            XCTAssertTrue((0..<40_000_000).contains(wait), "exchange \(index + 1) went \(wait / 1000) µs after the answer to a cold one")
        }
    }

    /// `--clock-log`: the log holds the listener's clock and every exchange the estimator took, in
    /// order, so replaying it gives exactly the listener's own estimate.
    func testTheClockLogReplaysToTheListenersOwnEstimate() throws {
        let clock = LocalClock(offsetSeconds: 9, driftPPM: 120)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("clock-log-\(getpid()).txt").path
        defer { unlink(path) }
        let sync = ClockSync(clock: clock, log: try ClockExchangeLog(path: path, clock: clock))
        sync.connected()
        var broadcaster = SimulatedBroadcaster(offset: 1_000_000_000, driftPPM: -40, origin: clock.now(), outboundQueueing: 200_000,
                                               inboundQueueing: 500_000, random: SplitMix64(seed: 7))
        // 3 s of exchanges every 5 ms, answers taken one, two or three at a time.
        let exchanges = (0..<600).map { broadcaster.exchange(sentAt: broadcaster.origin + Int64($0) * 5_000_000) }
        var next = 0
        while next < exchanges.count {
            let batch = exchanges[next..<min(next + 1 + next % 3, exchanges.count)]
            sync.record(batch)
            next = batch.endIndex
        }
        // An answer forged with a t1 from before the connection: ignored, so not logged either.
        sync.record(ClockSample(t1: 0, t2: 1, t3: 2, t4: 3))
        XCTAssertEqual(sync.ignoredAnswers, 1)

        let log = try XCTUnwrap(ClockExchangeLog.read(try String(contentsOfFile: path, encoding: .utf8)[...]))
        XCTAssertEqual(log.clock, clock)
        XCTAssertEqual(log.skippedLines, 0)
        XCTAssertEqual(log.samples, exchanges)
        var replayed = ClockEstimator()
        for sample in log.samples { replayed.add(sample) }
        XCTAssertNotNil(replayed.mapping)
        XCTAssertEqual(replayed.mapping, sync.mapping)
    }

    /// A log is read as hostile input: a bad header is refused, bad lines are skipped and counted.
    func testAClockLogThatIsNotOneIsRefusedAndBadLinesAreSkipped() throws {
        let header = "# partycast clock log 1: offset-ns -5000000000 drift-ppm -150.0 anchor-ns 42\n"
        let text = header + "1 2 3 4\n1 2 3\nfive 6 7 8\n1 2 3 99999999999999999999\n1 2 3 9223372036854775807\n1 2 3 4 5\n10 20 30 40\n"
        let log = try XCTUnwrap(ClockExchangeLog.read(text[...]))
        XCTAssertEqual(log.clock.offsetNanoseconds, -5_000_000_000)
        XCTAssertEqual(log.clock.driftPPM, -150)
        XCTAssertEqual(log.clock.anchor, 42)
        XCTAssertEqual(log.samples, [ClockSample(t1: 1, t2: 2, t3: 3, t4: 4), ClockSample(t1: 10, t2: 20, t3: 30, t4: 40)])
        XCTAssertEqual(log.skippedLines, 5)
        XCTAssertNil(ClockExchangeLog.read("1 2 3 4\n"[...]), "no header")
        XCTAssertNil(ClockExchangeLog.read(header.replacingOccurrences(of: "-150.0", with: "-1000000")[...]),
                     "a drift no clock has (1 + drift would be 0)")
        XCTAssertNil(ClockExchangeLog.read(header.replacingOccurrences(of: "anchor-ns 42", with: "anchor-ns -1")[...]))
        XCTAssertNil(ClockExchangeLog.read(header.replacingOccurrences(of: "-5000000000", with: "-9223372036854775808")[...]),
                     "an offset of centuries")
    }

    /// A datagram's arrival time is the kernel's stamp (SO_TIMESTAMPNS through the C shim's control
    /// messages), not the time a late reader got to it: one left waiting 50 ms reads as arrived then.
    /// When no socket on the host had stamps on, the kernel turns them on through deferred work
    /// (net_enable_timestamp) and stamps at read time until it has run: run alone, 11 of 30 runs
    /// here got their first datagram stamped when read. So the socket may take a few datagrams.
    func testArrivalIsTheKernelsStampNotTheReadTime() throws {
        let receiver = try ClockSocket(bindingTo: "127.0.0.1", port: 0)
        let sender = try ClockSocket(connectingTo: "127.0.0.1", port: receiver.localPort)
        var buffer = [UInt8](repeating: 0, count: 64)
        var readLateness: [Int64] = []
        for _ in 0..<5 {
            let sent = monotonicNanoseconds()
            sender.send([1, 2, 3])
            letTimePass(0.05)  // the reader's lateness is what this test is about
            let read = monotonicNanoseconds()
            let received = try XCTUnwrap(receiver.receive(into: &buffer))
            XCTAssertEqual(received.count, 3)
            XCTAssertGreaterThanOrEqual(received.arrivedAt + 1_000_000, sent, "stamped after it was sent (1 ms for the two clocks' reads)")
            let lateness = Int64(read) - Int64(received.arrivedAt)
            if lateness > 40_000_000 { return }
            readLateness.append(lateness)
        }
        XCTFail("every datagram stamped when read, not on arrival (read this long after: \(readLateness) ns)")
    }

    /// Both ways, a clock datagram leaves marked DSCP EF, as the kernel reports the TOS byte it
    /// arrived with (IP_RECVTOS): the mark that puts it in Wi-Fi's voice queue.
    func testClockDatagramsAreMarkedExpeditedBothWays() throws {
        let (probe, port) = try XCTUnwrap(boundLoopbackSocket(type: SOCK_DGRAM))
        defer { close(probe) }
        var on: Int32 = 1
        XCTAssertEqual(setsockopt(probe, Int32(IPPROTO_IP), IP_RECVTOS, &on, socklen_t(MemoryLayout<Int32>.size)), 0)

        let request = try ClockSocket(connectingTo: "127.0.0.1", port: port)
        request.send([1, 2, 3])
        XCTAssertEqual(Self.receivedTrafficClass(probe), 0xB8, "a listener's request")

        let responder = try ClockSocket(bindingTo: "127.0.0.1", port: 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(responder.localPort).bigEndian
        address.sin_addr.s_addr = UInt32(INADDR_LOOPBACK).bigEndian
        let sent = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(probe, [UInt8(9)], 1, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        XCTAssertEqual(sent, 1)
        var buffer = [UInt8](repeating: 0, count: 64)
        var ready = pollfd(fd: responder.fd, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&ready, 1, 5000), 1, "the responder heard the probe")
        let asked = try XCTUnwrap(responder.receive(into: &buffer))
        responder.send([4, 5, 6], to: asked.from)
        XCTAssertEqual(Self.receivedTrafficClass(probe), 0xB8, "the broadcaster's answer")
    }

    /// The TOS byte of the next datagram on `fd` (IP_RECVTOS on), from its control message; nil
    /// when none comes within 5 s or it carries no TOS.
    private static func receivedTrafficClass(_ fd: Int32) -> UInt8? {
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&ready, 1, 5000) == 1 else { return nil }
        var payload = [UInt8](repeating: 0, count: 64), control = [UInt8](repeating: 0, count: 64)
        return payload.withUnsafeMutableBytes { payloadBytes in
            control.withUnsafeMutableBytes { controlBytes -> UInt8? in
                var vector = iovec(iov_base: payloadBytes.baseAddress, iov_len: payloadBytes.count)
                return withUnsafeMutablePointer(to: &vector) { vectorPointer -> UInt8? in
                    var message = msghdr(msg_name: nil, msg_namelen: 0, msg_iov: vectorPointer, msg_iovlen: 1,
                                         msg_control: controlBytes.baseAddress, msg_controllen: controlBytes.count, msg_flags: 0)
                    guard recvmsg(fd, &message, 0) >= 0 else { return nil }
                    // Each control message: cmsghdr (length, level, type), then its data, 8-byte aligned.
                    var offset = 0
                    let header = MemoryLayout<cmsghdr>.size
                    while offset + header <= message.msg_controllen {
                        let entry = controlBytes.load(fromByteOffset: offset, as: cmsghdr.self)
                        if entry.cmsg_level == IPPROTO_IP, entry.cmsg_type == IP_TOS { return controlBytes[offset + header] }
                        guard entry.cmsg_len >= header else { return nil }
                        offset += (Int(entry.cmsg_len) + 7) & ~7
                    }
                    return nil
                }
            }
        }
    }

    /// UDP that nobody answers (a firewall): the requester turns to the TCP connection.
    func testUnansweredUDPFallsBackToTCP() throws {
        let silent = try ClockSocket(bindingTo: "127.0.0.1", port: 0)
        let sync = ClockSync(clock: .system)
        sync.connected()
        let tcpRequests = LockedValueBox<[PCClockRequest]>([])
        let requester = try ClockRequester(datagrams: .init(host: "127.0.0.1", port: silent.localPort, token: 1, key: nil), sync: sync,
                                           logger: Logger(label: "test")) { envelope in
            if case .clockRequest(let request)? = envelope.body { tcpRequests.withLockedValue { $0.append(request) } }
        }
        defer { requester.stop() }
        waitUntil(timeout: 10) { !tcpRequests.withLockedValue { $0.isEmpty } }
        let first = try XCTUnwrap(tcpRequests.withLockedValue { $0.first }, "a request went over TCP")
        var buffer = [UInt8](repeating: 0, count: 512)
        var udpRequests = 0
        while silent.receive(into: &buffer) != nil { udpRequests += 1 }
        XCTAssertGreaterThan(udpRequests, 10, "UDP was tried first, and kept being tried")
        XCTAssertGreaterThanOrEqual(first.t1, sync.clock.now() - 10_000_000_000)
    }
}
