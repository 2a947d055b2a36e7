import CFAAD2
import PartyCastCore
import PartyCastMP3Parser

/// libfaad, opened by the first AAC stream.
private let faadLibrary = loadCLibrary("libfaad", code: .decoder, partycast_faad_open)

/// An AAC stream in ADTS framing (AAC-LC, and HE-AAC v1/v2 as libfaad2 decodes them) as PCM.
/// Frames are found in Swift (`ADTSScanner`), which skips garbage and resyncs after a reconnect,
/// and handed to libfaad2 one at a time.
///
/// Gapless: ADTS carries no encoder delay or padding. libfaad2 itself drops its first frame's
/// output (1024 samples, 2048 with SBR), which is the priming of the common encoders (ffmpeg,
/// FAAC); nothing else is trimmed, so the encoder's end padding is played.
///
/// Timeline: after a fresh decoder start at ADTS frame `s`, the first output sample is sample
/// `s * samplesPerFrame`, frame `s`'s own output being the one libfaad2 drops. Seeking uses that:
/// it restarts `preroll` frames before the target and drops up to the sample, which is
/// bit-identical to a decode from the start for AAC-LC without PNS (noise substitution draws from
/// a random generator that runs through the whole stream) and close, not exact, with SBR.
public final class AACSource: PCMSource {
    static let readSize = 16384
    /// An ID3v2 tag up to this size is read for its tags; a larger one is skipped.
    static let maxParsedTag = 8 << 20

    private let bytes: ByteSource
    private let faad: PartyCastFAADFunctions
    private var scanner = ADTSScanner(startOffset: 0)
    private var decoder: NeAACDecHandle?
    /// Where the audio starts: after any ID3v2 tag.
    private var audioStart: Int64 = 0
    /// Output frames per ADTS frame (1024, or 2048 when SBR doubles the rate); known with `format`.
    private var samplesPerFrame = 0
    /// Timeline position of the next sample the decoder outputs, and where output starts counting.
    private var outputPosition = 0
    private var dropUntil = 0
    /// Offsets of every ADTS frame, for seeking and the exact duration (seekable sources only).
    private var index: [Int64]?
    private var pending: [Float] = []
    private var isPrepared = false

    public private(set) var format: AudioFormat?
    public private(set) var tags = TrackTags()
    public private(set) var cover: CoverArt?
    /// Frames libfaad2 could not decode, and frames whose channel count differs from the stream's.
    public private(set) var concealedPackets = 0
    public var skippedBytes: Int64 { scanner.skippedBytes }
    public var isSeekable: Bool { bytes.canSeek }
    public var wakeProducer: (@Sendable () -> Void)? { bytes.wakeReader }

    public var duration: Duration {
        guard let index, samplesPerFrame > 0 else { return .unknown }
        return .exact(frames: max(index.count - 1, 0) * samplesPerFrame)
    }

    public init(bytes: ByteSource) throws(PartyCastError) {
        self.bytes = bytes
        faad = try faadLibrary.get()
    }

    deinit { if let decoder { faad.NeAACDecClose(decoder) } }

    public func prepare() throws(PartyCastError) {
        guard !isPrepared else { return }
        isPrepared = true
        try readID3Tag()
        while format == nil {
            guard try decodeNextFrame(into: &pending) else {
                throw PartyCastError(.notAudio, "no decodable AAC (ADTS) frames found")
            }
        }
        if bytes.canSeek {
            index = try scanIndex()
            try bytes.seek(to: scanner.nextReadOffset)
        }
    }

    /// Reads an ID3v2 tag at the start (ADTS has no tags of its own) through the MP3 parser's ID3
    /// reader, and sets the scanner where the audio starts.
    private func readID3Tag() throws(PartyCastError) {
        var head: [UInt8] = []
        while head.count < 10 {
            let piece = try bytes.read(maxBytes: 10 - head.count)
            if piece.isEmpty { break }
            head += piece
        }
        guard head.count == 10, head.starts(with: Array("ID3".utf8)) else {
            scanner = ADTSScanner(startOffset: 0)
            scanner.push(head)
            return
        }
        let size = head[6...9].reduce(0) { $0 << 7 | Int($1 & 0x7F) } + (head[5] & 0x10 != 0 ? 10 : 0)
        audioStart = Int64(10 + size)
        scanner = ADTSScanner(startOffset: audioStart)
        var tag = head
        while tag.count < 10 + size {
            let piece = try bytes.read(maxBytes: min(10 + size - tag.count, Self.readSize))
            if piece.isEmpty { break }
            if size <= Self.maxParsedTag { tag += piece }
        }
        guard tag.count == 10 + size else { return }
        var parser = MP3Parser()
        parser.push(tag)
        parser.finish()
        // The parser reports the tag, then (no MP3 frames following) an error that is not ours.
        while case .tags(let found)? = try? parser.next() { tags = found }
        cover = parser.cover
    }

