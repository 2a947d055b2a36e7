import PartyCastCore
import PartyCastMP3Parser

/// A broadcast's MP3 frames (`--codec mp3`) decoded as a local file's are, by libmpg123 one frame at
/// a time. A payload must be whole layer III frames of the announced stream, at most
/// `maximumFrames` of them; anything else is refused before libmpg123 sees a byte.
public final class MP3PacketDecoder {
    /// A song's first packet carries its decoder delay, a seek's the frames that refill the bit
    /// reservoir (about a dozen): more is not a real packet.
    public static let maximumFrames = 64

    private let decoder: MPG123
    private let sampleRate: Int
    public let channels: Int
    private var frameBytes: [UInt8] = []

    public init(sampleRate: Int, channels: Int) throws(PartyCastError) {
        decoder = try MPG123()
        self.sampleRate = sampleRate
        self.channels = channels
    }

    /// Appends every frame's samples; a frame that decodes to fewer than its samples per frame is
    /// made up with silence, so each frame keeps its place on the timeline. Returns the frames
    /// appended.
    public func decode(_ payload: some Collection<UInt8>, into output: inout [Float]) throws(PartyCastError) -> Int {
        let bytes = Array(payload)
        var frames: [(range: Range<Int>, samples: Int)] = []
        var offset = 0
        while offset < bytes.count {
            guard let header = FrameHeader(bytes: bytes[offset...]), header.sampleRate == sampleRate, header.channels == channels else {
                throw PartyCastError(.decoder, "not an MP3 frame of the stream at byte \(offset) of the packet")
            }
            let end = offset + header.frameLength
            guard end <= bytes.count, frames.count < Self.maximumFrames else {
                throw PartyCastError(.decoder, "MP3 packet of \(bytes.count) bytes is not whole frames (at most \(Self.maximumFrames))")
            }
            frames.append((offset..<end, header.samplesPerFrame))
            offset = end
        }
        var total = 0
        for frame in frames {
            frameBytes.removeAll(keepingCapacity: true)
            frameBytes.append(contentsOf: bytes[frame.range])
            let before = output.count
            let produced = min(try decoder.decode(frame: frameBytes, into: &output), frame.samples)
            output.removeSubrange((before + produced * channels)...)
            output.append(contentsOf: repeatElement(0, count: (frame.samples - produced) * channels))
            total += frame.samples
        }
        return total
    }
}
