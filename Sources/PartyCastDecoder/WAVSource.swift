import PartyCastCore

/// A RIFF/WAVE (or RF64) file as PCM, read in Swift: integer PCM in 8-, 16-, 24- and 32-bit
/// containers, IEEE float 32 and 64, plain or WAVE_FORMAT_EXTENSIBLE. A data size of 0 or
/// 0xFFFFFFFF (what a writer that could not go back leaves) means "until the end of the stream".
public final class WAVSource: PCMSource {
    enum Encoding { case unsigned8, signed16, signed24, signed32, float32, float64 }

    /// Frames read per `produce`.
    static let framesPerRead = 4096
    /// A LIST chunk larger than this is skipped rather than read for its INFO tags.
    static let maxListChunk: UInt64 = 64 << 10
    /// Beyond any real file's (768 kHz, 32 channels): headers claiming more are not believed.
    static let maxSampleRate = 768_000
    static let maxChannels = 32

    private let bytes: ByteSource
    /// Byte offset in the stream of the next byte `bytes` will give.
    private var position: Int64 = 0
    /// Bytes read but not yet used: header bytes while parsing, then a partial frame.
    private var carry: [UInt8] = []
    private var encoding = Encoding.signed16
    private var blockAlign = 0
    private var dataStart: Int64 = 0
    /// One past the data's last byte; nil when the header says "until the end of the stream".
    private var dataEnd: Int64?
    private var isPrepared = false

    public private(set) var format: AudioFormat?
    public private(set) var tags = TrackTags()
    public var isSeekable: Bool { bytes.canSeek }
    public var wakeProducer: (@Sendable () -> Void)? { bytes.wakeReader }

    public var duration: Duration {
        guard blockAlign > 0 else { return .unknown }
        if let dataEnd { return .exact(frames: Int((dataEnd - dataStart) / Int64(blockAlign))) }
        guard let length = bytes.length, length > dataStart else { return .unknown }
        return .estimated(frames: Int((length - dataStart) / Int64(blockAlign)))
    }

    public init(bytes: ByteSource) { self.bytes = bytes }

    /// Headerless PCM in a layout given from outside (raw PCM from a pipe): the same samples as a
    /// WAV file's data chunk, read until the stream ends.
    public init(bytes: ByteSource, raw layout: RawPCMFormat) {
        self.bytes = bytes
        encoding = layout.bitsPerSample == 24 ? .signed24 : layout.bitsPerSample == 32 ? .signed32 : .signed16
        blockAlign = layout.bytesPerFrame
        format = AudioFormat(sampleRate: layout.sampleRate, channels: layout.channels)
        isPrepared = true
    }

    // MARK: Header

    public func prepare() throws(PartyCastError) {
        guard !isPrepared else { return }
        let riff = try take(12)
        guard riff.count == 12, riff[8..<12].elementsEqual("WAVE".utf8),
              riff[0..<4].elementsEqual("RIFF".utf8) || riff[0..<4].elementsEqual("RF64".utf8) else {
            throw PartyCastError(.notAudio, "not a WAV file (no RIFF/WAVE header)")
        }
        var ds64DataSize: UInt64?
        while true {
            let header = try take(8)
            guard header.count == 8 else {
                throw PartyCastError(.notAudio, "the WAV file ends before its audio (no data chunk)")
            }
            let id = String(decoding: header[0..<4], as: UTF8.self)
            let size = UInt64(Self.le32(header, 4))
            let padded = size + (size & 1)
            switch id {
            case "fmt ":
                let body = try take(Int(min(size, 40)))
                try skip(padded - UInt64(body.count))
                try readFormat(body)
            case "ds64":
                let body = try take(Int(min(size, 28)))
                try skip(padded - UInt64(body.count))
                if body.count >= 16 { ds64DataSize = UInt64(Self.le32(body, 8)) | UInt64(Self.le32(body, 12)) << 32 }
            case "LIST" where size <= Self.maxListChunk:
                let body = try take(Int(size))
                try skip(padded - UInt64(body.count))
                readInfo(body)
            case "data":
                guard format != nil else { throw PartyCastError(.notAudio, "the WAV file has no fmt chunk before its data") }
                dataStart = position - Int64(carry.count)
                let claimed = size == 0xFFFF_FFFF ? ds64DataSize : (size == 0 ? nil : size)
                if let claimed, claimed <= UInt64(Int64.max - dataStart) {
                    // A truncated file ends where it ends, whatever the header said.
                    dataEnd = min(dataStart + Int64(claimed), bytes.length ?? .max)
                }
                isPrepared = true
                return
            default:
                try skip(padded)
            }
        }
    }

