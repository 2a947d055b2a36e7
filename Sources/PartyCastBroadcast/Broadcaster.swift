import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PartyCastCodec
import PartyCastCore
import PartyCastDecoder
import PartyCastWire
import Synchronization

public struct BroadcastOptions: Sendable {
    public var name: String
    public var codec: Codec = .opus
    public var bitrateKbps = 128
    /// Playback starts this long after launch: listeners that join meanwhile start at sample 0.
    public var startInSeconds = 1.0
    /// How far ahead of its presentation time each chunk is sent (`--buffer`).
    public var leadMilliseconds = 1000
    public var loop = false

    public init(name: String) { self.name = name }
}

/// What the broadcaster is doing, for its status display.
public struct BroadcastProgress: Sendable {
    public var streamIndex = 0
    public var title = ""
    public var positionSeconds = 0.0
    public var durationSeconds: Double?
}

/// Source → encoder → fan-out. Decodes the sources in order, converts them to one format, encodes
/// once, and sends each chunk `leadMilliseconds` before its presentation time on this machine's
/// monotonic clock. The timeline is continuous across sources, so songs follow without a gap.
public final class Broadcaster: Sendable {
    public typealias SourceFactory = @Sendable () throws(PartyCastError) -> PCMSource

    private let sources: [(label: String, open: SourceFactory)]
    private let options: BroadcastOptions
    private let fanout: Fanout
    private let stopRequested = Atomic<Bool>(false)
    private let progressState = NIOLockedValueBox(BroadcastProgress())
    public let sessionID: UInt64

    private let logger: Logger

    public init(sources: [(label: String, open: SourceFactory)], options: BroadcastOptions, fanout: Fanout, logger: Logger) {
        self.sources = sources
        self.options = options
        self.fanout = fanout
        self.logger = logger
        sessionID = UInt64.random(in: 1...UInt64.max)
    }

    public var progress: BroadcastProgress { progressState.withLockedValue { $0 } }

    public func stop() { stopRequested.store(true, ordering: .releasing) }

    /// The Welcome each listener gets.
    public func welcome() -> PCEnvelope {
        var welcome = PCWelcome()
        welcome.protocolVersion = partyCastProtocolVersion
        welcome.broadcasterName = options.name
        welcome.sessionID = sessionID
        var envelope = PCEnvelope()
        envelope.body = .welcome(welcome)
        return envelope
    }

    /// Streams every source (repeating with `loop`) until the end or `stop()`; returns true at the
    /// end. A source that can't be opened or decoded is skipped with a line; the rest plays.
    public func run() throws(PartyCastError) -> Bool {
        start = monotonicNanoseconds() + UInt64(options.startInSeconds * 1e9)
        var pending: [Float] = []
        repeat {
            var lastFailure: PartyCastError?
            var played = 0
            for (label, open) in sources {
                if stopRequested.load(ordering: .acquiring) { return false }
                do throws(PartyCastError) {
                    guard try stream(label, open: open, pending: &pending) else { return false }
                    played += 1
                } catch {
                    logger.warning("skipping \(label): \(error.message)")
                    lastFailure = error
                }
            }
            // Every source failed: the broadcast has nothing to play, and the reason is the last one.
            if played == 0, let lastFailure { throw lastFailure }
        } while options.loop
        if let encoder {
            // The rest, plus the codec's delay in silence so its last real samples come out too;
            // chunks count only the real frames.
            let realFrames = pending.count / encoder.format.channels
            pending.append(contentsOf: repeatElement(0, count: encoder.preSkip * encoder.format.channels))
            guard try sendPackets(&pending, realFrames: realFrames + encoder.preSkip, final: true) else { return false }
        }
        // Let the last chunk play out before saying goodbye.
        fanout.flushChunks()
        return waitUntil(presentationTime(ofFrame: timelineFrames))
    }

    /// Plays one source to its end; false when stopped meanwhile.
    private func stream(_ label: String, open: SourceFactory, pending: inout [Float]) throws(PartyCastError) -> Bool {
        let decoded = try open()
        try decoded.prepare()
        guard let sourceFormat = decoded.format else { throw PartyCastError(.notAudio, "no audio") }
        // One format for the whole broadcast: the encoder's, set by the first source.
        if encoder == nil {
            encoder = try makeEncoder(for: sourceFormat)
        }
        let target = encoder!.format
        let source: PCMSource = sourceFormat == target
            ? decoded : try FormatConverter(source: decoded, sampleRate: target.sampleRate, channels: target.channels)
        try source.prepare()
        streamStartFrames = timelineFrames
        fanout.setPreamble([frame(streamFormat(encoder!, streamIndex: streamIndex, total: source.duration.frames)),
                            frame(metadata(source.tags, label: label, streamIndex: streamIndex, duration: source.duration.frames))])
        progressState.withLockedValue {
            $0 = BroadcastProgress(streamIndex: Int(streamIndex), title: source.tags.title ?? label,
                                   positionSeconds: 0, durationSeconds: source.duration.frames.map { Double($0) / Double(target.sampleRate) })
        }
        defer {
            var end = PCEndOfStream()
            end.streamIndex = streamIndex
            var envelope = PCEnvelope()
            envelope.body = .endOfStream(end)
            fanout.broadcast(frame(envelope))
            streamIndex &+= 1
        }
        var more = true
        while more {
            if stopRequested.load(ordering: .acquiring) { return false }
            more = try source.produce(into: &pending)
            // Whole packets only; what is left over goes out with the next source's first packet.
            guard try sendPackets(&pending, realFrames: nil) else { return false }
        }
        return true
    }

