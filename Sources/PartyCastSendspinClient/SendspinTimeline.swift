import PartyCastClock
import PartyCastCodec
import PartyCastCore
import PartyCastDecoder
import PartyCastSendspin

/// The one place where Sendspin's messages become the player's audio, timeline and commands: a
/// chunk's server timestamp (µs) becomes a stream frame and the stream's timing for clock sync, its
/// payload PCM through the codec's decoder, stream/clear a withdraw, volume and mute a gain. Free of
/// I/O; runs on the player's producer thread. Timestamps are hostile: one that does not follow from
/// the stream's is placed where it says only when it is plausibly near (else dropped and counted).
struct SendspinTimeline {
    /// Every format this client offers plays at this rate and channel count, so the player's ring
    /// and output (set up once) fit whatever the server picks from them.
    static let format = AudioFormat(sampleRate: 48000, channels: 2)
    /// What the hello offers, in order of preference: lossless first, FLAC (a third of PCM's bytes on a
    /// busy Wi-Fi) before PCM.
    static let offered: [SendspinAudioFormat] = [
        SendspinAudioFormat(codec: .flac, channels: 2, sampleRate: 48000, bitDepth: 16),
        SendspinAudioFormat(codec: .pcm, channels: 2, sampleRate: 48000, bitDepth: 16),
        SendspinAudioFormat(codec: .pcm, channels: 2, sampleRate: 48000, bitDepth: 24),
        SendspinAudioFormat(codec: .opus, channels: 2, sampleRate: 48000, bitDepth: 16),
    ]
    /// A chunk this near where the stream stands (frames: rounding of µs timestamps) continues it.
    static let continuityFrames = 2
    /// A chunk more than this far from where the stream stands (µs) is absurd: dropped.
    static let plausibleJumpMicroseconds: Int64 = 60_000_000
    /// After this many absurd chunks in a row, the server's new timeline wins.
    static let realignAfter = 50
    /// The broadcaster's volume ramp, so a step is not a click.
    static let rampFrames = 1440
    static let eventLimit = 64

    private let clockSync: ClockSync
    private var decoder: AudioDecoder?
    private var stream: SendspinClientSession.Stream?
    /// Server time (µs) of stream frame 0.
    private var originMicroseconds: Int64?
    /// The frame just past the last chunk placed; nil after a clear.
    private var nextFrame: Int?
    private var absurdInARow = 0
    private var volume = 100
    private var muted = false
    private var events: [TimelineEvent] = []
    private var scratch: [Float] = []
    private(set) var serverName = ""
    private(set) var ended = false
    /// Chunks dropped for absurd timestamps, and chunks that did not decode (silence instead).
    private(set) var droppedChunks = 0
    private(set) var concealedChunks = 0
    /// The stream frame of the first sample the last `apply` appended; nil if it appended none.
    private(set) var lastProducedFrame: Int?

    init(clockSync: ClockSync) { self.clockSync = clockSync }

    var hasStream: Bool { decoder != nil }

    /// Nothing appended since: a wait that timed out, a connection that ended.
    mutating func clearProduced() { lastProducedFrame = nil }

    mutating func takeEvents() -> [TimelineEvent] {
        defer { events.removeAll(keepingCapacity: true) }
        return events
    }

    /// Applies one event from the connection, appending any PCM to `buffer`.
    mutating func apply(_ event: SendspinEvent, into buffer: inout [Float]) throws(PartyCastError) {
        lastProducedFrame = nil
        switch event {
        case .joined(let name):
            serverName = name
        case .streamStart(let started):
            ended = false
            // The same stream restarted (a new song in the same format) keeps its decoder's state;
            // another format (or header) takes a new one. One that cannot be decoded leaves none:
            // its chunks are dropped, not fed to the old stream's decoder, and the error says why.
            if started != stream || decoder == nil {
                (decoder, stream) = (nil, nil)
                decoder = try Self.decoder(for: started)
            }
            stream = started
        case .streamClear:
            // What is buffered and not yet heard goes; the next chunk places itself by its timestamp.
            post(.withdraw(fromFrame: playingFrame ?? nextFrame ?? 0))
            nextFrame = nil
        case .streamEnd:
            ended = true
        case let .audio(timestamp, payload):
            play(timestamp: timestamp, payload: payload, into: &buffer)
        case .volume(let level):
            volume = level
            postGain()
        case .mute(let mute):
            muted = mute
            postGain()
        }
    }

