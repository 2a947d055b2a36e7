#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import PartyCastClock
import PartyCastCore
import PartyCastWire
import Synchronization

/// The listener's side of the clock exchanges of one connection, on a thread of its own: sends a
/// request whenever `ClockSync` says the next is due and sleeps in poll(2) until an answer or the
/// next request. Over UDP when the broadcaster offers it (answers never queue behind audio there);
/// over the TCP connection when it does not, or while UDP has gone unanswered for a second (a
/// firewall, a NAT) — UDP requests go on meanwhile, so sync moves back as soon as one is answered.
public final class ClockRequester: Sendable {
    /// Where the broadcaster answers over UDP, from its Welcome.
    public struct Datagrams: Sendable {
        public var host: String
        public var port: Int
        public var token: UInt64
        public var key: ClockDatagramKey?

        public init(host: String, port: Int, token: UInt64, key: ClockDatagramKey?) {
            self.host = host
            self.port = port
            self.token = token
            self.key = key
        }
    }

    /// Silence on UDP this long, over at least `fallbackRequests` requests in a row, brings the TCP
    /// exchange in: both, so neither a sparse schedule nor a burst of requests trips it.
    static let fallbackAfter: Int64 = 1_000_000_000
    static let fallbackRequests = 5
    /// Over TCP answers queue behind the audio: exchanging densely there buys nothing and costs the
    /// connection (and the estimator) work.
    static let densestOverTCP: Int64 = 20_000_000

    private let mailbox: Mailbox
    private let thread: DedicatedThread

    /// - Parameter overTCP: sends a request over the connection; its answers come back through
    ///   `deliver`.
    public init(datagrams: Datagrams?, sync: ClockSync, logger: Logger,
                overTCP: @escaping @Sendable (PCEnvelope) -> Void) throws(SystemCallError) {
        let mailbox = try Mailbox()
        // A socket that cannot be made (no route, an address family the host lacks) leaves TCP.
        let socket: ClockSocket?
        if let datagrams {
            do throws(SystemCallError) {
                socket = try ClockSocket(connectingTo: datagrams.host, port: datagrams.port)
            } catch {
                logger.notice("clock exchanges go over the stream's connection: no UDP socket to \(datagrams.host) (\(error))")
                socket = nil
            }
        } else {
            socket = nil
        }
        self.mailbox = mailbox
        thread = DedicatedThread {
            // The thread holds the mailbox too: its pipe must stay open while poll(2) watches it.
            var exchange = Exchange(datagrams: datagrams, sync: sync)
            exchange.run(socket: socket, mailbox: mailbox, logger: logger, overTCP: overTCP)
        }
    }

    /// Answers that came over the TCP connection, for this thread to take: the estimator's maths
    /// stays off the event loop that carries the audio.
    public func deliver(_ answers: [ClockSample]) { mailbox.post(answers) }

    /// Ends the exchanges; the thread finishes on its own (nobody waits for it on an event loop).
    public func stop() { mailbox.stop() }

    deinit { mailbox.stop() }
}

/// What other threads hand the requester thread: answers that came over TCP, and the stop. Bounded:
/// answers beyond `capacity` waiting are dropped (and counted by the thread as ignored).
final class Mailbox: Sendable {
    struct Contents {
        var stopped = false
        var answers: [ClockSample] = []
        var dropped = 0
    }

    static let capacity = 256
    let pipe: WakePipe
    private let contents = LockedValueBox(Contents())

    init() throws(SystemCallError) { pipe = try WakePipe() }

    func post(_ answers: [ClockSample]) {
        guard !answers.isEmpty else { return }
        contents.withLockedValue { contents in
            let room = max(0, Self.capacity - contents.answers.count)
            contents.answers.append(contentsOf: answers.prefix(room))
            contents.dropped += answers.count - min(room, answers.count)
        }
        pipe.wake()
    }

    func stop() {
        contents.withLockedValue { $0.stopped = true }
        pipe.wake()
    }

    /// Takes what was posted (call when the pipe polls readable).
    func collect() -> Contents {
        pipe.drain()
        return contents.withLockedValue { contents in
            defer { (contents.answers, contents.dropped) = ([], 0) }
            return contents
        }
    }
}

/// The requester thread's state: requests in flight and when UDP was last heard.
struct Exchange {
    /// Requests in flight that an answer may match, by sequence modulo the capacity: an answer
    /// older than this many requests is as good as lost.
    static let inFlightCapacity = 64
    /// Round trips remembered for pacing.
    static let recentRoundTrips = 32
    /// What an answer adds to its request at a public party — t2 and t3 (9 bytes each) and `answer`
    /// (2) — less the padding field's own tag and length. A private party's sealed requests and
    /// answers are the same length already.
    static let requestPaddingBytes = 18

    private let datagrams: ClockRequester.Datagrams?
    private let sync: ClockSync
    private var inFlight = [(sequence: UInt64, t1: Int64)](repeating: (0, 0), count: inFlightCapacity)
    private var nextSequence: UInt64 = 1
    private var lastHeard: Int64
    private var unansweredInARow = 0
    private var roundTrips = [Int64](repeating: 0, count: recentRoundTrips)
    private var answers = 0
    private var order = AnswerOrder()
    private var followUps = ClockFollowUps()

    init(datagrams: ClockRequester.Datagrams?, sync: ClockSync) {
        self.datagrams = datagrams
        self.sync = sync
        lastHeard = sync.clock.now()
    }

