import Logging
import PartyCastControlSeam
import PartyCastCore
import PartyCastNetwork

/// mpd beside the party's pipe (`--mpd HOST:PORT`): one thread, asleep in mpd's `idle` until mpd
/// plays, pauses, seeks or changes song, reports mpd's state to the party; the party's transport
/// commands go to mpd over the same connection (noidle, the command, idle again), so the party
/// hears of every change in the order mpd made it. No polling: the thread sleeps in poll(2) on
/// mpd's socket and a wake pipe. mpd gone, it connects again on `Reconnection`'s schedule, and
/// refuses commands meanwhile.
public final class MPDLink: SourceCompanion {
    public typealias Completion = @Sendable (Result<SourceReport, PartyCommandError>) -> Void

    /// HOST:PORT, for the log.
    public let address: String
    private let host: String
    private let port: Int
    private let logger: Logger
    private let wake: WakePipe
    private let stopped = Wakeup()
    private let shared = LockedValueBox(Shared())
    private let deadline: AnswerDeadline
    private let thread = LockedValueBox<DedicatedThread?>(nil)

    private struct Shared {
        var requests: [(command: PartyCommand, completion: Completion)] = []
        var connected = false
        var stopping = false
    }

    /// The port mpd listens on unless told otherwise.
    public static let defaultPort = 6600

    /// `address`: HOST or HOST:PORT ([IPv6]:PORT); a HOST that starts with / is mpd's local socket.
    public init(address: String, logger: Logger) throws(PartyCastError) {
        if address.hasPrefix("/") {
            guard !address.utf8.contains(0) else { throw PartyCastError(.invalidArgument, "--mpd: a socket path has no NUL") }
            (host, port, self.address) = (address, Self.defaultPort, address)
        } else {
            let parsed: HostAndPort
            do { parsed = try HostAndPort(parsing: address[...], defaultPort: Self.defaultPort) } catch {
                throw PartyCastError(.invalidArgument, "--mpd needs HOST[:PORT], e.g. 127.0.0.1:6600: \(error.message)")
            }
            (host, port, self.address) = (parsed.host, parsed.port, parsed.description)
        }
        self.logger = logger
        deadline = AnswerDeadline(seconds: Double(MPDConnection.timeoutMilliseconds) / 1000, logger: logger)
        do { wake = try WakePipe() } catch { throw PartyCastError(.io, "cannot make a pipe (\(error))") }
    }

    /// Starts following mpd: `onReport` hears each of its changes, in order, on the link's thread,
    /// until `stop()`.
    public func start(reporting onReport: @escaping @Sendable (SourceReport) -> Void) {
        let started = DedicatedThread { [self] in run { report in if !self.stopping { onReport(report) } } }
        thread.withLockedValue { $0 = started }
    }

    /// Ends the link: returns once its thread has left (an exchange under way is cut short), so
    /// nothing is reported after.
    public func stop() {
        let dropped = shared.withLockedValue { s in
            s.stopping = true
            defer { s.requests = [] }
            return s.requests
        }
        for request in dropped { request.completion(.failure(PartyCommandError(.invalid, "the party is over"))) }
        wake.wake()
        stopped.signal()
        deadline.end()
        thread.withLockedValue { $0 }?.join()
    }

    public func forward(_ command: PartyCommand, completion: @escaping Completion) {
        let refusal: String? = shared.withLockedValue { s in
            if s.stopping { return "the party is over" }
            guard s.connected else { return "mpd at \(address) cannot be reached now: the party follows it again once it can" }
            s.requests.append((command, completion))
            return nil
        }
        if let refusal { completion(.failure(PartyCommandError(.failed, refusal))) } else { wake.wake() }
    }

    private var stopping: Bool { shared.withLockedValue { $0.stopping } }

    /// Connects, follows mpd until the connection fails, and connects again, until stopped.
    private func run(_ onReport: @escaping @Sendable (SourceReport) -> Void) {
        var reconnection = Reconnection()
        var firstAttempt = true
        // mpd's last state reported, and when (monotonic ns); nil until a connection reports one.
        var last: (report: SourceReport, at: UInt64)?
        // How long the last connection lasted, and when it was made (monotonic ns).
        var lasted: UInt64 = 0, connectedAt: UInt64 = 0
        while !stopping {
            // A connection that lasted is followed by an attempt at once; one that mpd (or a fake)
            // closes soon after each connect, by the schedule's growing delays, not a busy loop.
            let worked = lasted >= Reconnection.longestDelay
            var connection: MPDConnection?
            do throws(PartyCastError) {
                if firstAttempt {
                    firstAttempt = false
                    connection = try connect()
                } else {
                    try reconnection.reconnect(wasHealthy: worked, wakeup: stopped, cancelled: { stopping }, logger: logger) { () throws(PartyCastError) in
                        connection = try connect()
                    }
                }
                guard let connection else { continue }
                logger.info("following mpd at \(address)")
                last = nil
                connectedAt = monotonicNanoseconds()
                try follow(connection, onReport, last: &last)
            } catch {
                lasted = connection == nil ? 0 : monotonicNanoseconds() - connectedAt
                failQueued(error.message)
                if stopping { return }
                logger.warning(connection == nil ? "\(error.message)" : "mpd at \(address) went away: \(error.message)")
                // Its pipe falls silent: the party shows a pause where mpd was when it went.
                if let (report, at) = last, report.playing {
                    var silent = report
                    silent.playing = false
                    silent.elapsedSeconds += Double(monotonicNanoseconds() - at) / 1e9
                    onReport(silent)
                }
            }
        }
    }

