import Foundation
import NIOPosix
import PartyCastCodec
import PartyCastCore
import PartyCastWire
import Synchronization

/// Where to connect: resolved again before every (re)connection, so a broadcaster that moved or
/// restarted is found anew (by mDNS, or the fixed address given with --host).
public typealias EndpointResolver = @Sendable () throws(PartyCastError) -> (host: String, port: Int)

/// A broadcast as a PCM source: wire frames (the parser) → Opus/PCM packets (the decoder) →
/// samples for the player's ring. It rides out dropped connections and broadcaster restarts by
/// reconnecting with backoff; the player just sees a short underrun.
public final class NetworkSource: ScheduledPCMSource, @unchecked Sendable {
    // @unchecked: used from the player's producer thread only; the inbox is the thread boundary.
    public struct Options: Sendable {
        public var listenerName: String
        public var hostName: String
        /// End (produce returns false) when the broadcast ends, instead of waiting for the next one.
        public var once = false
        /// The listener's clock, which clock sync relates to the broadcaster's.
        public var clock = LocalClock.system
        public init(listenerName: String, hostName: String) {
            self.listenerName = listenerName
            self.hostName = hostName
        }
    }

    private let resolve: EndpointResolver
    private let options: Options
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let inbox = Inbox()
    private let clockSync: ClockSync
    private let connection = Mutex<BroadcastClient?>(nil)
    private let cancelled = Atomic<Bool>(false)
    private var decoder: AudioDecoder?
    private var framesToSkip = 0
    private var sessionID: UInt64?
    /// The last chunk decoded in this session: a reconnect to the same broadcast is sent the
    /// unplayed chunks again, and those already played must not play twice.
    private var lastSequence: UInt64?
    private var broadcastEnded = false
    /// Whether the current connection has delivered audio; one that ended without any is retried
    /// only after `retryDelay`, so a broadcaster that accepts and closes is not hammered.
    private var heardAudio = false
    private var retryDelay = NetworkSource.firstRetryDelay
    private static let firstRetryDelay: UInt64 = 250_000_000
    private var scratch: [Float] = []
    private let log: @Sendable (String) -> Void

    public private(set) var format: AudioFormat?
    public private(set) var tags = TrackTags()
    public private(set) var duration: Duration = .unknown
    public var isSeekable: Bool { false }
    public var skippedBytes: Int64 { 0 }
    public private(set) var broadcasterName = ""
    public var schedule: PlaybackSchedule { clockSync.schedule }
    public private(set) var lastProducedFrame: Int?
    private var preSkip = 0

    public init(options: Options, log: @escaping @Sendable (String) -> Void, resolve: @escaping EndpointResolver) {
        self.options = options
        self.resolve = resolve
        self.log = log
        clockSync = ClockSync(clock: options.clock)
    }

    deinit {
        connection.withLock { $0?.close() }
        try? group.syncShutdownGracefully()
    }

    /// Connects, says Hello, and waits for the Welcome and the stream format.
    public func prepare() throws(PartyCastError) {
        try connect()
        let deadline = monotonicNanoseconds() + 10_000_000_000
        while format == nil {
            guard monotonicNanoseconds() < deadline else {
                throw PartyCastError(.io, "the broadcaster accepted the connection but sent no stream format within 10 s")
            }
            guard let item = inbox.take(timeoutNanoseconds: 100_000_000) else { continue }
            var ignored: [Float] = []
            if case .closed(let reason) = item {
                throw PartyCastError(.io, "the broadcaster closed the connection before streaming: \(reason)")
            }
            _ = try handle(item, into: &ignored)
        }
    }

    private func connect() throws(PartyCastError) {
        let (host, port) = try resolve()
        clockSync.connected()
        let client = try BroadcastClient.connect(host: host, port: port, group: group, inbox: inbox, clockSync: clockSync)
        connection.withLock { $0 = client }
        var hello = PCHello()
        hello.protocolVersion = partyCastProtocolVersion
        hello.listenerName = options.listenerName
        hello.hostName = options.hostName
        var envelope = PCEnvelope()
        envelope.body = .hello(hello)
        client.send(envelope)
        log("connected to \(host):\(port)")
    }

    public func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool {
        lastProducedFrame = nil
        guard let item = inbox.take(timeoutNanoseconds: 50_000_000) else { return true }
        return try handle(item, into: &buffer)
    }

