/// What a Xing/Info, LAME or VBRI header in the first frame says about the whole stream.
public struct StreamInfo: Sendable, Equatable {
    public enum Kind: String, Sendable { case xing = "Xing", info = "Info", vbri = "VBRI" }
    public var kind: Kind
    /// Audio frames in the stream, the header frame excluded.
    public var frameCount: Int?
    public var byteCount: Int?
    /// 100 entries, each a byte position as a fraction (0…255) of `byteCount`, at 1 % steps of duration.
    public var tableOfContents: [UInt8]?
    /// Samples the encoder added in front of and after the audio (LAME tag), for gapless output.
    public var encoderDelay: Int?
    public var encoderPadding: Int?

    /// Reads a Xing/Info or VBRI header from a complete first frame; nil when there is none.
    public static func parse(frame: [UInt8], header: FrameHeader) -> StreamInfo? {
        let xingOffset = header.sideInfoOffset + header.sideInfoLength
        if let info = parseXing(frame, at: xingOffset) { return info }
        return parseVBRI(frame, at: 4 + 32)
    }

    static func bigEndian(_ b: [UInt8], _ at: Int, _ count: Int) -> Int {
        var value = 0
        for i in 0..<count { value = value << 8 | Int(b[at + i]) }
        return value
    }

    static func parseXing(_ b: [UInt8], at start: Int) -> StreamInfo? {
        guard b.count >= start + 8 else { return nil }
        let tag = String(decoding: b[start..<start + 4], as: UTF8.self)
        guard let kind = tag == "Xing" ? Kind.xing : tag == "Info" ? Kind.info : nil else { return nil }
        let flags = bigEndian(b, start + 4, 4)
        var info = StreamInfo(kind: kind)
        var p = start + 8
        if flags & 1 != 0 {
            guard b.count >= p + 4 else { return nil }
            info.frameCount = bigEndian(b, p, 4); p += 4
        }
        if flags & 2 != 0 {
            guard b.count >= p + 4 else { return nil }
            info.byteCount = bigEndian(b, p, 4); p += 4
        }
        if flags & 4 != 0 {
            guard b.count >= p + 100 else { return nil }
            info.tableOfContents = Array(b[p..<p + 100]); p += 100
        }
        if flags & 8 != 0 { p += 4 }
        // LAME extension: 9-byte encoder name, then 12 more bytes, then delay and padding (12 bits each).
        if b.count >= p + 24 {
            let delayAndPadding = bigEndian(b, p + 21, 3)
            let encoder = b[p..<p + 4]
            if encoder.elementsEqual("LAME".utf8) || encoder.elementsEqual("Lavf".utf8) || encoder.elementsEqual("Lavc".utf8) {
                info.encoderDelay = delayAndPadding >> 12
                info.encoderPadding = delayAndPadding & 0xFFF
            }
        }
        return info
    }

    static func parseVBRI(_ b: [UInt8], at start: Int) -> StreamInfo? {
        guard b.count >= start + 18, b[start..<start + 4].elementsEqual("VBRI".utf8) else { return nil }
        var info = StreamInfo(kind: .vbri)
        info.byteCount = bigEndian(b, start + 10, 4)
        info.frameCount = bigEndian(b, start + 14, 4)
        return info
    }

    public init(kind: Kind) { self.kind = kind }
}