    private func readFormat(_ body: [UInt8]) throws(PartyCastError) {
        guard body.count >= 16 else { throw PartyCastError(.notAudio, "the WAV file's fmt chunk is too short") }
        var tag = Self.le16(body, 0)
        let channels = Int(Self.le16(body, 2))
        let rate = Int(Self.le32(body, 4))
        let align = Int(Self.le16(body, 12))
        if tag == 0xFFFE {  // WAVE_FORMAT_EXTENSIBLE: the real format is the sub-format GUID's first two bytes.
            guard body.count >= 26 else { throw PartyCastError(.notAudio, "the WAV file's extensible fmt chunk is too short") }
            tag = Self.le16(body, 24)
        }
        guard (1...Self.maxChannels).contains(channels), (1...Self.maxSampleRate).contains(rate), align > 0, align % channels == 0 else {
            throw PartyCastError(.unsupportedFormat, "the WAV header claims \(channels) channels at \(rate) Hz with \(align)-byte frames")
        }
        switch (tag, align / channels) {
        case (1, 1): encoding = .unsigned8
        case (1, 2): encoding = .signed16
        case (1, 3): encoding = .signed24
        case (1, 4): encoding = .signed32
        case (3, 4): encoding = .float32
        case (3, 8): encoding = .float64
        default:
            throw PartyCastError(.unsupportedFormat, "WAV format \(tag) with \(align / channels * 8)-bit samples is not supported (PCM 8/16/24/32-bit and float 32/64 are)")
        }
        blockAlign = align
        format = AudioFormat(sampleRate: rate, channels: channels)
    }

    /// INAM, IART and IPRD of a LIST/INFO chunk.
    private func readInfo(_ body: [UInt8]) {
        guard body.count >= 4, body[0..<4].elementsEqual("INFO".utf8) else { return }
        var p = 4
        while p + 8 <= body.count {
            let id = String(decoding: body[p..<p + 4], as: UTF8.self)
            let size = Int(Self.le32(body, p + 4))
            let start = p + 8
            guard size <= body.count - start else { return }
            let text = String(untrusted: String(decoding: body[start..<start + size].prefix { $0 != 0 }, as: UTF8.self))
            switch id {
            case "INAM" where !text.isEmpty: tags.title = text
            case "IART" where !text.isEmpty: tags.artist = text
            case "IPRD" where !text.isEmpty: tags.album = text
            default: break
            }
            p = start + size + (size & 1)
        }
    }

    /// The next `count` bytes (fewer at the end of the stream), header bytes already read first.
    private func take(_ count: Int) throws(PartyCastError) -> [UInt8] {
        while carry.count < count {
            let piece = try bytes.read(maxBytes: count - carry.count)
            if piece.isEmpty { break }
            carry += piece
            position += Int64(piece.count)
        }
        let result = Array(carry.prefix(count))
        carry.removeFirst(result.count)
        return result
    }

