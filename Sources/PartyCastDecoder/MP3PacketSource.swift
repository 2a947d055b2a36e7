import PartyCastCore
import PartyCastMP3Parser

/// An MP3 file's frames as they are, for `--codec mp3`: each packet is one frame, with the real
/// audio's window (LAME delay and padding, a seek's target) said in `skipFrames` and `frames`, so
/// that a listener decoding the packets with a fresh libmpg123 gets what `MP3Source` plays: the
/// same samples as Debian's `mpg123`, gapless. A packet that starts a stream carries in front the
/// frames whose output is dropped (the decoder delay, a seek's preroll).
public final class MP3PacketSource: PacketSource {
    private let reader: MP3FrameReader
    /// The first frame, read by `prepare()` for the format and sent by the first `nextPacket()`.
    private var first: MP3FrameReader.Frame?

    public private(set) var format: AudioFormat?
    public var framesPerPacket: Int { reader.samplesPerFrame }
    public var tags: TrackTags { reader.tags }
    public var duration: Duration { reader.duration }
    public var cover: CoverArt? { reader.cover }
    private var header: FrameHeader?

    public init(bytes: ByteSource) { reader = MP3FrameReader(bytes: bytes) }

    public func prepare() throws(PartyCastError) {
        guard let frame = try reader.next() else {
            throw PartyCastError(.notAudio, "no MPEG audio frame found; is this really an MP3 file?")
        }
        first = frame
        header = frame.frame.header
        format = AudioFormat(sampleRate: frame.frame.header.sampleRate, channels: frame.frame.header.channels)
        try reader.indexForDuration()
    }

    public func nextPacket() throws(PartyCastError) -> AudioPacket? {
        var payload: [UInt8] = []
        var skipped = 0
        while let next = try nextFrame() {
            let samples = next.frame.header.samplesPerFrame
            let kept = next.kept(of: samples)
            if kept.isEmpty {
                // Before the real audio: decoded for what later frames need, then dropped.
                guard next.keepFrom >= samples else { return nil }  // past the padding: the end
                payload += next.frame.bytes
                skipped += samples
                continue
            }
            payload += next.frame.bytes
            return AudioPacket(payload: payload, skipFrames: skipped + kept.lowerBound, frames: kept.count)
        }
        return nil
    }

    private func nextFrame() throws(PartyCastError) -> MP3FrameReader.Frame? {
        if let held = first.take() { return held }
        return try reader.next()
    }

    public func seek(toFrame frame: Int) throws(PartyCastError) {
        try reader.seek(toFrame: frame)
        first = nil
    }

    public var silentPacket: AudioPacket {
        AudioPacket(payload: header?.silentFrame ?? [], skipFrames: 0, frames: framesPerPacket)
    }
}