    private func connect() throws(PartyCastError) -> MPDConnection {
        do throws(PartyCastError) {
            return try MPDConnection(host: host, port: port, deadline: deadline)
        } catch {
            throw PartyCastError(error.code, "mpd at \(address): \(error.message)")
        }
    }

    /// Reports mpd's state, then sleeps in idle until mpd changes or the party has a command for
    /// it, until stopped; throws when the connection fails.
    private func follow(_ connection: MPDConnection, _ onReport: @Sendable (SourceReport) -> Void,
                        last: inout (report: SourceReport, at: UInt64)?) throws(PartyCastError) {
        shared.withLockedValue { $0.connected = true }
        var cover: (uri: String?, art: CoverArt?) = (nil, nil)
        func reportState() throws(PartyCastError) {
            try report(connection, cover: &cover) { state in
                last = (state, monotonicNanoseconds())
                onReport(state)
            }
        }
        try reportState()
        while !stopping {
            try connection.sendIdle()
            let ready: [Bool]
            do { ready = try waitUntilReadable([connection.descriptor, wake.readEnd]) } catch { throw PartyCastError(.io, "\(error)") }
            if stopping { return }
            if ready[1] { wake.drain() }
            let events = try connection.receiveIdle(interrupt: !ready[0])
            let requests = shared.withLockedValue { s in defer { s.requests = [] }; return s.requests }
            for (index, request) in requests.enumerated() {
                do throws(PartyCastError) {
                    try carryOut(request, on: connection, cover: cover)
                } catch {
                    // The connection failed: those after it are answered too, not left waiting.
                    for unasked in requests[(index + 1)...] {
                        unasked.completion(.failure(PartyCommandError(.failed, "mpd at \(address): \(error.message)")))
                    }
                    throw error
                }
            }
            if events != 0 || !requests.isEmpty { try reportState() }
        }
    }

    /// Carries a command out and answers it with mpd's state after it; throws when the connection
    /// fails (the command is answered first).
    private func carryOut(_ request: (command: PartyCommand, completion: Completion), on connection: MPDConnection,
                          cover: (uri: String?, art: CoverArt?)) throws(PartyCastError) {
        do throws(MPDFailure) {
            try connection.perform(request.command)
        } catch {
            switch error {
            case .refused(let refusal): return request.completion(.failure(refusal))
            case .connection(let failure):
                request.completion(.failure(PartyCommandError(.failed, "mpd at \(address): \(failure.message)")))
                throw failure
            }
        }
        do throws(PartyCastError) {
            var (state, uri) = try connection.report()
            if uri == cover.uri { state.cover = cover.art }
            request.completion(.success(state))
        } catch {
            request.completion(.failure(PartyCommandError(.failed, "mpd at \(address): \(error.message)")))
            throw error
        }
    }

    /// Reports mpd's state; a new song's cover is read after, and reported again, so its title
    /// never waits for a picture.
    private func report(_ connection: MPDConnection, cover: inout (uri: String?, art: CoverArt?), to onReport: (SourceReport) -> Void) throws(PartyCastError) {
        var (state, uri) = try connection.report()
        if uri == cover.uri {
            state.cover = cover.art
            return onReport(state)
        }
        onReport(state)
        cover = (uri, nil)
        guard let uri else { return }
        do throws(MPDFailure) {
            cover.art = try connection.cover(of: uri)
        } catch {
            switch error {
            case .refused(let refusal): logger.notice("\(refusal.message)")
            case .connection(let failure): throw failure
            }
        }
        if let art = cover.art {
            state.cover = art
            onReport(state)
        }
    }

    /// The connection failed: commands waiting for it are refused, and new ones until it is back.
    private func failQueued(_ reason: String) {
        let dropped = shared.withLockedValue { s in
            s.connected = false
            defer { s.requests = [] }
            return s.requests
        }
        for request in dropped { request.completion(.failure(PartyCommandError(.failed, reason))) }
    }
}
