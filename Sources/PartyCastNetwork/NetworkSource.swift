import Logging
import NIOPosix
import PartyCastClock
import PartyCastCore
import PartyCastWire
import Synchronization

/// Where to connect: resolved again before every (re)connection, so a broadcaster that moved or
/// restarted is found anew (by mDNS, or the fixed address given with --host).
public typealias EndpointResolver = @Sendable () throws(PartyCastError) -> (host: String, port: Int)

/// A broadcast as a PCM source: wire frames (the parser) → Opus/PCM packets (the decoder) →
/// samples for the player's ring. It rides out dropped connections, broadcaster restarts and
/// broadcasters that break the protocol by reconnecting with backoff; the player just sees a short
/// underrun. Used from the player's producer thread only; `Control` is what other threads hold.
public final class NetworkSource: ScheduledPCMSource {
    public struct Options: Sendable {
        public var listenerName: String
        public var hostName: String
        /// End (produce returns false) when the broadcast ends, instead of waiting for the next one.
        public var once = false
        /// The listener's clock, which clock sync relates to the broadcaster's.
        public var clock = LocalClock.system
        /// Whether the listener plays on the broadcaster's schedule (told to the broadcaster).
        public var sync = true
        /// A private party's key: join only a broadcaster that proves it holds it.
        public var key: PartyKey?
        public init(listenerName: String, hostName: String) {
            self.listenerName = listenerName
            self.hostName = hostName
        }
    }

    /// The thread-safe side of a network source: stop it, or report to the broadcaster, from any thread.
    public final class Control: Sendable {
        let inbox = Inbox<PCEnvelope>()
        let clockSync: ClockSync
        fileprivate let connection = LockedValueBox<BroadcastClient?>(nil)
        private let stopped = Atomic<Bool>(false)
        /// The last report, which a change of the clock's settling sends again at once.
        private let lastStatus = LockedValueBox(PCStatus())

        /// Whether this listener tells the broadcaster if its clock has settled, which the party's
        /// start waits for: not where the output does not play in time (a file, null), which needs
        /// no settled clock and already holds the audio a held start takes back.
        private let saysClockSettling: Bool

        public init(clock: LocalClock, clockLog: ClockExchangeLog? = nil, playsInTime: Bool = true) {
            clockSync = ClockSync(clock: clock, log: clockLog)
            saysClockSettling = playsInTime
            guard playsInTime else { return }
            clockSync.observeSettling { [weak self] _ in
                guard let self else { return }
                send(lastStatus.withLockedValue { $0 })
            }
        }

        /// Stops connecting, reconnecting and waiting, and closes the connection; the source's next
        /// call returns promptly.
        public func cancel() {
            stopped.store(true, ordering: .releasing)
            connection.withLockedValue { $0?.leave() }
            inbox.wakeup.signal()
        }

        var isCancelled: Bool { stopped.load(ordering: .acquiring) }

        /// The clock's own 99 % bound on its error (µs, rounded up), nil before its first estimate.
        public var clockBoundMicroseconds: Int? { clockSync.errorBound.map { Int(($0 + 999) / 1000) } }

        /// Whether the song is under way and playback waits for the clock to settle (`ClockSync.isSettling`).
        public var clockSettling: Bool { clockSync.isSettling }

        /// Tells the broadcaster how this listener is doing (shown in its listener view).
        public func report(bufferMilliseconds: Int, syncErrorMicroseconds: Int?, latencyOffsetMilliseconds: Int, channel: ChannelAssignment) {
            var status = PCStatus()
            status.bufferMilliseconds = UInt32(clamping: bufferMilliseconds)
            status.latencyOffsetMilliseconds = Int32(clamping: latencyOffsetMilliseconds)
            status.channel = channel.wire
            if let error = syncErrorMicroseconds { status.syncErrorMicroseconds = Int32(clamping: error) }
            if syncErrorMicroseconds != nil, let bound = clockBoundMicroseconds { status.clockBoundMicroseconds = UInt32(clamping: bound) }
            lastStatus.withLockedValue { $0 = status }
            send(status)
        }

        /// Sends `status` with the clock's settling as it is now.
        private func send(_ status: PCStatus) {
            var status = status
            if saysClockSettling, let settled = clockSync.isSettled { status.clockSettled = settled }
            var envelope = PCEnvelope()
            envelope.body = .status(status)
            connection.withLockedValue { $0?.sendIfJoined(envelope) }
        }
    }

    /// A connection must bring its stream format within this long, or it is dropped and tried again.
    static let formatDeadline: UInt64 = 10_000_000_000

    private let resolve: EndpointResolver
    private let options: Options
    private let control: Control
    private let logger: Logger
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    /// Stable across reconnects, so the broadcaster can tell a rejoin from a new listener.
    private let listenerID = String(UInt64.random(in: 1...UInt64.max), radix: 16)
    private var receiver: StreamReceiver
    private var broadcastEnded = false
    /// Whether the current connection has delivered audio; one that ended without any is retried
    /// only after a delay (`Reconnection`).
    private var heardAudio = false
    private var reconnection = Reconnection()
    /// Why this listener is dropping the current connection, for the line that says so.
    private var droppingBecause: String?

