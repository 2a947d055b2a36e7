import PartyCastCore
#if canImport(Glibc)
import Glibc
#endif

/// `tone:FREQ[:SECONDS]`: a sine at -6 dBFS, stereo at 48 kHz, endless unless a length is given. Its
/// frequency can be changed while it plays (`retune`), without a jump in phase: no click.
public final class ToneGenerator: PCMSource {
    public static let sampleRate = 48000
    public private(set) var frequency: Double
    public let totalFrames: Int?
    private var position = 0
    /// Where the tone took its present frequency, and its phase there (radians): every later sample's
    /// phase follows from them exactly, with no error summed sample by sample.
    private var anchorFrame = 0
    private var anchorPhase = 0.0
    public let format: AudioFormat? = AudioFormat(sampleRate: ToneGenerator.sampleRate, channels: 2)
    public private(set) var tags: TrackTags
    public var duration: Duration { totalFrames.map { .exact(frames: $0) } ?? .unknown }
    public var isSeekable: Bool { true }

    /// Parses the part after `tone:`.
    public init(spec: String) throws(PartyCastError) {
        let parts = spec.split(separator: ":", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let frequency = Double(parts[0]), Self.accepts(frequency) else {
            throw PartyCastError(.invalidArgument, "tone:\(spec): expected tone:FREQ[:SECONDS] with 0 < FREQ < 24000, e.g. tone:440:5")
        }
        self.frequency = frequency
        if parts.count == 2 {
            guard let seconds = Double(parts[1]), seconds > 0, seconds < 86400 else {
                throw PartyCastError(.invalidArgument, "tone:\(spec): SECONDS must be a positive number below 86400")
            }
            totalFrames = Int((seconds * Double(Self.sampleRate)).rounded())
        } else {
            totalFrames = nil
        }
        tags = TrackTags(title: Self.title(frequency))
    }

    /// Whether `hertz` is a frequency a tone can have: below the Nyquist frequency of 48 kHz.
    public static func accepts(_ hertz: Double) -> Bool { hertz.isFinite && hertz > 0 && hertz < 24000 }

    private static func title(_ hertz: Double) -> String {
        let rounded = (hertz * 10).rounded() / 10
        return rounded == rounded.rounded() ? "\(Int(rounded)) Hz tone" : "\(rounded) Hz tone"
    }

    /// From `frame` on (the next sample when nil), the tone has this frequency, its phase going on
    /// from where it was there: no click. A frame already produced is produced again, so a party can
    /// take back what it sent and retune from a cut; never before the last retune, whose samples stand.
    public func retune(to hertz: Double, atFrame frame: Int? = nil) throws(PartyCastError) {
        guard Self.accepts(hertz) else { throw PartyCastError(.invalidArgument, "\(hertz) Hz: a tone's frequency must lie between 0 and 24000 Hz") }
        let at = max(anchorFrame, min(frame ?? position, totalFrames ?? Int.max))
        anchorPhase = phase(at: at)
        anchorFrame = at
        position = at
        frequency = hertz
        tags.title = Self.title(hertz)
    }

    private var step: Double { 2 * Double.pi * frequency / Double(Self.sampleRate) }

    private func phase(at frame: Int) -> Double {
        (anchorPhase + step * Double(frame - anchorFrame)).truncatingRemainder(dividingBy: 2 * Double.pi)
    }

    public func prepare() throws(PartyCastError) {}

    public func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool {
        let count = min(1024, totalFrames.map { $0 - position } ?? 1024)
        guard count > 0 else { return false }
        let (start, step) = (phase(at: position), step)
        for i in 0..<count {
            let value = Float(0.5 * sin(start + step * Double(i)))
            buffer.append(value)
            buffer.append(value)
        }
        position += count
        return true
    }

    /// Lands where the tone would be had it kept its present frequency since its last retune.
    public func seek(toFrame frame: Int) throws(PartyCastError) {
        position = max(0, min(frame, totalFrames ?? frame))
    }
}
