import Logging
import NIOPosix
import PartyCastClock
import PartyCastCore
import PartyCastNetwork
import PartyCastSendspin
import Synchronization

/// A Sendspin server's stream as a PCM source for the player: WebSocket frames → session → chunks
/// on the server's timeline → PCM. It reconnects with backoff when the connection drops, as the
/// native protocol's `NetworkSource` does; the player just sees a short underrun. Used from the
/// player's producer thread only; `Control` is what other threads hold.
public final class SendspinSource: ScheduledPCMSource {
    public struct Options: Sendable {
        public var url: SendspinURL
        public var playerName: String
        /// End (produce returns false) at the server's stream/end, instead of waiting for the next stream.
        public var once = false
        public var clock = LocalClock.system
        public init(url: SendspinURL, playerName: String) {
            self.url = url
            self.playerName = playerName
        }
    }

    /// The thread-safe side: stop it from any thread.
    public final class Control: Sendable {
        let inbox = Inbox<SendspinEvent>()
        let clockSync: ClockSync
        fileprivate let connection = LockedValueBox<SendspinClientConnection?>(nil)
        private let stopped = Atomic<Bool>(false)

        public init(clock: LocalClock, clockLog: ClockExchangeLog? = nil) { clockSync = ClockSync(clock: clock, log: clockLog) }

        /// Stops connecting and waiting, says goodbye and closes; the source's next call returns promptly.
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
    }

    /// A connection must bring a stream within this long, or it is dropped and tried again.
    static let streamDeadline: UInt64 = 30_000_000_000
    /// What the hello tells the server: ~10 s of 16-bit stereo PCM, within the inbox's budget.
    static let bufferCapacity = 2 << 20

    private let options: Options
    private let control: Control
    private let logger: Logger
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    /// This player's identity for the connection's Noise handshake; the same across reconnects.
    private let identity = X25519KeyPair()
    private var timeline: SendspinTimeline
    /// Whether this connection's audio made PCM: a chunk of a stream with no decoder does not count.
    private var producedAudio = false
    private var reconnection = Reconnection()
    /// Why this side closed the connection, for the line its end brings.
    private var dropped: String?

    public var format: AudioFormat? { timeline.hasStream ? SendspinTimeline.format : nil }
    public var tags: TrackTags { TrackTags() }
    public var duration: Duration { .unknown }
    public var isSeekable: Bool { false }
    public var concealedPackets: Int { timeline.droppedChunks + timeline.concealedChunks }
    public var schedule: PlaybackSchedule { control.clockSync.schedule }
    public var lastProducedFrame: Int? { timeline.lastProducedFrame }
    public var isPartyPaused: Bool { false }
    public var latencyOffsetMilliseconds: Int? { nil }
    public var channel: ChannelAssignment? { nil }
    public var serverName: String { timeline.serverName }

    public func takeTimelineEvents() -> [TimelineEvent] { timeline.takeEvents() }
    public func tags(atFrame frame: Int?) -> TrackTags { tags }

    public init(options: Options, control: Control, logger: Logger) {
        self.options = options
        self.control = control
        self.logger = logger
        timeline = SendspinTimeline(clockSync: control.clockSync)
    }

    deinit {
        control.connection.withLockedValue { $0?.close(); $0 = nil }
        try? group.syncShutdownGracefully()
    }

    /// Connects and waits for the first stream, reconnecting as for a lost server meanwhile.
    public func prepare() throws(PartyCastError) {
        try connect()
        var deadline = monotonicNanoseconds() + Self.streamDeadline
        var ignored: [Float] = []
        while !timeline.hasStream {
            if control.isCancelled { throw PartyCastError(.io, "stopped while joining") }
            let now = monotonicNanoseconds()
            if now >= deadline {
                logger.warning("the server started no stream within \(Self.streamDeadline / 1_000_000_000) s; reconnecting")
                control.connection.withLockedValue { $0?.close() }
                deadline = now + Self.streamDeadline
            }
            guard let item = control.inbox.take(timeoutNanoseconds: deadline - min(deadline, now)) else { continue }
            _ = try apply(item, into: &ignored)
        }
        logger.debug("joined the Sendspin server \"\(timeline.serverName)\" at \(options.url)")
    }

    /// Waits for the server's next message (a stopped stream sends nothing, and nothing here needs
    /// to wake before it does); `wakeProducer` or `cancel()` end the wait early.
    public func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool {
        guard let item = control.inbox.take() else {
            timeline.clearProduced()
            return !control.isCancelled
        }
        return try apply(item, into: &buffer)
    }

    public var wakeProducer: (@Sendable () -> Void)? { { [control] in control.inbox.wakeup.signal() } }

    private func apply(_ item: Inbox<SendspinEvent>.Item, into buffer: inout [Float]) throws(PartyCastError) -> Bool {
        switch item {
        case .failed(let error):
            throw error
        case .closed(let reason):
            timeline.clearProduced()
            control.connection.withLockedValue { $0 = nil }
            if (timeline.ended && options.once) || control.isCancelled { return false }
            logger.warning("lost the Sendspin server (\(dropped ?? reason)); reconnecting")
            dropped = nil
            let produced = producedAudio
            producedAudio = false
            try reconnection.reconnect(wasHealthy: produced, wakeup: control.inbox.wakeup, cancelled: { control.isCancelled }, logger: logger) {
                () throws(PartyCastError) in try connect()
            }
            return true
        case .message(let event, _):
            do throws(PartyCastError) {
                try timeline.apply(event, into: &buffer)
            } catch {
                // A stream this listener cannot decode (a bad FLAC header, say): a new connection may
                // bring a good one, so the connection goes and its end says why.
                dropped = dropped ?? error.message
                control.connection.withLockedValue { $0?.close() }
                return true
            }
            switch event {
            case .audio where timeline.lastProducedFrame != nil: producedAudio = true
            case .joined(let name): logger.info("joined the Sendspin server \"\(String(untrusted: name, limit: 60))\"")
            case .streamStart(let stream):
                let format = stream.format
                logger.debug("stream: \(format.codec.rawValue) \(format.sampleRate) Hz, \(format.bitDepth) bit, \(format.channels) channels")
            case .streamEnd where options.once:
                control.connection.withLockedValue { $0?.leave() }
            default: break
            }
            return true
        }
    }

    private func connect() throws(PartyCastError) {
        control.clockSync.connected()
        let profile = SendspinPlayerProfile(name: options.playerName, formats: SendspinTimeline.offered, bufferCapacity: Self.bufferCapacity,
                                            requiredLeadTimeMs: 100, minBufferMs: 100)
        let session = SendspinClientSession(profile: profile, handshake: SendspinClientHandshake(clientKey: identity))
        let connection = try SendspinClientConnection.connect(to: options.url, group: group, session: session, inbox: control.inbox,
                                                              clockSync: control.clockSync, logger: logger) { control.isCancelled }
        control.connection.withLockedValue { $0 = connection }
        if control.isCancelled { connection.close() }
        logger.info("connected to \(options.url)")
    }

    public func seek(toFrame frame: Int) throws(PartyCastError) {
        throw PartyCastError(.invalidArgument, "a live Sendspin stream cannot seek")
    }
}