    private static func decoder(for stream: SendspinClientSession.Stream) throws(PartyCastError) -> AudioDecoder {
        let format = stream.format
        switch format.codec {
        case .pcm: return SendspinPCMDecoder(bitDepth: format.bitDepth, channels: format.channels)
        case .opus: return try OpusDecoder(channels: format.channels)
        case .flac:
            guard let header = stream.codecHeader else { throw PartyCastError(.decoder, "the server started a FLAC stream without its header") }
            return try SendspinFLACDecoder(header: header, format: format)
        }
    }

    /// The frame heard now by the schedule, if clock sync has drawn one.
    private var playingFrame: Int? {
        guard let line = clockSync.schedule.line(orElse: nil) else { return nil }
        let frame = line.frame(at: clockSync.clock.now())
        return frame.isFinite && abs(frame) < 1e15 ? Int(frame) : nil
    }

    private mutating func postGain() {
        // The broadcaster's curve (GainPolicy): cubic, so equal steps of the slider sound equal.
        let level = Float(volume) / 100
        let gain = muted ? 0 : level * level * level
        post(.gain(gain, atFrame: playingFrame ?? nextFrame ?? 0, rampFrames: Self.rampFrames))
    }

    private mutating func post(_ event: TimelineEvent) {
        // Only the messages before the stream pile up here; a flood of them beyond this is dropped.
        if events.count < Self.eventLimit { events.append(event) }
    }

    private mutating func play(timestamp: Int64, payload: [UInt8], into buffer: inout [Float]) {
        guard let decoder, let frame = place(timestamp) else { return }
        let channels = Self.format.channels
        scratch.removeAll(keepingCapacity: true)
        let decoded = (try? decoder.decode(payload, into: &scratch)) ?? -1
        if decoded <= 0 {
            // Nothing to say how long it was: 20 ms (aiosendspin's chunk) of concealment keeps the timeline.
            concealedChunks += 1
            scratch.removeAll(keepingCapacity: true)
            decoder.conceal(frames: 960, into: &scratch)
        }
        let frames = scratch.count / channels
        guard frames > 0 else { return }
        lastProducedFrame = frame
        nextFrame = frame + frames
        buffer.append(contentsOf: scratch[0..<(frames * channels)])
    }

    /// About four years: the farthest from the timeline's origin a chunk is placed on it.
    static let farthestPlacedMicroseconds: Int64 = 1 << 47

    /// The stream frame of a chunk due at `timestamp`, nil if it is to be dropped.
    private mutating func place(_ timestamp: Int64) -> Int? {
        guard let origin = originMicroseconds else {
            realign(at: timestamp)
            return 0
        }
        let delta = timestamp - origin  // both in 0..<2⁵², checked by the session
        if let nextFrame, let expected = Self.microseconds(frames: nextFrame), abs(delta - expected) > Self.plausibleJumpMicroseconds {
            absurdInARow += 1
            guard absurdInARow >= Self.realignAfter else {
                droppedChunks += 1
                return nil
            }
            realign(at: timestamp)
            return 0
        }
        absurdInARow = 0
        // After a stream/clear nothing says where the next chunk should fall: one years away (the
        // session lets timestamps reach 2⁵² µs, whose product with the rate overflows) starts anew.
        guard abs(delta) < Self.farthestPlacedMicroseconds else {
            realign(at: timestamp)
            return 0
        }
        // µs × 48 / 1000, rounded: |delta| < 2⁴⁷, so no overflow.
        let frame = Int((delta * Int64(Self.format.sampleRate) + (delta >= 0 ? 500_000 : -500_000)) / 1_000_000)
        if let nextFrame, abs(frame - nextFrame) <= Self.continuityFrames { return nextFrame }
        return frame
    }