    /// Applies one message; false when the stream is over for good.
    private func handle(_ item: Inbox.Item, into buffer: inout [Float]) throws(PartyCastError) -> Bool {
        switch item {
        case .closed(let reason):
            connection.withLock { $0 = nil }
            if broadcastEnded && options.once { return false }
            log(broadcastEnded ? "the broadcast ended; waiting for the next one" : "lost the broadcaster (\(reason)); reconnecting")
            if heardAudio { retryDelay = Self.firstRetryDelay } else { backOff() }
            try reconnect()
            return true
        case .message(let envelope):
            switch envelope.body {
            case .welcome(let welcome)?:
                if let mismatch = protocolMismatch(peerVersion: welcome.protocolVersion, peerRole: "broadcaster") {
                    throw PartyCastError(.io, mismatch.error.message)
                }
                broadcasterName = welcome.broadcasterName
                if sessionID != welcome.sessionID {  // a new broadcast: fresh decoder state
                    decoder = nil
                    lastSequence = nil
                }
                sessionID = welcome.sessionID
                broadcastEnded = false
            case .streamFormat(let streamFormat)?:
                try adopt(streamFormat)
            case .metadata(let metadata)?:
                tags = TrackTags(title: metadata.title.isEmpty ? nil : metadata.title,
                                 artist: metadata.artist.isEmpty ? nil : metadata.artist,
                                 album: metadata.album.isEmpty ? nil : metadata.album)
                duration = metadata.durationFrames > 0 ? .exact(frames: Int(metadata.durationFrames)) : .unknown
            case .audioChunk(let chunk)?:
                try decode(chunk, into: &buffer)
            case .goodbye?:
                broadcastEnded = true
            case .error(let error)?:
                throw PartyCastError(.io, "the broadcaster refused: \(error.message)")
            default:
                break
            }
            return true
        }
    }

    private func adopt(_ streamFormat: PCStreamFormat) throws(PartyCastError) {
        let announced = AudioFormat(sampleRate: Int(streamFormat.sampleRate), channels: Int(streamFormat.channels))
        guard (8000...384_000).contains(announced.sampleRate), (1...8).contains(announced.channels) else {
            throw PartyCastError(.io, "the broadcaster announced an unusable format (\(announced))")
        }
        if let format, format != announced {
            throw PartyCastError(.io, "the broadcast changed format from \(format) to \(announced) mid-play; join again")
        }
        format = announced
        guard decoder == nil else { return }
        switch streamFormat.codec {
        case .opus:
            decoder = try OpusDecoder(channels: announced.channels)
        case .pcmF32Le:
            decoder = PCMDecoder(channels: announced.channels)
        default:
            throw PartyCastError(.io, "the broadcaster uses a codec this listener does not know; upgrade the listener")
        }
        preSkip = Int(streamFormat.preSkip)
        framesToSkip = preSkip
    }

    private func decode(_ chunk: PCAudioChunk, into buffer: inout [Float]) throws(PartyCastError) {
        guard let decoder, let format else { return }
        heardAudio = true
        if let lastSequence, chunk.sequence <= lastSequence { return }
        lastSequence = chunk.sequence
        scratch.removeAll(keepingCapacity: true)
        let frames = try decoder.decode([UInt8](chunk.payload), into: &scratch)
        // The codec's own delay comes out first; after that each chunk stands for frameCount frames.
        var keep = min(frames, Int(chunk.frameCount))
        var from = 0
        if framesToSkip > 0 {
            from = min(framesToSkip, keep)
            framesToSkip -= from
            keep -= from
        }
        // A fresh decoder's output runs `preSkip` frames behind the chunks' positions; those frames
        // were skipped above, so what is kept starts at this stream frame.
        if keep > 0 { lastProducedFrame = Int(chunk.mediaPosition) - preSkip + from }
        clockSync.setTiming(ClockSync.StreamTiming(
            originNanoseconds: chunk.presentationNanoseconds - Int64(chunk.mediaPosition) * 1_000_000_000 / Int64(format.sampleRate),
            sampleRate: format.sampleRate))
        buffer.append(contentsOf: scratch[(from * format.channels)..<((from + keep) * format.channels)])
    }

    private func reconnect() throws(PartyCastError) {
        heardAudio = false
        while !cancelled.load(ordering: .acquiring) {
            do {
                try connect()
                return
            } catch {
                log("\(error.message); retrying in \(Double(retryDelay) / 1e9) s")
                backOff()
            }
        }
        throw PartyCastError(.io, "stopped while reconnecting")
    }

    /// Waits `retryDelay` (cut short by `cancel()`) and doubles it, up to 4 s.
    private func backOff() {
        _ = sleepUntil(monotonicNanoseconds: monotonicNanoseconds() + retryDelay) { cancelled.load(ordering: .acquiring) }
        retryDelay = min(retryDelay * 2, 4_000_000_000)
    }

    /// Stops reconnect attempts and closes the connection (a user stop while the broadcaster is away).
    public func cancel() {
        cancelled.store(true, ordering: .releasing)
        connection.withLock { $0?.close() }
    }

    public func seek(toFrame frame: Int) throws(PartyCastError) {
        throw PartyCastError(.invalidArgument, "a live broadcast cannot seek")
    }

    /// Tells the broadcaster how this listener is doing (shown in its listener view).
    public func report(bufferMilliseconds: Int, syncErrorMicroseconds: Int?) {
        var status = PCStatus()
        status.bufferMilliseconds = UInt32(max(0, bufferMilliseconds))
        if let error = syncErrorMicroseconds { status.syncErrorMicroseconds = Int32(clamping: error) }
        var envelope = PCEnvelope()
        envelope.body = .status(status)
        connection.withLock { $0?.send(envelope) }
    }
}
