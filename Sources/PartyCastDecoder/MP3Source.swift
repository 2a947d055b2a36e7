import PartyCastCore
import PartyCastMP3Parser

/// An MP3 stream as PCM: bytes from a `ByteSource` go through the parser and libmpg123, and the
/// result is trimmed to the encoder's real audio (LAME delay and padding) so the output is gapless.
///
/// Sample positions here are on the decoder's timeline: frame `f` of audio decodes to samples
/// `f * samplesPerFrame ..< (f + 1) * samplesPerFrame`, and the track's first real sample sits at
/// `encoderDelay + 529` (the layer III decoder's own delay).
public final class MP3Source: PCMSource {
    /// Layer III's synthesis delay, in samples; LAME's delay figure does not include it.
    static let decoderDelay = 529
    static let readSize = 16384

    private let bytes: ByteSource
    private var parser = MP3Parser()
    private let decoder: MPG123

    public private(set) var format: AudioFormat?
    public private(set) var tags = TrackTags()
    /// The ID3v2 tag's picture (front cover preferred), known once `prepare()` has returned.
    public var cover: CoverArt? { parser.cover }
    public private(set) var streamInfo: StreamInfo?
    private var samplesPerFrame = 1152
    private var firstAudioOffset: Int64?
    private var audioBytesSeen: Int64 = 0
    private var audioFramesSeen = 0

    /// Index of the next frame the decoder will see (on the decoder's frame timeline).
    private var nextFrame = 0
    /// Decoder-timeline samples before this are dropped (trimming and seek preroll).
    private var dropUntil = 0
    private var index: FrameIndex?
    private var reachedEnd = false

    /// Frames with a good sync and no decodable audio are counted, not fatal.
    public private(set) var undecodableFrames = 0
    public var skippedBytes: Int64 { parser.skippedBytes }

    public init(bytes: ByteSource) throws(PartyCastError) {
        self.bytes = bytes
        decoder = try MPG123()
    }

    public var isSeekable: Bool { bytes.canSeek }

    private var trimStart: Int {
        guard let delay = streamInfo?.encoderDelay else { return 0 }
        return delay + Self.decoderDelay
    }

    /// One past the last real sample on the decoder timeline, when the LAME tag says where it is.
    private var trimEnd: Int? {
        guard let info = streamInfo, let frames = info.frameCount, let padding = info.encoderPadding else { return nil }
        return frames * samplesPerFrame - padding + Self.decoderDelay
    }

    public var duration: Duration {
        if let end = trimEnd { return .exact(frames: end - trimStart) }
        if let frames = streamInfo?.frameCount { return .exact(frames: frames * samplesPerFrame - trimStart) }
        if let index, index.isComplete { return .exact(frames: index.count * samplesPerFrame - trimStart) }
        // A stream of known length without a header: average bitrate so far, refined as it plays.
        guard let total = bytes.length, let first = firstAudioOffset, audioFramesSeen > 0 else { return .unknown }
        let bytesPerFrame = Double(audioBytesSeen) / Double(audioFramesSeen)
        let frames = Double(total - first) / bytesPerFrame
        return .estimated(frames: Int(frames) * samplesPerFrame)
    }

    /// Parses the stream's start (tags, header, first frame) so format and duration are known
    /// before playback; for local files without a frame count, scans every frame for the duration
    /// (a remote file's is estimated instead, from the bitrate so far).
    public func prepare() throws(PartyCastError) {
        // The first frame's samples wait in `pending` for the first produce().
        while format == nil {
            guard try pump(into: &pending) else { break }
        }
        guard format != nil else {
            throw PartyCastError(.notAudio, "no decodable MPEG audio found; is this really an MP3 file?")
        }
        if streamInfo?.frameCount == nil, bytes.canSeek, !bytes.isRemote {
            index = try FrameIndex.scan(bytes)
            try bytes.seek(to: parser.bytesPushed)
        }
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

    /// Reads, parses and decodes the next frame into `output`; false at end of stream.
    private func pump(into output: inout [Float]) throws(PartyCastError) -> Bool {
        while true {
            if let event = try parser.next() {
                switch event {
                case .tags(let t): tags = t
                case .streamInfo(let info, let header):
                    streamInfo = info
                    samplesPerFrame = header.samplesPerFrame
                case .frame(let frame):
                    try decode(frame, into: &output)
                    return true
                }
                continue
            }
            if reachedEnd { return false }
            let chunk = try bytes.read(maxBytes: Self.readSize)
            if chunk.isEmpty {
                reachedEnd = true
                parser.finish()
            } else {
                parser.push(chunk)
            }
        }
    }

    private func decode(_ frame: MP3Frame, into decoded: inout [Float]) throws(PartyCastError) {
        if firstAudioOffset == nil {
            firstAudioOffset = frame.offset
            samplesPerFrame = frame.header.samplesPerFrame
        }
        audioBytesSeen += Int64(frame.bytes.count)
        audioFramesSeen += 1
        let frameStart = nextFrame * samplesPerFrame
        nextFrame += 1
        let before = decoded.count
        let produced = try decoder.decode(frame: frame.bytes, into: &decoded)
        if produced == 0 {
            undecodableFrames += 1
            return
        }
        let channels = decoder.channels
        if format == nil {
            format = AudioFormat(sampleRate: frame.header.sampleRate, channels: channels)
        }
        // Keep only samples in [max(trimStart, dropUntil), trimEnd).
        let keepFrom = max(trimStart, dropUntil) - frameStart
        let keepTo = (trimEnd ?? Int.max) - frameStart
        let head = min(max(keepFrom, 0), produced)
        let tail = min(max(keepTo, head), produced)
        decoded.removeSubrange((before + tail * channels)..<decoded.count)
        decoded.removeSubrange(before..<(before + head * channels))
    }

    /// Lands on the exact sample: restarts decoding a few frames earlier, enough to refill the bit
    /// reservoir and the synthesis filter history of the target frame, and drops the extra output.
    public func seek(toFrame frame: Int) throws(PartyCastError) {
        guard isSeekable else { throw PartyCastError(.invalidArgument, "this stream cannot seek") }
        let target = max(0, frame) + trimStart
        if bytes.isRemote {
            // Indexed only up to the target: the frames before it are all a seek needs.
            var partial = index ?? FrameIndex()
            try partial.extend(bytes, toCount: target / samplesPerFrame + 1)
            index = partial
        } else if index == nil {
            index = try FrameIndex.scan(bytes)
        }
        guard let index, index.count > 0 else { return }
        let targetFrame = min(target / samplesPerFrame, index.count)
        let startFrame = index.prerollStart(for: targetFrame)
        let offset = startFrame < index.count ? index.offsets[startFrame] : index.endOffset
        try bytes.seek(to: offset)
        parser = MP3Parser(startOffset: offset)
        try decoder.reset()
        pending.removeAll()
        reachedEnd = false
        nextFrame = startFrame
        dropUntil = target
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
