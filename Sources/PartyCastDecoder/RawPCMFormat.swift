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
