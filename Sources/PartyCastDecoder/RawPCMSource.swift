import PartyCastCore

/// The layout of raw PCM from a pipe: `RATE:BITS:CHANNELS`, little-endian signed integers, as
/// snapcast's pipes and mpd's FIFO output write it (48000:16:2 unless told otherwise).
public struct RawPCMFormat: Sendable, Equatable, CustomStringConvertible {
    public var sampleRate: Int
    public var bitsPerSample: Int
    public var channels: Int

    public static let standard = RawPCMFormat(sampleRate: 48000, bitsPerSample: 16, channels: 2)

    public init(sampleRate: Int, bitsPerSample: Int, channels: Int) {
        self.sampleRate = sampleRate
        self.bitsPerSample = bitsPerSample
        self.channels = channels
    }

    public init(parsing text: String) throws(PartyCastError) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map { Int($0) }
        guard parts.count == 3, let rate = parts[0], let bits = parts[1], let channels = parts[2],
              (8000...384_000).contains(rate), [16, 24, 32].contains(bits), (1...8).contains(channels) else {
            throw PartyCastError(.invalidArgument, "--pcm-format \(text): expected RATE:BITS:CHANNELS with 8000…384000 Hz, 16, 24 or 32 bits and 1…8 channels, e.g. 48000:16:2")
        }
        self.init(sampleRate: rate, bitsPerSample: bits, channels: channels)
    }

    public var description: String { "\(sampleRate):\(bitsPerSample):\(channels)" }
    var bytesPerFrame: Int { bitsPerSample / 8 * channels }
}

/// Raw interleaved PCM from a byte stream (a pipe): whole frames converted to Float32 as they come,
/// a partial frame kept for the next read.
public final class RawPCMSource: PCMSource {
    static let readSize = 16384

    private let bytes: ByteSource
    private let layout: RawPCMFormat
    private var carry: [UInt8] = []

    public let format: AudioFormat?
    public var tags: TrackTags { TrackTags() }
    public var duration: Duration { .unknown }
    public var isSeekable: Bool { false }
    public var wakeProducer: (@Sendable () -> Void)? { bytes.wakeReader }

    public init(bytes: ByteSource, format: RawPCMFormat) {
        self.bytes = bytes
        layout = format
        self.format = AudioFormat(sampleRate: format.sampleRate, channels: format.channels)
    }

    public func prepare() throws(PartyCastError) {}

    public func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool {
        let frameBytes = layout.bytesPerFrame
        while carry.count < frameBytes {
            let piece = try bytes.read(maxBytes: Self.readSize)
            if piece.isEmpty { return false }
            carry += piece
        }
        let whole = carry.count - carry.count % frameBytes
        let width = layout.bitsPerSample / 8
        buffer.reserveCapacity(buffer.count + whole / width)
        carry.withUnsafeBytes { raw in
            var offset = 0
            while offset < whole {
                buffer.append(Self.sample(raw, at: offset, width: width))
                offset += width
            }
        }
        carry.removeFirst(whole)
        return true
    }

    /// A little-endian signed integer sample of `width` bytes, scaled to -1…1.
    static func sample(_ raw: UnsafeRawBufferPointer, at offset: Int, width: Int) -> Float {
        switch width {
        case 2: return Float(Int16(bitPattern: UInt16(raw[offset]) | UInt16(raw[offset + 1]) << 8)) / 32768
        case 3:
            let value = Int32(bitPattern: UInt32(raw[offset]) << 8 | UInt32(raw[offset + 1]) << 16 | UInt32(raw[offset + 2]) << 24)
            return Float(value >> 8) / 8_388_608
        default:
            let value = UInt32(raw[offset]) | UInt32(raw[offset + 1]) << 8 | UInt32(raw[offset + 2]) << 16 | UInt32(raw[offset + 3]) << 24
            return Float(Double(Int32(bitPattern: value)) / 2_147_483_648)
        }
    }

    public func seek(toFrame frame: Int) throws(PartyCastError) {
        throw PartyCastError(.invalidArgument, "a pipe cannot seek")
    }
}