    public func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool {
        try prepare()
        if !pending.isEmpty {
            buffer.append(contentsOf: pending)
            pending.removeAll(keepingCapacity: true)
            return true
        }
        let start = buffer.count
        while buffer.count == start {
            guard try decodeNextFrame(into: &buffer) else { return false }
        }
        return true
    }

    /// Finds, decodes and trims the next frame; false at end of stream.
    private func decodeNextFrame(into output: inout [Float]) throws(PartyCastError) -> Bool {
        guard let frame = try nextFrame() else { return false }
        if decoder == nil { try startDecoder(with: frame) }
        guard let decoder else { return true }
        var info = NeAACDecFrameInfo()
        let decoded = frame.withUnsafeBufferPointer {
            faad.NeAACDecDecode(decoder, &info, UnsafeMutablePointer(mutating: $0.baseAddress), UInt($0.count))
        }
        guard info.error == 0, let decoded else {
            concealedPackets += 1
            return true
        }
        let channels = Int(info.channels)
        let frames = channels > 0 ? Int(info.samples) / channels : 0
        guard frames > 0 else { return true }
        if format == nil {
            format = AudioFormat(sampleRate: Int(info.samplerate), channels: channels)
            samplesPerFrame = frames
        }
        guard channels == format?.channels else {
            concealedPackets += 1
            return true
        }
        let position = outputPosition
        outputPosition += frames
        let skip = min(max(dropUntil - position, 0), frames)
        let samples = decoded.assumingMemoryBound(to: Float.self)
        output.append(contentsOf: UnsafeBufferPointer(start: samples + skip * channels, count: (frames - skip) * channels))
        return true
    }

    private func nextFrame() throws(PartyCastError) -> [UInt8]? {
        while true {
            if let frame = scanner.next() { return Array(frame) }
            if scanner.isFinished { return nil }
            let chunk = try bytes.read(maxBytes: Self.readSize)
            if chunk.isEmpty { scanner.finish() } else { scanner.push(chunk) }
        }
    }

    /// A fresh libfaad2 decoder, configured by `frame`'s ADTS header; its first frame's output is dropped.
    private func startDecoder(with frame: [UInt8]) throws(PartyCastError) {
        if let decoder { faad.NeAACDecClose(decoder) }
        guard let handle = faad.NeAACDecOpen() else { throw PartyCastError(.decoder, "libfaad2 could not start") }
        decoder = handle
        if let config = faad.NeAACDecGetCurrentConfiguration(handle) {
            config.pointee.outputFormat = UInt8(FAAD_FMT_FLOAT)
            faad.NeAACDecSetConfiguration(handle, config)
        }
        var rate: UInt = 0
        var channels: UInt8 = 0
        let result = frame.withUnsafeBufferPointer {
            faad.NeAACDecInit(handle, UnsafeMutablePointer(mutating: $0.baseAddress), UInt($0.count), &rate, &channels)
        }
        if result < 0 {
            faad.NeAACDecClose(handle)
            decoder = nil
            concealedPackets += 1
        }
    }

    /// Every frame's offset, by a pass of the same scanner over the whole file.
    private func scanIndex() throws(PartyCastError) -> [Int64] {
        try bytes.seek(to: audioStart)
        var indexScanner = ADTSScanner(startOffset: audioStart)
        var offsets: [Int64] = []
        while true {
            while let offset = indexScanner.nextOffset() { offsets.append(offset) }
            if indexScanner.isFinished { return offsets }
            let chunk = try bytes.read(maxBytes: 1 << 16)
            if chunk.isEmpty { indexScanner.finish() } else { indexScanner.push(chunk) }
        }
    }

    public func seek(toFrame frame: Int) throws(PartyCastError) {
        guard isSeekable else { throw PartyCastError(.invalidArgument, "this stream cannot seek") }
        try prepare()
        guard let index, samplesPerFrame > 0 else { return }
        // SBR's filter banks and envelopes reach further back than the MDCT overlap of plain AAC.
        let preroll = samplesPerFrame > 1024 ? 8 : 2
        let target = max(frame, 0)
        let targetFrame = min(target / samplesPerFrame + 1, index.count)
        let startFrame = max(targetFrame - preroll, 0)
        let offset = startFrame < index.count ? index[startFrame] : scanner.nextReadOffset
        try bytes.seek(to: offset)
        scanner = ADTSScanner(startOffset: offset)
        if let decoder { faad.NeAACDecClose(decoder) }
        decoder = nil
        pending.removeAll(keepingCapacity: true)
        outputPosition = startFrame * samplesPerFrame
        dropUntil = target
    }
}

