import PartyCastCore

extension ChannelAssignment {
    /// Rewrites interleaved frames in place so that every channel of a frame plays what this
    /// assignment takes from it: left is channel 0, right channel 1 (a source of more channels has
    /// them first, as WAV, FLAC and Opus order them). A mono source, or `stereo`, is left as it is.
    /// Allocates nothing and takes no lock: the output thread runs it on every period.
    public func apply(to samples: UnsafeMutableBufferPointer<Float>, channels: Int) {
        guard channels >= 2 else { return }
        switch self {
        case .stereo: return
        case .left: Self.fill(samples, channels: channels) { $0[0] }
        case .right: Self.fill(samples, channels: channels) { $0[1] }
        case .mono: Self.fill(samples, channels: channels) { ($0[0] + $0[1]) * 0.5 }
        }
    }

    @inline(__always)
    private static func fill(_ samples: UnsafeMutableBufferPointer<Float>, channels: Int, _ take: (UnsafeMutablePointer<Float>) -> Float) {
        guard let base = samples.baseAddress else { return }
        var frame = base
        for _ in 0..<(samples.count / channels) {
            let value = take(frame)
            for c in 0..<channels { frame[c] = value }
            frame += channels
        }
    }
}