    /// Moves past `count` bytes: a seek when the source can, reading them otherwise.
    private func skip(_ count: UInt64) throws(PartyCastError) {
        var left = count
        let buffered = min(UInt64(carry.count), left)
        carry.removeFirst(Int(buffered))
        left -= buffered
        if left == 0 { return }
        if bytes.canSeek, let length = bytes.length {
            position = left > UInt64(max(length - position, 0)) ? length : position + Int64(left)
            try bytes.seek(to: position)
            return
        }
        while left > 0 {
            let piece = try bytes.read(maxBytes: Int(min(left, 1 << 16)))
            if piece.isEmpty { return }
            left -= UInt64(piece.count)
            position += Int64(piece.count)
        }
    }

    // MARK: Samples

    public func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool {
        try prepare()
        guard let format else { return false }
        var wanted = Self.framesPerRead * blockAlign - carry.count
        if let dataEnd { wanted = Int(min(Int64(wanted), dataEnd - position)) }
        while carry.count < blockAlign, wanted > 0 {
            let piece = try bytes.read(maxBytes: wanted)
            if piece.isEmpty { break }
            carry += piece
            position += Int64(piece.count)
            wanted -= piece.count
        }
        let frames = carry.count / blockAlign
        guard frames > 0 else { return false }
        convert(frames * format.channels, into: &buffer)
        carry.removeFirst(frames * blockAlign)
        return true
    }

    private func convert(_ samples: Int, into buffer: inout [Float]) {
        let start = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: samples))
        let encoding = self.encoding
        carry.withUnsafeBytes { raw in
            buffer.withUnsafeMutableBufferPointer { out in
                for i in 0..<samples {
                    let value: Float
                    switch encoding {
                    case .unsigned8: value = (Float(raw[i]) - 128) / 128
                    case .signed16: value = Float(Int16(littleEndian: raw.loadUnaligned(fromByteOffset: i * 2, as: Int16.self))) / 32768
                    case .signed24:
                        let b = i * 3
                        let word = Int32(bitPattern: UInt32(raw[b]) << 8 | UInt32(raw[b + 1]) << 16 | UInt32(raw[b + 2]) << 24)
                        value = Float(word >> 8) / 8_388_608
                    case .signed32: value = Float(Int32(littleEndian: raw.loadUnaligned(fromByteOffset: i * 4, as: Int32.self))) / 2_147_483_648
                    case .float32: value = Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self)))
                    case .float64: value = Float(Double(bitPattern: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self))))
                    }
                    out[start + i] = value
                }
            }
        }
    }

    /// Frame arithmetic: the data's start plus whole frames, no further than its end.
    public func seek(toFrame frame: Int) throws(PartyCastError) {
        guard isSeekable else { throw PartyCastError(.invalidArgument, "this stream cannot seek") }
        try prepare()
        let (offset, overflow) = Int64(max(frame, 0)).multipliedReportingOverflow(by: Int64(blockAlign))
        let end = dataEnd ?? bytes.length ?? .max
        let target = overflow || offset > end - dataStart ? end : dataStart + offset
        try bytes.seek(to: target)
        position = target
        carry.removeAll(keepingCapacity: true)
    }

    private static func le16(_ b: [UInt8], _ at: Int) -> UInt16 { UInt16(b[at]) | UInt16(b[at + 1]) << 8 }
    private static func le32(_ b: [UInt8], _ at: Int) -> UInt32 {
        UInt32(b[at]) | UInt32(b[at + 1]) << 8 | UInt32(b[at + 2]) << 16 | UInt32(b[at + 3]) << 24
    }
}

extension WAVSource: SniffedDecoder {
    public static var formatName: String { "WAV" }

    public static func recognises(_ head: ArraySlice<UInt8>) -> Bool {
        let h = Array(head.prefix(12))
        return h.count == 12 && h[8..<12].elementsEqual("WAVE".utf8)
            && (h[0..<4].elementsEqual("RIFF".utf8) || h[0..<4].elementsEqual("RF64".utf8))
    }

    public static func open(_ bytes: ByteSource) throws(PartyCastError) -> PCMSource { WAVSource(bytes: bytes) }
}