    /// A new timeline: this timestamp is frame 0, and clock sync learns where that sits on the server's clock.
    private mutating func realign(at timestamp: Int64) {
        originMicroseconds = timestamp
        nextFrame = nil
        absurdInARow = 0
        clockSync.setTiming(ClockSync.StreamTiming(originNanoseconds: timestamp * 1000, sampleRate: Self.format.sampleRate))
    }

    private static func microseconds(frames: Int) -> Int64? {
        Int64(exactly: frames).map { $0 * 1_000_000 / Int64(format.sampleRate) }
    }
}

/// Sendspin's `pcm` codec (little-endian 16- or 24-bit integers) as a decoder.
final class SendspinPCMDecoder: AudioDecoder {
    private let bitDepth: Int
    private let channels: Int

    init(bitDepth: Int, channels: Int) {
        self.bitDepth = bitDepth
        self.channels = channels
    }

    func decode(_ packet: some Collection<UInt8>, into output: inout [Float]) throws(PartyCastError) -> Int {
        let frameBytes = bitDepth / 8 * channels
        guard packet.count % frameBytes == 0 else {
            throw PartyCastError(.decoder, "a PCM chunk of \(packet.count) bytes is not a whole number of frames")
        }
        SendspinPCM.decode(Array(packet), bitDepth: bitDepth, into: &output)
        return packet.count / frameBytes
    }

    func conceal(frames: Int, into output: inout [Float]) {
        output.append(contentsOf: repeatElement(0, count: max(0, frames) * channels))
    }
}

/// Sendspin's `flac` codec: stream/start's codec_header ("fLaC" and STREAMINFO) then one FLAC frame
/// per chunk, through the listener's FLAC decoder (libFLAC) reading what each chunk pushes.
final class SendspinFLACDecoder: AudioDecoder {
    /// The chunks' bytes as a byte source that runs dry between them.
    private final class Pushed: ByteSource {
        var pending: [UInt8] = []
        var length: Int64? { nil }
        var canSeek: Bool { false }
        func seek(to offset: Int64) throws(PartyCastError) { throw PartyCastError(.invalidArgument, "a Sendspin stream cannot seek") }
        func read(maxBytes: Int) throws(PartyCastError) -> [UInt8] {
            let piece = Array(pending.prefix(maxBytes))
            pending.removeFirst(piece.count)
            return piece
        }
    }

    private let bytes = Pushed()
    private let source: FLACSource
    private let channels: Int

    init(header: [UInt8], format: SendspinAudioFormat) throws(PartyCastError) {
        bytes.pending = header
        source = try FLACSource(bytes: bytes)
        try source.prepare()
        guard source.format == AudioFormat(sampleRate: format.sampleRate, channels: format.channels) else {
            throw PartyCastError(.unsupportedFormat, "the server's FLAC header says \(source.format.map { "\($0)" } ?? "nothing"), not the stream it announced")
        }
        channels = format.channels
    }

    func decode(_ packet: some Collection<UInt8>, into output: inout [Float]) throws(PartyCastError) -> Int {
        let before = output.count
        bytes.pending.append(contentsOf: packet)
        source.resumeAfterEnd()
        // One frame a chunk; whatever a hostile chunk holds beyond it is decoded or skipped, never kept.
        while !bytes.pending.isEmpty || output.count == before {
            guard try source.produce(into: &output) else { break }
        }
        bytes.pending.removeAll()
        return (output.count - before) / channels
    }

    func conceal(frames: Int, into output: inout [Float]) {
        output.append(contentsOf: repeatElement(0, count: max(0, frames) * channels))
    }
}
