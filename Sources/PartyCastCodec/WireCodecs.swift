import PartyCastCore
import PartyCastDecoder
import PartyCastWire

/// A codec the party's audio can travel in: how the broadcaster encodes it, and what a listener
/// accepts and decodes. A new wire codec is one of these added to `WireCodecs.all`.
public protocol WireCodec: Sendable {
    /// Its `--codec` name.
    var name: String { get }
    var kind: PCCodecKind { get }
    /// How the broadcaster describes it in its log.
    func summary(bitrateKbps: Int) -> String
    /// Whether the broadcaster sends its sources' own packets (`PacketSource`) instead of encoding.
    var passesThrough: Bool { get }
    /// Whether each stream (a song, or where a skip or a seek starts one) is decoded by a decoder
    /// started afresh, its first chunk carrying what that decoder needs: true for MP3, whose frames
    /// lean on earlier ones; false for Opus, one encoder for the whole broadcast.
    var decodesStreamsApart: Bool { get }
    func makeEncoder(for format: AudioFormat, bitrateKbps: Int) throws(PartyCastError) -> AudioEncoder
    /// Why a listener cannot play a stream announced in this codec; nil when it can.
    func refusal(sampleRate: Int, channels: Int, framesPerChunk: Int) -> String?
    func makeDecoder(format: AudioFormat) throws(PartyCastError) -> AudioDecoder
    /// Whether a payload of this size can be a chunk at all (else it is concealed undecoded).
    func couldBeChunk(payloadBytes: Int, framesPerChunk: Int, channels: Int) -> Bool
    /// Frames to make up for a chunk that did not decode: what the codec's concealment produces.
    func framesToConceal(framesPerChunk: Int, frameCount: Int) -> Int
}

extension WireCodec {
    public var passesThrough: Bool { false }
    public var decodesStreamsApart: Bool { false }
}

public enum WireCodecs {
    public static let all: [any WireCodec] = [OpusWireCodec(), PCMWireCodec(), MP3WireCodec()]

    public static func named(_ name: String) -> (any WireCodec)? { all.first { $0.name == name } }
    public static func carrying(_ kind: PCCodecKind) -> (any WireCodec)? { all.first { $0.kind == kind } }
}

/// Opus at 48 kHz in 20 ms packets: small, and good enough for a party.
struct OpusWireCodec: WireCodec {
    var name: String { "opus" }
    var kind: PCCodecKind { .opus }
    func summary(bitrateKbps: Int) -> String { "opus \(bitrateKbps) kbit/s" }

    func makeEncoder(for format: AudioFormat, bitrateKbps: Int) throws(PartyCastError) -> AudioEncoder {
        try OpusEncoder(channels: min(format.channels, 2), bitrateKbps: bitrateKbps)
    }

    func refusal(sampleRate: Int, channels: Int, framesPerChunk: Int) -> String? {
        // Opus decodes at 48 kHz in packets of 2.5 ms multiples up to 120 ms.
        if sampleRate != 48000 { return "Opus at \(sampleRate) Hz (it decodes at 48000)" }
        if !(1...2).contains(channels) { return "Opus with \(channels) channels" }
        if !(120...Int(OpusDecoder.maximumFrames)).contains(framesPerChunk) || framesPerChunk % 120 != 0 { return "Opus chunks of \(framesPerChunk) frames" }
        return nil
    }

    func makeDecoder(format: AudioFormat) throws(PartyCastError) -> AudioDecoder { try OpusDecoder(channels: format.channels) }
    func couldBeChunk(payloadBytes: Int, framesPerChunk: Int, channels: Int) -> Bool { true }
    /// libopus conceals a whole packet; the chunk keeps only its real frames.
    func framesToConceal(framesPerChunk: Int, frameCount: Int) -> Int { framesPerChunk }
}

/// Float32 little-endian at the source's rate: lossless, ~2.8 Mbit/s for CD audio.
struct PCMWireCodec: WireCodec {
    var name: String { "pcm" }
    var kind: PCCodecKind { .pcmF32Le }
    func summary(bitrateKbps: Int) -> String { "pcm" }
    func makeEncoder(for format: AudioFormat, bitrateKbps: Int) throws(PartyCastError) -> AudioEncoder { PCMEncoder(format: format) }

    func refusal(sampleRate: Int, channels: Int, framesPerChunk: Int) -> String? {
        if !(8000...384_000).contains(sampleRate) { return "PCM at \(sampleRate) Hz" }
        if !(1...8).contains(channels) { return "PCM with \(channels) channels" }
        // A chunk must fit in one message.
        if framesPerChunk < 1 || framesPerChunk * channels * 4 > WireFraming.maxMessageBytes { return "PCM chunks of \(framesPerChunk) frames" }
        return nil
    }

    func makeDecoder(format: AudioFormat) throws(PartyCastError) -> AudioDecoder { PCMDecoder(channels: format.channels) }
    /// A PCM payload is always a whole chunk (the last one padded): any other size is not one.
    func couldBeChunk(payloadBytes: Int, framesPerChunk: Int, channels: Int) -> Bool { payloadBytes == framesPerChunk * channels * 4 }
    func framesToConceal(framesPerChunk: Int, frameCount: Int) -> Int { frameCount }
}

/// MP3 frames as the source file holds them, one per chunk (a song's first chunk and a seek's carry
/// a few more in front): no re-encoding, each listener decodes them as it decodes a local file.
/// Only MP3 sources of the broadcast's rate and channels can be sent this way.
struct MP3WireCodec: WireCodec {
    var name: String { "mp3" }
    var kind: PCCodecKind { .mp3 }
    func summary(bitrateKbps: Int) -> String { "mp3 passthrough: the files' own frames" }
    var passesThrough: Bool { true }
    var decodesStreamsApart: Bool { true }

    func makeEncoder(for format: AudioFormat, bitrateKbps: Int) throws(PartyCastError) -> AudioEncoder {
        throw PartyCastError(.invalidArgument, "--codec mp3 sends MP3 frames as they are: it has no encoder")
    }

    /// MPEG-1, 2 and 2.5 layer III rates, in frames of 1152 (MPEG-1) or 576 samples.
    static let rates: Set<Int> = [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000]

    func refusal(sampleRate: Int, channels: Int, framesPerChunk: Int) -> String? {
        if !Self.rates.contains(sampleRate) { return "MP3 at \(sampleRate) Hz" }
        if !(1...2).contains(channels) { return "MP3 with \(channels) channels" }
        if framesPerChunk != (sampleRate >= 32000 ? 1152 : 576) { return "MP3 chunks of \(framesPerChunk) frames at \(sampleRate) Hz" }
        return nil
    }

    func makeDecoder(format: AudioFormat) throws(PartyCastError) -> AudioDecoder {
        try MP3PacketDecoder(sampleRate: format.sampleRate, channels: format.channels)
    }

    func couldBeChunk(payloadBytes: Int, framesPerChunk: Int, channels: Int) -> Bool { true }
    /// Silence: MP3 has no concealment of its own.
    func framesToConceal(framesPerChunk: Int, frameCount: Int) -> Int { frameCount }
}

/// libmpg123 (behind `MP3PacketDecoder`'s checks) as a wire decoder.
extension MP3PacketDecoder: AudioDecoder {
    public func conceal(frames: Int, into output: inout [Float]) {
        output.append(contentsOf: repeatElement(0, count: max(0, frames) * channels))
    }
}
