import PartyCastCore
import PartyCastMP3Parser

/// A stream format PartyCast decodes: recognised by its first bytes, never by a name.
public protocol SniffedDecoder: SendableMetatype {
    /// What a person calls it ("FLAC"), for messages.
    static var formatName: String { get }
    /// Whether the stream starts as this format does. `head` is the stream's first bytes after any
    /// ID3v2 tag (up to `DecoderRegistry.headLength`, fewer when the stream is shorter).
    static func recognises(_ head: ArraySlice<UInt8>) -> Bool
    /// A decoder reading `bytes` from their start (the ID3v2 tag included).
    static func open(_ bytes: ByteSource) throws(PartyCastError) -> PCMSource
}

/// Picks the decoder for a stream by sniffing its start. The one place a format is chosen: a new
/// format is a `SniffedDecoder` added to `decoders`.
public enum DecoderRegistry {
    /// Bytes looked at after an ID3v2 tag: enough for three MP3 frames at 320 kbit/s and 8 kHz.
    public static let headLength = 16384
    /// An ID3v2 tag longer than this on a stream that cannot seek is not buffered to look past it.
    static let maxBufferedTag = 8 << 20

    /// In the order they are tried: containers with a magic number first, MP3 (which searches for
    /// a frame sync through any garbage) last.
    /// AAC before MP3: its check (three ADTS frames in a row, layer bits 00) never takes an MP3.
    public static let decoders: [any SniffedDecoder.Type] = [
        FLACSource.self, VorbisSource.self, OpusSource.self, WAVSource.self, AACSource.self, MP3Source.self,
    ]

    /// - Parameter unrecognised: what bytes of no known format are taken for (raw PCM from a pipe);
    ///   nil to refuse them with a line saying what they look like.
    public static func open(_ bytes: ByteSource,
                            unrecognised: ((ByteSource) throws(PartyCastError) -> PCMSource)? = nil) throws(PartyCastError) -> PCMSource {
        let replay = ReplayingByteSource(bytes)
        let head = try replay.head(afterTagsUpTo: headLength, maxTag: maxBufferedTag)
        let decoder = decoders.first { $0.recognises(head) }
        if decoder == nil, unrecognised == nil || head.isEmpty {
            throw PartyCastError(.notAudio, "not audio PartyCast can play (\(describe(head))); it plays \(decoders.map { $0.formatName }.joined(separator: ", "))")
        }
        try replay.rewind()
        let stream = replay.isReplaying ? replay : bytes
        let decoded: PCMSource
        if let decoder { decoded = try decoder.open(stream) } else { decoded = try unrecognised!(stream) }
        return bytes.streamTags == nil && bytes.wakeReader == nil ? decoded : TransportedStreamSource(decoded, transport: bytes)
    }

    /// An MP3 stream's own frames, for `--codec mp3`; any other format is refused with a line naming it.
    public static func openMP3Frames(_ bytes: ByteSource) throws(PartyCastError) -> PacketSource {
        let replay = ReplayingByteSource(bytes)
        let head = try replay.head(afterTagsUpTo: headLength, maxTag: maxBufferedTag)
        let format = decoders.first { $0.recognises(head) }
        guard format == MP3Source.self else {
            let what = format.map { "it is \($0.formatName)" } ?? describe(head)
            throw PartyCastError(.unsupportedFormat, "\(what), and --codec mp3 sends MP3 files only, as they are (use --codec opus or pcm to mix formats)")
        }
        try replay.rewind()
        return MP3PacketSource(bytes: replay.isReplaying ? replay : bytes)
    }

    /// What the bytes look like, when they are not audio: the usual mistakes named.
    static func describe(_ head: ArraySlice<UInt8>) -> String {
        let text = String(decoding: head.prefix(512), as: UTF8.self).lowercased()
        if head.isEmpty { return "it is empty" }
        if text.contains("<html") || text.contains("<!doctype") { return "it is an HTML page" }
        if text.hasPrefix("#extm3u") || text.hasPrefix("[playlist]") { return "it is a playlist" }
        return "its first bytes match no format"
    }
}

/// Hands a stream's first bytes to the sniffer and then to the decoder too: a seekable stream is
/// sought back to 0, a live one replays what was read for sniffing before reading on.
final class ReplayingByteSource: ByteSource {
    private let source: ByteSource
    private var buffered: [UInt8] = []
    private var replayPosition = 0
    private(set) var isReplaying = false

