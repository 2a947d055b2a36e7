import COpus
import PartyCastCore

/// Turns fixed-size blocks of interleaved Float32 into packets.
public protocol AudioEncoder: AnyObject {
    var format: AudioFormat { get }
    /// Frames in every packet.
    var framesPerPacket: Int { get }
    /// Frames of codec delay at the start of the decoded stream that the decoder side must drop.
    var preSkip: Int { get }
    func encode(_ block: UnsafeBufferPointer<Float>) throws(PartyCastError) -> [UInt8]
}

/// Turns packets back into interleaved Float32.
public protocol AudioDecoder: AnyObject {
    /// Appends the decoded frames; returns how many.
    func decode(_ packet: some Collection<UInt8>, into output: inout [Float]) throws(PartyCastError) -> Int
    /// Appends `frames` frames standing in for a packet that was lost or could not be decoded, so
    /// the stream keeps its length: the codec's own concealment where it has one, else silence.
    func conceal(frames: Int, into output: inout [Float])
}

public final class OpusEncoder: AudioEncoder {
    public static let sampleRate = 48000
    private let encoder: OpaquePointer
    public let format: AudioFormat
    public let framesPerPacket: Int
    public let preSkip: Int
    private var packet = [UInt8](repeating: 0, count: 4000)

    /// - Parameters: bitrateKbps: total for all channels; packetMilliseconds: 2.5…60 as Opus allows.
    public init(channels: Int, bitrateKbps: Int, packetMilliseconds: Double = 20) throws(PartyCastError) {
        guard (1...2).contains(channels) else { throw PartyCastError(.invalidArgument, "Opus carries 1 or 2 channels, not \(channels)") }
        guard (6...510).contains(bitrateKbps) else { throw PartyCastError(.invalidArgument, "--bitrate \(bitrateKbps): Opus takes 6 to 510 kbit/s") }
        var error: Int32 = 0
        guard let encoder = opus_encoder_create(Int32(Self.sampleRate), Int32(channels), OPUS_APPLICATION_AUDIO, &error), error == OPUS_OK else {
            throw PartyCastError(.decoder, "cannot create an Opus encoder: \(String(cString: opus_strerror(error)))")
        }
        self.encoder = encoder
        format = AudioFormat(sampleRate: Self.sampleRate, channels: channels)
        framesPerPacket = Int(Double(Self.sampleRate) * packetMilliseconds / 1000)
        _ = partycast_opus_set_bitrate(encoder, Int32(bitrateKbps * 1000))
        var lookahead: Int32 = 0
        _ = partycast_opus_get_lookahead(encoder, &lookahead)
        preSkip = Int(lookahead)
    }

    deinit { opus_encoder_destroy(encoder) }

    public func encode(_ block: UnsafeBufferPointer<Float>) throws(PartyCastError) -> [UInt8] {
        let length = packet.withUnsafeMutableBufferPointer {
            opus_encode_float(encoder, block.baseAddress!, Int32(framesPerPacket), $0.baseAddress!, Int32($0.count))
        }
        guard length > 0 else { throw PartyCastError(.decoder, "Opus encoding failed: \(String(cString: opus_strerror(length)))") }
        return Array(packet[0..<Int(length)])
    }
}

public final class OpusDecoder: AudioDecoder {
    private let decoder: OpaquePointer
    private let channels: Int
    /// Room for the longest Opus packet (120 ms at 48 kHz).
    private var scratch: [Float]

    public init(channels: Int) throws(PartyCastError) {
        var error: Int32 = 0
        guard let decoder = opus_decoder_create(Int32(OpusEncoder.sampleRate), Int32(channels), &error), error == OPUS_OK else {
            throw PartyCastError(.decoder, "cannot create an Opus decoder: \(String(cString: opus_strerror(error)))")
        }
        self.decoder = decoder
        self.channels = channels
        scratch = [Float](repeating: 0, count: Int(Self.maximumFrames) * channels)
    }

    deinit { opus_decoder_destroy(decoder) }

    public func decode(_ packet: some Collection<UInt8>, into output: inout [Float]) throws(PartyCastError) -> Int {
        // An empty packet would ask libopus for concealment; a packet must carry data to be one.
        guard !packet.isEmpty, packet.count <= Int(Int32.max) else { throw PartyCastError(.decoder, "empty Opus packet") }
        let bytes = Array(packet)
        let frames = scratch.withUnsafeMutableBufferPointer { out in
            bytes.withUnsafeBufferPointer { opus_decode_float(decoder, $0.baseAddress, Int32($0.count), out.baseAddress!, Self.maximumFrames, 0) }
        }
        guard frames >= 0 else { throw PartyCastError(.decoder, "corrupt Opus packet: \(String(cString: opus_strerror(frames)))") }
        output.append(contentsOf: scratch[0..<Int(frames) * channels])
        return Int(frames)
    }

    /// libopus's packet-loss concealment (a null packet) for `frames`, which must be a multiple of
    /// 2.5 ms; silence if it declines.
    public func conceal(frames: Int, into output: inout [Float]) {
        let wanted = max(0, min(frames, Int(Self.maximumFrames)))
        let made = scratch.withUnsafeMutableBufferPointer { out in
            opus_decode_float(decoder, nil, 0, out.baseAddress!, Int32(wanted), 0)
        }
        if made == Int32(wanted) {
            output.append(contentsOf: scratch[0..<wanted * channels])
        } else {
            output.append(contentsOf: repeatElement(0, count: wanted * channels))
        }
    }

    /// The longest Opus packet: 120 ms at 48 kHz.
    public static let maximumFrames: Int32 = 5760
}

/// Float32 little-endian, as is.
public final class PCMEncoder: AudioEncoder {
    public let format: AudioFormat
    public let framesPerPacket: Int
    public var preSkip: Int { 0 }

    public init(format: AudioFormat, packetMilliseconds: Double = 20) {
        self.format = format
        framesPerPacket = max(1, Int(Double(format.sampleRate) * packetMilliseconds / 1000))
    }

    public func encode(_ block: UnsafeBufferPointer<Float>) throws(PartyCastError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: block.count * 4)
        for (i, sample) in block.enumerated() {
            withUnsafeBytes(of: sample.bitPattern.littleEndian) { bytes.replaceSubrange(i * 4..<i * 4 + 4, with: $0) }
        }
        return bytes
    }
}

public final class PCMDecoder: AudioDecoder {
    private let channels: Int
    public init(channels: Int) { self.channels = channels }

    public func decode(_ packet: some Collection<UInt8>, into output: inout [Float]) throws(PartyCastError) -> Int {
        guard packet.count % (4 * channels) == 0 else {
            throw PartyCastError(.decoder, "PCM packet of \(packet.count) bytes is not a whole number of \(channels)-channel frames")
        }
        output.reserveCapacity(output.count + packet.count / 4)
        var bits: UInt32 = 0
        for (i, byte) in packet.enumerated() {
            bits |= UInt32(byte) << (8 * UInt32(i & 3))
            if i & 3 == 3 {
                output.append(Float(bitPattern: bits))
                bits = 0
            }
        }
        return packet.count / 4 / channels
    }

    public func conceal(frames: Int, into output: inout [Float]) {
        output.append(contentsOf: repeatElement(0, count: max(0, frames) * channels))
    }
}
