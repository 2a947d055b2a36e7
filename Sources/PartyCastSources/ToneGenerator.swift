import PartyCastCore
#if canImport(Glibc)
import Glibc
#endif

/// `tone:FREQ[:SECONDS]`: a sine at -6 dBFS, stereo at 48 kHz, endless unless a length is given.
public final class ToneGenerator: PCMSource {
    public let frequency: Double
    public let totalFrames: Int?
    private var position = 0
    public let format: AudioFormat? = AudioFormat(sampleRate: 48000, channels: 2)
    public let tags: TrackTags
    public var duration: Duration { totalFrames.map { .exact(frames: $0) } ?? .unknown }
    public var isSeekable: Bool { true }

    /// Parses the part after `tone:`.
    public init(spec: String) throws(PartyCastError) {
        let parts = spec.split(separator: ":", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let frequency = Double(parts[0]), frequency > 0, frequency < 24000 else {
            throw PartyCastError(.invalidArgument, "tone:\(spec): expected tone:FREQ[:SECONDS] with 0 < FREQ < 24000, e.g. tone:440:5")
        }
        self.frequency = frequency
        if parts.count == 2 {
            guard let seconds = Double(parts[1]), seconds > 0, seconds < 86400 else {
                throw PartyCastError(.invalidArgument, "tone:\(spec): SECONDS must be a positive number below 86400")
            }
            totalFrames = Int((seconds * 48000).rounded())
        } else {
            totalFrames = nil
        }
        tags = TrackTags(title: "\(parts[0]) Hz tone")
    }

    public func prepare() throws(PartyCastError) {}

    public func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool {
        let count = min(1024, totalFrames.map { $0 - position } ?? 1024)
        guard count > 0 else { return false }
        let step = 2 * Double.pi * frequency / 48000
        for i in 0..<count {
            let value = Float(0.5 * sin(step * Double(position + i)))
            buffer.append(value)
            buffer.append(value)
        }
        position += count
        return true
    }

    public func seek(toFrame frame: Int) throws(PartyCastError) {
        position = max(0, min(frame, totalFrames ?? frame))
    }
}