    mutating func run(socket: ClockSocket?, mailbox: Mailbox, logger: Logger, overTCP: (PCEnvelope) -> Void) {
        var buffer = [UInt8](repeating: 0, count: ClockSocket.maximumDatagram + 1)
        // Answers read in one wakeup go to the estimator together: a stall releases hundreds at once.
        var batch: [ClockSample] = []
        var due = sync.clock.now()
        var usingTCP = false
        if socket == nil { logger.debug("clock: exchanging over the TCP connection (no UDP clock port offered or usable)") }
        while true {
            let now = sync.clock.now()
            if now >= due {
                if let socket, let datagrams { send(on: socket, datagrams) }
                let fallBack = socket == nil
                    || (now - lastHeard > ClockRequester.fallbackAfter && unansweredInARow >= ClockRequester.fallbackRequests)
                if socket != nil, fallBack != usingTCP {
                    if fallBack {
                        logger.warning("clock: no answer over UDP for \(ClockRequester.fallbackAfter / 1_000_000_000) s (a firewall?); keeping time over the TCP connection, less precisely on a busy link")
                    } else {
                        logger.info("clock: UDP answers again")
                    }
                }
                usingTCP = fallBack
                if fallBack { overTCP(Self.tcpRequest(t1: sync.clock.now())) }
                // Over TCP answers never overtake each other.
                due = now + max(sync.nextExchangeDelay(answersOvertake: !fallBack && order.answersOvertake,
                                                       leastRoundTrip: leastRecentRoundTrip),
                                fallBack ? ClockRequester.densestOverTCP : 0)
            }
            let timeout = Int32(clamping: (max(0, due - sync.clock.now()) + 999_999) / 1_000_000)
            let ready: [Bool]
            do throws(SystemCallError) {
                ready = try waitUntilReadable([mailbox.pipe.readEnd, socket?.fd ?? -1], timeoutMilliseconds: timeout)
            } catch {
                logger.error("clock exchanges stopped: \(error); this listener keeps its last estimate")
                return
            }
            if ready[0] {
                let posted = mailbox.collect()
                if posted.stopped { return }
                for _ in 0..<posted.dropped { sync.countIgnored() }
                sync.record(posted.answers)
            }
            guard let socket, ready[1] else { continue }
            batch.removeAll(keepingCapacity: true)
            while let received = socket.receive(into: &buffer) {
                guard received.count <= ClockSocket.maximumDatagram,
                      let sample = accept(buffer[..<received.count], arrivedAt: sync.clock.local(fromMachine: received.arrivedAt))
                else {
                    sync.countIgnored()
                    continue
                }
                lastHeard = sample.t4
                unansweredInARow = 0
                // A broadcaster's times are not trusted to pace by: only a round trip the estimator
                // would take counts.
                if (0...ClockEstimator.maximumRoundTrip).contains(sample.roundTrip) {
                    roundTrips[answers % Self.recentRoundTrips] = sample.roundTrip
                    answers += 1
                }
                batch.append(sample)
            }
            if !batch.isEmpty { sync.record(batch) }
            if followUps.isDue { due = min(due, sync.clock.now()) }
        }
    }

    /// The least round trip of the recent answers: what the path takes with no queue of ours on it
    /// (`ClockExchangeSchedule` paces by it).
    private var leastRecentRoundTrip: Int64 {
        answers == 0 ? 0 : roundTrips[0..<min(answers, Self.recentRoundTrips)].min()!
    }

    private mutating func send(on socket: ClockSocket, _ datagrams: ClockRequester.Datagrams) {
        let request = nextRequest(datagrams)
        guard let bytes: [UInt8] = try? request.serializedBytes() else { return }
        socket.send(bytes)
        unansweredInARow += 1
        // Sealing zeroes the times in the request itself; its in-flight slot keeps t1.
        followUps.sent(sequence: request.sequence, at: inFlight[Int(request.sequence % UInt64(Self.inFlightCapacity))].t1)
    }

    /// The next request, t1 read now (sealing and sending take a few µs, which only add delay), and
    /// noted as in flight.
    mutating func nextRequest(_ datagrams: ClockRequester.Datagrams) -> PCClockDatagram {
        var request = PCClockDatagram()
        request.token = datagrams.token
        request.sequence = nextSequence
        nextSequence &+= 1
        let t1 = sync.clock.now()
        request.t1 = t1
        if let key = datagrams.key { key.seal(&request, .listenerToBroadcaster) } else { request.padding = Data(count: Exchange.requestPaddingBytes) }
        inFlight[Int(request.sequence % UInt64(Self.inFlightCapacity))] = (request.sequence, t1)
        return request
    }

    /// The completed exchange, or nil for anything but the authentic answer to a request in flight;
    /// each request is answered once, so a replayed or duplicated answer finds its slot empty.
    mutating func accept(_ bytes: ArraySlice<UInt8>, arrivedAt: Int64) -> ClockSample? {
        guard let datagrams, var answer = try? PCClockDatagram(serializedBytes: [UInt8](bytes)), answer.token == datagrams.token else { return nil }
        if let key = datagrams.key {
            guard let opened = key.open(answer, .broadcasterToListener) else { return nil }
            answer = opened
        }
        guard answer.answer else { return nil }
        let slot = Int(answer.sequence % UInt64(Self.inFlightCapacity))
        guard answer.sequence != 0, inFlight[slot].sequence == answer.sequence, inFlight[slot].t1 == answer.t1 else { return nil }
        inFlight[slot] = (0, 0)
        order.record(sequence: answer.sequence)
        followUps.answered(sequence: answer.sequence)
        return ClockSample(t1: answer.t1, t2: answer.t2, t3: answer.t3, t4: arrivedAt)
    }

    private static func tcpRequest(t1: Int64) -> PCEnvelope {
        var request = PCClockRequest()
        request.t1 = t1
        var envelope = PCEnvelope()
        envelope.body = .clockRequest(request)
        return envelope
    }
}
