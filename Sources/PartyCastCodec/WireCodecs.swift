import PartyCastCore
import PartyCastWire

/// A codec the party's audio can travel in: how the broadcaster encodes it, and what a listener
/// accepts and decodes. A new wire codec is one of these added to `WireCodecs.all`.
public protocol WireCodec: Sendable {
    /// Its `--codec` name.
    var name: String { get }
    var kind: PCCodecKind { get }
    /// How the broadcaster describes it in its log.
    func summary(bitrateKbps: Int) -> String
    func makeEncoder(for format: AudioFormat, bitrateKbps: Int) throws(PartyCastError) -> AudioEncoder
    /// Why a listener cannot play a stream announced in this codec; nil when it can.
    func refusal(sampleRate: Int, channels: Int, framesPerChunk: Int) -> String?
    func makeDecoder(channels: Int) throws(PartyCastError) -> AudioDecoder
    /// Whether a payload of this size can be a chunk at all (else it is concealed undecoded).
    func couldBeChunk(payloadBytes: Int, framesPerChunk: Int, channels: Int) -> Bool
    /// Frames to make up for a chunk that did not decode: what the codec's concealment produces.
    func framesToConceal(framesPerChunk: Int, frameCount: Int) -> Int
}

public enum WireCodecs {
    public static let all: [any WireCodec] = [OpusWireCodec(), PCMWireCodec()]

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

    func makeDecoder(channels: Int) throws(PartyCastError) -> AudioDecoder { try OpusDecoder(channels: channels) }
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

    func makeDecoder(channels: Int) throws(PartyCastError) -> AudioDecoder { PCMDecoder(channels: channels) }
    /// A PCM payload is always a whole chunk (the last one padded): any other size is not one.
    func couldBeChunk(payloadBytes: Int, framesPerChunk: Int, channels: Int) -> Bool { payloadBytes == framesPerChunk * channels * 4 }
    func framesToConceal(framesPerChunk: Int, frameCount: Int) -> Int { frameCount }
}
