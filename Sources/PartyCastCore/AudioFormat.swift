/// Interleaved Float32 PCM: the only sample format past the decoder.
public struct AudioFormat: Sendable, Equatable, CustomStringConvertible {
    public var sampleRate: Int
    public var channels: Int

    public init(sampleRate: Int, channels: Int) {
        self.sampleRate = sampleRate
        self.channels = channels
    }

    public var description: String { "\(sampleRate) Hz, \(channels == 1 ? "mono" : channels == 2 ? "stereo" : "\(channels) channels")" }
}