    public var format: AudioFormat? { receiver.spec?.format }
    public var tags: TrackTags { receiver.tags }
    public var duration: Duration { receiver.duration }
    public var isSeekable: Bool { false }
    public var concealedPackets: Int { receiver.droppedChunks + receiver.concealedChunks }
    public var broadcasterName: String { receiver.broadcasterName }
    public var schedule: PlaybackSchedule { control.clockSync.schedule }
    public private(set) var lastProducedFrame: Int?
    public var isPartyPaused: Bool { receiver.partyPaused }
    public var latencyOffsetMilliseconds: Int? { receiver.latencyOffsetMilliseconds }
    public var channel: ChannelAssignment? { receiver.channel }
    /// Withdraw, Gain and ListenerSettings messages refused for absurd numbers.
    public var droppedTimelineMessages: Int { receiver.droppedMessages }

    public func takeTimelineEvents() -> [TimelineEvent] { receiver.takeEvents() }
    public func tags(atFrame frame: Int?) -> TrackTags { receiver.tags(atFrame: frame) }

    public init(options: Options, control: Control, logger: Logger, resolve: @escaping EndpointResolver) {
        self.options = options
        self.control = control
        self.logger = logger
        self.resolve = resolve
        receiver = StreamReceiver(clockSync: control.clockSync)
    }

    deinit {
        control.connection.withLockedValue { $0?.close(); $0 = nil }
        // Closing the channels first makes this quick whatever the peer does (a zero TCP window).
        try? group.syncShutdownGracefully()
    }

    /// Connects, says Hello, and waits for the Welcome and the stream format, reconnecting as for a
    /// lost broadcaster when a connection breaks the protocol or brings no format in time.
    public func prepare() throws(PartyCastError) {
        try connect()
        var deadline = monotonicNanoseconds() + Self.formatDeadline
        var ignored: [Float] = []
        while format == nil {
            if control.isCancelled { throw PartyCastError(.io, "stopped while joining") }
            let now = monotonicNanoseconds()
            if now >= deadline {
                drop(because: "it sent no stream format within \(Self.formatDeadline / 1_000_000_000) s")
                deadline = now + Self.formatDeadline
            }
            guard let item = control.inbox.take(timeoutNanoseconds: deadline - min(deadline, now)) else { continue }
            if case .closed = item, broadcastEnded, options.once {
                throw PartyCastError(.io, "the broadcast ended before any audio arrived")
            }
            _ = try apply(item, into: &ignored)
            if case .closed = item { deadline = monotonicNanoseconds() + Self.formatDeadline }
        }
        logger.debug("joined \"\(broadcasterName)\": \(receiver.spec.map { "\($0.format)" } ?? "?")")
    }

    /// Waits for the broadcaster's next message (no timeout: a paused party sends nothing, and
    /// nothing here needs to wake before it does); `wakeProducer` or `cancel()` end the wait early.
    public func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool {
        lastProducedFrame = nil
        guard let item = control.inbox.take() else { return !control.isCancelled }
        return try apply(item, into: &buffer)
    }

    public var wakeProducer: (@Sendable () -> Void)? { { [control] in control.inbox.wakeup.signal() } }

    /// Applies one inbox item; false when the stream is over for good.
    private func apply(_ item: Inbox<PCEnvelope>.Item, into buffer: inout [Float]) throws(PartyCastError) -> Bool {
        switch item {
        case .failed(let error):
            throw error
        case .closed(let reason):
            control.connection.withLockedValue { $0 = nil }
            let why = droppingBecause ?? reason
            droppingBecause = nil
            if (broadcastEnded && options.once) || control.isCancelled { return false }
            logger.warning(broadcastEnded ? "the broadcast ended; waiting for the next one"
                                          : "lost the broadcaster (\(why)); reconnecting")
            let heard = heardAudio
            heardAudio = false
            try reconnection.reconnect(wasHealthy: heard, wakeup: control.inbox.wakeup, cancelled: { control.isCancelled }, logger: logger) {
                () throws(PartyCastError) in try connect()
            }
            return true
        case .message(let envelope, let arrivedAt):
            guard droppingBecause == nil else { return true }  // the rest of a connection being dropped
            defer { lastProducedFrame = receiver.lastProducedFrame }
            switch receiver.receive(envelope, arrivedAt: arrivedAt, into: &buffer) {
            case .continues:
                if case .audioChunk? = envelope.body { heardAudio = true }
            case .ended:
                broadcastEnded = true
                // The broadcaster waits for this side to hang up before it closes (see Fanout.hangUp).
                control.connection.withLockedValue { $0?.close() }
            case .violation(let why):
                drop(because: why)
            }
            return true
        }
    }

    /// Ends the current connection because of what the broadcaster did; its `.closed` follows.
    private func drop(because why: String) {
        droppingBecause = why
        control.inbox.discardMessages()
        control.connection.withLockedValue { $0?.close() }
    }

    private func connect() throws(PartyCastError) {
        let (host, port) = try resolve()
        control.clockSync.connected()
        broadcastEnded = false
        let gate = ConnectionGate(listenerName: options.listenerName, hostName: options.hostName, listenerID: listenerID,
                                  wantsSync: options.sync, key: options.key)
        let client = try BroadcastClient.connect(host: host, port: port, group: group, gate: gate, inbox: control.inbox,
                                                 clockSync: control.clockSync, logger: logger) { control.isCancelled }
        control.connection.withLockedValue { $0 = client }
        // A cancel that came while connecting missed this connection: close it here.
        if control.isCancelled { client.close() }
        logger.info("connected to \(HostAndPort(host: host, port: port))")
    }

    public func seek(toFrame frame: Int) throws(PartyCastError) {
        throw PartyCastError(.invalidArgument, "a live broadcast cannot seek")
    }
}