    init(_ source: ByteSource) { self.source = source }

    var length: Int64? { source.length }
    var canSeek: Bool { source.canSeek }
    var streamTags: TrackTags? { source.streamTags }
    var wakeReader: (@Sendable () -> Void)? { source.wakeReader }
    var isRemote: Bool { source.isRemote }

    /// Reads the stream's start: an ID3v2 tag (up to `maxTag` bytes of it) and `length` bytes after
    /// it, fewer when the stream ends sooner. Returns the part after the tag.
    func head(afterTagsUpTo length: Int, maxTag: Int) throws(PartyCastError) -> ArraySlice<UInt8> {
        try fill(to: 10)
        var tagEnd = 0
        if buffered.count >= 10, buffered[0] == 0x49, buffered[1] == 0x44, buffered[2] == 0x33 {  // "ID3"
            let size = buffered[6...9].reduce(0) { $0 << 7 | Int($1 & 0x7F) }
            tagEnd = 10 + size + (buffered[5] & 0x10 != 0 ? 10 : 0)
            if let length = source.length, Int64(tagEnd) >= length {
                throw PartyCastError(.notAudio, "its ID3v2 tag claims \(tagEnd) bytes, as much as or more than the \(length) the stream holds: no audio after it")
            }
            if tagEnd > maxTag {
                guard source.canSeek else {
                    throw PartyCastError(.unsupportedFormat, "the stream starts with an ID3 tag of \(tagEnd >> 20) MiB, too long to look past on a stream that cannot seek")
                }
                try source.seek(to: Int64(tagEnd))
                buffered = []
                try fill(to: length)
                return buffered[...]
            }
        }
        try fill(to: tagEnd + length)
        return buffered[min(tagEnd, buffered.count)...]
    }

    private func fill(to count: Int) throws(PartyCastError) {
        while buffered.count < count {
            let piece = try source.read(maxBytes: count - buffered.count)
            if piece.isEmpty { return }
            buffered += piece
        }
    }

    /// Sets the stream back to its first byte for the decoder.
    func rewind() throws(PartyCastError) {
        if source.canSeek {
            try source.seek(to: 0)
        } else {
            isReplaying = true
        }
    }

    func read(maxBytes: Int) throws(PartyCastError) -> [UInt8] {
        guard isReplaying, replayPosition < buffered.count else { return try source.read(maxBytes: maxBytes) }
        let end = min(buffered.count, replayPosition + maxBytes)
        defer {
            replayPosition = end
            if end == buffered.count { buffered = [] ; replayPosition = 0; isReplaying = false }
        }
        return Array(buffered[replayPosition..<end])
    }

    func seek(to offset: Int64) throws(PartyCastError) {
        isReplaying = false
        buffered = []
        try source.seek(to: offset)
    }
}

/// A decoded live stream: its tags come from the transport as they change (an ICY station's
/// titles), falling back to the stream's own, and a read waiting on the transport can be woken.
final class TransportedStreamSource: PCMSource {
    private let decoded: PCMSource
    private let transport: ByteSource

    init(_ decoded: PCMSource, transport: ByteSource) {
        self.decoded = decoded
        self.transport = transport
    }

    var tags: TrackTags {
        guard let live = transport.streamTags else { return decoded.tags }
        let own = decoded.tags
        return TrackTags(title: live.title ?? own.title, artist: live.artist ?? own.artist, album: live.album ?? own.album,
                         station: live.station ?? own.station)
    }

    var format: AudioFormat? { decoded.format }
    var duration: Duration { decoded.duration }
    var isSeekable: Bool { decoded.isSeekable }
    var skippedBytes: Int64 { decoded.skippedBytes }
    var concealedPackets: Int { decoded.concealedPackets }
    var cover: CoverArt? { decoded.cover }
    var wakeProducer: (@Sendable () -> Void)? { decoded.wakeProducer ?? transport.wakeReader }
    var isRemote: Bool { transport.isRemote }
    func prepare() throws(PartyCastError) { try decoded.prepare() }
    func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool { try decoded.produce(into: &buffer) }
    func seek(toFrame frame: Int) throws(PartyCastError) { try decoded.seek(toFrame: frame) }
}