extension AACSource: SniffedDecoder {
    public static var formatName: String { "AAC (ADTS)" }

    /// Three ADTS frames back to back from the first byte; fewer only when `head` ends where the
    /// next header would be. MP3 (layer bits not 00) never matches.
    public static func recognises(_ head: ArraySlice<UInt8>) -> Bool {
        var p = head.startIndex
        var frames = 0
        var previous: ADTSHeader?
        while frames < 3, let header = ADTSHeader(head, at: p), previous.map(header.continues) ?? true {
            previous = header
            frames += 1
            p += header.frameLength
        }
        return frames == 3 || frames > 0 && p + 7 > head.endIndex
    }

    public static func open(_ bytes: ByteSource) throws(PartyCastError) -> PCMSource { try AACSource(bytes: bytes) }
}

/// The 7-byte fixed part of an ADTS frame header, with the fields that must stay the same from
/// frame to frame of one stream.
struct ADTSHeader {
    let profile: UInt8
    let samplingIndex: UInt8
    let channelConfiguration: UInt8
    let frameLength: Int

    /// The header at `p`, nil when the bytes there are not a plausible one: sync 0xFFF, layer 00,
    /// a defined sampling rate, one raw data block, a length that covers its own header.
    init?(_ bytes: ArraySlice<UInt8>, at i: Int) {
        guard i >= bytes.startIndex, bytes.endIndex - i >= 7, bytes[i] == 0xFF, bytes[i + 1] & 0xF6 == 0xF0 else { return nil }
        profile = bytes[i + 2] >> 6
        samplingIndex = bytes[i + 2] >> 2 & 0x0F
        channelConfiguration = (bytes[i + 2] & 1) << 2 | bytes[i + 3] >> 6
        frameLength = Int(bytes[i + 3] & 3) << 11 | Int(bytes[i + 4]) << 3 | Int(bytes[i + 5]) >> 5
        let headerLength = bytes[i + 1] & 1 == 1 ? 7 : 9
        guard samplingIndex < 12, frameLength > headerLength, bytes[i + 6] & 3 == 0 else { return nil }
    }

    func continues(_ other: ADTSHeader) -> Bool {
        profile == other.profile && samplingIndex == other.samplingIndex && channelConfiguration == other.channelConfiguration
    }
}

/// Finds ADTS frames in bytes pushed as they arrive. A frame counts only when the next one's header
/// follows it directly (or the stream ends there) and matches the stream's first frame, so garbage,
/// a damaged frame before it and a reconnect's partial frame are skipped, the bytes counted.
struct ADTSScanner {
    private var buffer: [UInt8] = []
    private var start = 0
    /// Stream offset of `buffer[0]`.
    private var bufferOffset: Int64
    private var reference: ADTSHeader?
    private(set) var isFinished = false
    private(set) var skippedBytes: Int64 = 0

    init(startOffset: Int64) { bufferOffset = startOffset }

    /// Where the stream continues after the bytes pushed so far.
    var nextReadOffset: Int64 { bufferOffset + Int64(buffer.count) }

    mutating func push(_ bytes: [UInt8]) {
        if start > 1 << 16 {
            buffer.removeFirst(start)
            bufferOffset += Int64(start)
            start = 0
        }
        buffer += bytes
    }

    mutating func finish() { isFinished = true }

    /// The next frame's bytes; nil when more must be pushed (or, once finished, at the end).
    mutating func next() -> ArraySlice<UInt8>? {
        guard let range = nextRange() else { return nil }
        return buffer[range]
    }

    /// The next frame's stream offset, as `next` would find it.
    mutating func nextOffset() -> Int64? {
        guard let range = nextRange() else { return nil }
        return bufferOffset + Int64(range.lowerBound)
    }

    private mutating func nextRange() -> Range<Int>? {
        while buffer.count - start >= 7 {
            guard let header = ADTSHeader(buffer[...], at: start), reference.map(header.continues) ?? true else {
                skip(1)
                continue
            }
            let end = start + header.frameLength
            if end + 7 > buffer.count {
                guard isFinished else { return nil }
                // At the end only a frame that ends within the stream counts (a truncated one is dropped).
                guard end <= buffer.count else {
                    skip(1)
                    continue
                }
            } else if !(ADTSHeader(buffer[...], at: end).map { $0.continues(header) } ?? false) {
                skip(1)
                continue
            }
            reference = reference ?? header
            defer { start = end }
            return start..<end
        }
        if isFinished { skip(buffer.count - start) }
        return nil
    }

    private mutating func skip(_ count: Int) {
        start += count
        skippedBytes += Int64(count)
    }
}