    /// When timeline frame `frame` is due, on this machine's monotonic clock. Exact for any
    /// broadcast length: frames × 10⁹ alone would overflow after about four days at 48 kHz.
    private func presentationTime(ofFrame frame: UInt64) -> UInt64 {
        let rate = encoder?.format.sampleRate ?? 48000
        return start &+ UInt64(StreamTime.nanoseconds(frames: Int64(clamping: frame), sampleRate: rate) ?? Int64.max)
    }

    // The pacer's state, touched only by the thread in run().
    private nonisolated(unsafe) var encoder: AudioEncoder?
    private nonisolated(unsafe) var start: UInt64 = 0
    private nonisolated(unsafe) var timelineFrames: UInt64 = 0  // frames sent since the broadcast began
    private nonisolated(unsafe) var streamStartFrames: UInt64 = 0
    private nonisolated(unsafe) var sequence: UInt64 = 0
    private nonisolated(unsafe) var streamIndex: UInt32 = 0

    /// Chunks due this soon after the one being sent go out with it.
    static let batchWindowNanoseconds: UInt64 = 100_000_000

    /// Encodes whole packets from `pending` and sends each `leadMilliseconds` before it is due.
    /// With `final`, pads the last packet with silence; `realFrames` caps the frames chunks claim.
    /// False when stopped meanwhile.
    private func sendPackets(_ pending: inout [Float], realFrames: Int?, final: Bool = false) throws(PartyCastError) -> Bool {
        guard let encoder else { return true }
        let channels = encoder.format.channels
        let block = encoder.framesPerPacket * channels
        var remainingReal = realFrames ?? Int.max
        while pending.count >= block || (final && !pending.isEmpty) {
            if pending.count < block { pending.append(contentsOf: repeatElement(0, count: block - pending.count)) }
            let packet = try pending.withUnsafeBufferPointer { samples throws(PartyCastError) in
                try encoder.encode(UnsafeBufferPointer(rebasing: samples[0..<block]))
            }
            pending.removeFirst(block)
            let frames = min(encoder.framesPerPacket, remainingReal)
            remainingReal -= frames
            let pts = presentationTime(ofFrame: timelineFrames)
            var chunk = PCAudioChunk()
            chunk.sequence = sequence
            chunk.mediaPosition = timelineFrames
            chunk.presentationNanoseconds = Int64(pts)
            chunk.frameCount = UInt32(frames)
            chunk.streamIndex = streamIndex
            chunk.payload = Data(packet)
            var envelope = PCEnvelope()
            envelope.body = .audioChunk(chunk)
            // Due `leadMilliseconds` before it plays; what falls due within the next batch window
            // goes out with it, so each listener gets one write per window rather than per chunk.
            let due = pts - min(pts, UInt64(options.leadMilliseconds) * 1_000_000)
            if due > monotonicNanoseconds() + Self.batchWindowNanoseconds {
                fanout.flushChunks()
                guard waitUntil(due) else { return false }
            }
            fanout.queueChunk(frame(envelope), presentationNanoseconds: pts, now: monotonicNanoseconds())
            sequence += 1
            timelineFrames += UInt64(frames)
            let position = Double(timelineFrames - streamStartFrames) / Double(encoder.format.sampleRate)
            progressState.withLockedValue { $0.positionSeconds = position }
        }
        return true
    }

    /// Sleeps until `deadline`; false when stopped meanwhile.
    private func waitUntil(_ deadline: UInt64) -> Bool {
        sleepUntil(monotonicNanoseconds: deadline) { stopRequested.load(ordering: .acquiring) }
    }

    private func makeEncoder(for format: AudioFormat) throws(PartyCastError) -> AudioEncoder {
        switch options.codec {
        case .opus: return try OpusEncoder(channels: min(format.channels, 2), bitrateKbps: options.bitrateKbps)
        case .pcm: return PCMEncoder(format: format)
        }
    }

    private func streamFormat(_ encoder: AudioEncoder, streamIndex: UInt32, total: Int?) -> PCEnvelope {
        var format = PCStreamFormat()
        format.codec = options.codec == .opus ? .opus : .pcmF32Le
        format.sampleRate = UInt32(encoder.format.sampleRate)
        format.channels = UInt32(encoder.format.channels)
        format.framesPerChunk = UInt32(encoder.framesPerPacket)
        format.preSkip = UInt32(encoder.preSkip)
        format.streamIndex = streamIndex
        format.totalFrames = UInt64(total ?? 0)
        var envelope = PCEnvelope()
        envelope.body = .streamFormat(format)
        return envelope
    }

    private func metadata(_ tags: TrackTags, label: String, streamIndex: UInt32, duration: Int?) -> PCEnvelope {
        var metadata = PCMetadata()
        metadata.title = tags.title ?? label
        metadata.artist = tags.artist ?? ""
        metadata.album = tags.album ?? ""
        metadata.durationFrames = UInt64(duration ?? 0)
        metadata.streamIndex = streamIndex
        var envelope = PCEnvelope()
        envelope.body = .metadata(metadata)
        return envelope
    }

    private func frame(_ envelope: PCEnvelope) -> ByteBuffer {
        ByteBuffer(bytes: (try? WireFraming.encode(envelope)) ?? [])
    }

    /// Tells every listener the broadcast is over and closes the connections once flushed.
    /// Waits at most `goodbyeDeadline` for any listener, however slow.
    public func sayGoodbye(_ reason: String) {
        var goodbye = PCGoodbye()
        goodbye.reason = reason
        var envelope = PCEnvelope()
        envelope.body = .goodbye(goodbye)
        let closing = fanout.finish(with: frame(envelope), deadline: Self.goodbyeDeadline)
        for future in closing { _ = try? future.wait() }
    }

    /// Long enough to flush a goodbye to any listener still reading; short enough that Ctrl-C ends
    /// the broadcaster within 2 s.
    public static let goodbyeDeadline = TimeAmount.milliseconds(1000)
}
