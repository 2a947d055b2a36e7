import PartyCastCore
import PartyCastMP3Parser

/// An MP3 stream as PCM: the frames `MP3FrameReader` reads go through libmpg123, and only their
/// real audio is kept (LAME delay and padding trimmed), so the output is gapless.
public final class MP3Source: PCMSource {
    private let reader: MP3FrameReader
    private let decoder: MPG123

    public private(set) var format: AudioFormat?
    public var tags: TrackTags { reader.tags }
    /// The ID3v2 tag's picture (front cover preferred), known once `prepare()` has returned.
    public var cover: CoverArt? { reader.cover }
    public var streamInfo: StreamInfo? { reader.streamInfo }
    public var duration: Duration { reader.duration }
    public var isSeekable: Bool { reader.isSeekable }
    public var skippedBytes: Int64 { reader.skippedBytes }

    /// Frames with a good sync and no decodable audio are counted, not fatal.
    public private(set) var undecodableFrames = 0

    public init(bytes: ByteSource) throws(PartyCastError) {
        reader = MP3FrameReader(bytes: bytes)
        decoder = try MPG123()
    }

    /// Parses the stream's start (tags, header, first frame) so format and duration are known
    /// before playback.
    public func prepare() throws(PartyCastError) {
        // The first frame's samples wait in `pending` for the first produce().
        while format == nil {
            guard try pump(into: &pending) else { break }
        }
        guard format != nil else {
            throw PartyCastError(.notAudio, "no decodable MPEG audio found; is this really an MP3 file?")
        }
        try reader.indexForDuration()
    }

    private var pending: [Float] = []

    public func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool {
        if !pending.isEmpty {
            buffer.append(contentsOf: pending)
            pending.removeAll()
            return true
        }
        let start = buffer.count
        while buffer.count == start {
            guard try pump(into: &buffer) else { return false }
        }
        return true
    }

    /// Decodes the next frame's real audio into `output`; false at end of stream.
    private func pump(into output: inout [Float]) throws(PartyCastError) -> Bool {
        guard let next = try reader.next() else { return false }
        let before = output.count
        let produced = try decoder.decode(frame: next.frame.bytes, into: &output)
        if produced == 0 {
            undecodableFrames += 1
            return true
        }
        let channels = decoder.channels
        if format == nil {
            format = AudioFormat(sampleRate: next.frame.header.sampleRate, channels: channels)
        }
        let kept = next.kept(of: produced)
        output.removeSubrange((before + kept.upperBound * channels)..<output.count)
        output.removeSubrange(before..<(before + kept.lowerBound * channels))
        return true
    }

    /// Lands on the exact sample (see `MP3FrameReader.seek`).
    public func seek(toFrame frame: Int) throws(PartyCastError) {
        try reader.seek(toFrame: frame)
        try decoder.reset()
        pending.removeAll()
    }
}

extension MP3Source: SniffedDecoder {
    public static var formatName: String { "MP3" }

    /// Three MPEG audio frames in a row, as the parser would lock on to them.
    public static func recognises(_ head: ArraySlice<UInt8>) -> Bool {
        var parser = MP3Parser(startOffset: 1)
        parser.push(head)
        while true {
            guard let event = try? parser.next() else { return false }
            if case .frame = event { return true }
        }
    }

    public static func open(_ bytes: ByteSource) throws(PartyCastError) -> PCMSource { try MP3Source(bytes: bytes) }
}
