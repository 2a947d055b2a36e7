import PartyCastCore
import PartyCastMP3Parser

/// An MP3 stream's audio frames in order, each with its place on the decoder's timeline and the
/// part of its samples that is real audio (the LAME delay and padding trimmed, a seek's preroll
/// dropped): what decoding here (`MP3Source`) and passing the frames on (`MP3PacketSource`) share.
///
/// Sample positions are on the decoder's timeline: frame `f` of audio decodes to samples
/// `f * samplesPerFrame ..< (f + 1) * samplesPerFrame`, and the track's first real sample sits at
/// `encoderDelay + 529` (the layer III decoder's own delay).
final class MP3FrameReader {
    /// Layer III's synthesis delay, in samples; LAME's delay figure does not include it.
    static let decoderDelay = 529
    static let readSize = 16384

    /// An audio frame, and which of the samples it decodes to are kept.
    struct Frame {
        var frame: MP3Frame
        /// Its first sample on the decoder's timeline.
        var start: Int
        /// Kept samples, relative to `start`, before clamping to what the frame decoded to.
        var keepFrom: Int
        var keepTo: Int

        /// The kept part of `produced` decoded samples.
        func kept(of produced: Int) -> Range<Int> {
            let head = min(max(keepFrom, 0), produced)
            return head..<min(max(keepTo, head), produced)
        }
    }

    private let bytes: ByteSource
    private var parser = MP3Parser()
    private(set) var tags = TrackTags()
    private(set) var streamInfo: StreamInfo?
    private(set) var samplesPerFrame = 1152
    private var firstAudioOffset: Int64?
    private var audioBytesSeen: Int64 = 0
    private var audioFramesSeen = 0
    /// Index of the next frame on the decoder's frame timeline.
    private var nextFrame = 0
    /// Decoder-timeline samples before this are dropped (trimming and seek preroll).
    private var dropUntil = 0
    private var index: FrameIndex?
    private var reachedEnd = false

    init(bytes: ByteSource) { self.bytes = bytes }

    var cover: CoverArt? { parser.cover }
    var skippedBytes: Int64 { parser.skippedBytes }
    var isSeekable: Bool { bytes.canSeek }

    var trimStart: Int {
        guard let delay = streamInfo?.encoderDelay else { return 0 }
        return delay + Self.decoderDelay
    }

    /// One past the last real sample on the decoder timeline, when the LAME tag says where it is.
    private var trimEnd: Int? {
        guard let info = streamInfo, let frames = info.frameCount, let padding = info.encoderPadding else { return nil }
        return frames * samplesPerFrame - padding + Self.decoderDelay
    }

    var duration: Duration {
        if let end = trimEnd { return .exact(frames: end - trimStart) }
        if let frames = streamInfo?.frameCount { return .exact(frames: frames * samplesPerFrame - trimStart) }
        if let index, index.isComplete { return .exact(frames: index.count * samplesPerFrame - trimStart) }
        // A stream of known length without a header: average bitrate so far, refined as it plays.
        guard let total = bytes.length, let first = firstAudioOffset, audioFramesSeen > 0 else { return .unknown }
        let bytesPerFrame = Double(audioBytesSeen) / Double(audioFramesSeen)
        let frames = Double(total - first) / bytesPerFrame
        return .estimated(frames: Int(frames) * samplesPerFrame)
    }

    /// For a local file without a frame count, scans every frame for the exact duration (a remote
    /// file's is estimated instead, from the bitrate so far). Call once the first frame is read.
    func indexForDuration() throws(PartyCastError) {
        guard streamInfo?.frameCount == nil, bytes.canSeek, !bytes.isRemote else { return }
        index = try FrameIndex.scan(bytes)
        try bytes.seek(to: parser.bytesPushed)
    }

    /// Reads and parses on to the next audio frame; nil at the end of the stream.
    func next() throws(PartyCastError) -> Frame? {
        while true {
            if let event = try parser.next() {
                switch event {
                case .tags(let t): tags = t
                case .streamInfo(let info, let header):
                    streamInfo = info
                    samplesPerFrame = header.samplesPerFrame
                case .frame(let frame):
                    return place(frame)
                }
                continue
            }
            if reachedEnd { return nil }
            let chunk = try bytes.read(maxBytes: Self.readSize)
            if chunk.isEmpty {
                reachedEnd = true
                parser.finish()
            } else {
                parser.push(chunk)
            }
        }
    }

    private func place(_ frame: MP3Frame) -> Frame {
        if firstAudioOffset == nil {
            firstAudioOffset = frame.offset
            samplesPerFrame = frame.header.samplesPerFrame
        }
        audioBytesSeen += Int64(frame.bytes.count)
        audioFramesSeen += 1
        let start = nextFrame * samplesPerFrame
        nextFrame += 1
        return Frame(frame: frame, start: start, keepFrom: max(trimStart, dropUntil) - start, keepTo: (trimEnd ?? Int.max) - start)
    }

    /// Moves to where decoding must restart, with a fresh decoder, for the real audio's frame
    /// `frame` to come out exactly as in a decode from the start: a few frames earlier, enough to
    /// refill the bit reservoir and the synthesis filter history; the extra output is dropped.
    func seek(toFrame frame: Int) throws(PartyCastError) {
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
        reachedEnd = false
        nextFrame = startFrame
        dropUntil = target
    }
}
