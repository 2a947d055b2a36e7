#if canImport(Glibc)
import Glibc
#endif
import PartyCastCore
import PartyCastWire

/// The broadcaster's side of clock sync: answers listeners' clock requests over UDP, on a thread of
/// its own that sleeps in poll(2) until one comes. t2 is the kernel's receive time, so neither a
/// busy broadcaster nor audio queued on the same link can delay it; t3 is read right before the
/// answer is sent. Only live connections' tokens are answered, at a bounded rate each, and at a
/// private party only datagrams signed with that connection's key, each sequence once.
public final class ClockResponder: Sendable {
    /// Requests a listener may send in a burst, and per second after it: its first second (every
    /// 5 ms), and twice its densest pace (every 2.5 ms), so jitter in its timer never costs an answer;
    /// a flood from a stolen token is cut.
    public static let burst = 200.0
    public static let requestsPerSecond = 800.0

    struct Session {
        var key: ClockDatagramKey?
        /// At a private party, the requests' sequences seen: a replayed request is not answered again.
        var sequences = ReplayWindow()
        var rate: TokenBucket
    }

    /// Live connections by token, and the datagrams dropped so far: one lock for both, taken once
    /// per datagram.
    struct Table {
        var sessions: [UInt64: Session] = [:]
        var answered = 0
        var ignored = 0
    }

    public let port: Int
    private let table: LockedValueBox<Table>
    private let stopPipe: WakePipe
    private let thread: DedicatedThread

    /// Binds `host:port` over UDP, or any free port should that one be taken (the Welcome tells
    /// listeners which).
    public init(host: String, port: Int) throws(SystemCallError) {
        let socket: ClockSocket
        do { socket = try ClockSocket(bindingTo: host, port: port) } catch { socket = try ClockSocket(bindingTo: host, port: 0) }
        let table = LockedValueBox(Table())
        let stopPipe = try WakePipe()
        self.port = socket.localPort
        self.table = table
        self.stopPipe = stopPipe
        thread = DedicatedThread {
            // The thread holds the pipe too: its end must stay open while poll(2) watches it.
            Self.serve(socket, table: table, wake: stopPipe.readEnd)
        }
    }

    /// Datagrams dropped: malformed, unknown token, bad signature, over the rate, or not requests.
    public var ignoredDatagrams: Int { table.withLockedValue { $0.ignored } }
    /// Requests answered over UDP.
    public var answeredDatagrams: Int { table.withLockedValue { $0.answered } }

    /// Lets a joined listener's datagrams in: returns the token its Welcome carries.
    public func admit(key: ClockDatagramKey?) -> UInt64 {
        let token = UInt64.random(in: 1...UInt64.max)
        let now = monotonicNanoseconds()
        table.withLockedValue { $0.sessions[token] = Session(key: key, rate: TokenBucket(burst: Self.burst, perSecond: Self.requestsPerSecond, now: now)) }
        return token
    }

    /// The connection ended: its token is answered no more.
    public func dismiss(_ token: UInt64) {
        _ = table.withLockedValue { $0.sessions.removeValue(forKey: token) }
    }

    public func shutdown() {
        stopPipe.wake()
        thread.join()
    }

    deinit { stopPipe.wake() }

    /// The answer to a request that came over TCP (the fallback), received at `receivedAt`.
    public static func answer(_ request: PCClockRequest, receivedAt: UInt64) -> PCEnvelope {
        var response = PCClockResponse()
        response.t1 = request.t1
        response.t2 = Int64(bitPattern: receivedAt)
        response.t3 = Int64(bitPattern: monotonicNanoseconds())
        var envelope = PCEnvelope()
        envelope.body = .clockResponse(response)
        return envelope
    }

    private static func serve(_ socket: ClockSocket, table: LockedValueBox<Table>, wake: Int32) {
        // One byte more than any datagram of ours, so a longer one shows as truncated.
        var buffer = [UInt8](repeating: 0, count: ClockSocket.maximumDatagram + 1)
        while true {
            // poll(2) fails only on bad arguments or no memory: then no answers, as with a stop.
            guard let ready = try? waitUntilReadable([socket.fd, wake]), !ready[1] else { return }
            while let received = socket.receive(into: &buffer) {
                let admitted = table.withLockedValue { table in
                    received.count <= ClockSocket.maximumDatagram
                        ? Self.admitted(buffer[..<received.count], at: received.arrivedAt, sessions: &table.sessions) : nil
                }
                var bytes: [UInt8]?
                if var answer = admitted {
                    answer.datagram.t3 = Int64(bitPattern: monotonicNanoseconds())
                    answer.key?.seal(&answer.datagram, .broadcasterToListener)
                    bytes = try? answer.datagram.serializedBytes()
                }
                // Never longer than the request (requests are padded to match): no one can use the
                // responder to amplify a flood.
                guard let bytes, bytes.count <= received.count else {
                    table.withLockedValue { $0.ignored += 1 }
                    continue
                }
                // Counted first: whoever reads the count after the answer arrived sees it.
                table.withLockedValue { $0.answered += 1 }
                socket.send(bytes, to: received.from)
            }
        }
    }

    /// The answer to a datagram (t3 still to be filled in and sealed), or nil when it is not a live
    /// session's well-formed, authentic request within its rate.
    static func admitted(_ bytes: ArraySlice<UInt8>, at arrivedAt: UInt64, sessions: inout [UInt64: Session])
        -> (datagram: PCClockDatagram, key: ClockDatagramKey?)? {
        guard var request = try? PCClockDatagram(serializedBytes: [UInt8](bytes)), var session = sessions[request.token] else { return nil }
        if let key = session.key {
            guard let opened = key.open(request, .listenerToBroadcaster), session.sequences.accept(opened.sequence) else { return nil }
            request = opened
        }
        guard !request.answer else { return nil }
        let withinRate = session.rate.take(now: arrivedAt)
        sessions[request.token] = session
        guard withinRate else { return nil }
        var answer = PCClockDatagram()
        answer.token = request.token
        answer.sequence = request.sequence
        answer.t1 = request.t1
        answer.t2 = Int64(bitPattern: arrivedAt)
        answer.answer = true
        return (answer, session.key)
    }
}
