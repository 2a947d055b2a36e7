import PartyCastCore

/// Decoding of the pieces of ID3 tags the parser keeps.
enum ID3 {
    /// Text frames longer than this are skipped rather than kept.
    static let maxTextFrame = 4096
    /// Pictures larger than this are skipped: a cover is a few hundred KiB, and the parser holds
    /// a picture's whole frame in memory before decoding it.
    static let maxPictureFrame = 4 << 20

    static func synchsafe(_ b: ArraySlice<UInt8>) -> Int {
        b.reduce(0) { $0 << 7 | Int($1 & 0x7F) }
    }

    static func plain(_ b: ArraySlice<UInt8>) -> Int {
        b.reduce(0) { $0 << 8 | Int($1) }
    }

    /// Text of a T*** frame body: an encoding byte, then the string.
    static func text(_ body: ArraySlice<UInt8>) -> String? {
        guard let encoding = body.first else { return nil }
        var bytes = Array(body.dropFirst())
        let string: String
        switch encoding {
        case 0:  // ISO-8859-1
            while bytes.last == 0 { bytes.removeLast() }
            string = String(bytes.map { Character(Unicode.Scalar($0)) })
        case 1, 2:  // UTF-16 with BOM, UTF-16BE
            var bigEndian = encoding == 2
            if bytes.count >= 2, encoding == 1 {
                bigEndian = !(bytes[0] == 0xFF && bytes[1] == 0xFE)
                if (bytes[0] == 0xFF && bytes[1] == 0xFE) || (bytes[0] == 0xFE && bytes[1] == 0xFF) { bytes.removeFirst(2) }
            }
            var units: [UInt16] = []
            var i = 0
            while i + 1 < bytes.count {
                let unit = bigEndian ? UInt16(bytes[i]) << 8 | UInt16(bytes[i + 1]) : UInt16(bytes[i + 1]) << 8 | UInt16(bytes[i])
                if unit == 0 { break }
                units.append(unit)
                i += 2
            }
            string = String(decoding: units, as: UTF16.self)
        default:  // UTF-8
            while bytes.last == 0 { bytes.removeLast() }
            string = String(decoding: bytes, as: UTF8.self)
        }
        let trimmed = string.trimmingSpaces
        return trimmed.isEmpty ? nil : trimmed
    }

    /// A picture frame's body: APIC (encoding, MIME type, picture type, description, data) or, in
    /// ID3v2.2, PIC (a three-letter image format in place of the MIME type). Nil when malformed or empty.
    static func picture(_ body: ArraySlice<UInt8>, version: UInt8) -> CoverArt? {
        var p = body.startIndex
        guard p < body.endIndex else { return nil }
        let encoding = body[p]
        p += 1
        let claimed: ArraySlice<UInt8>
        if version == 2 {
            guard body.endIndex - p >= 3 else { return nil }
            claimed = body[p..<p + 3]
            p += 3
        } else {
            guard let end = body[p...].firstIndex(of: 0) else { return nil }
            claimed = body[p..<end]
            p = end + 1
        }
        guard p < body.endIndex else { return nil }
        let pictureType = body[p]
        p += 1
        // The description ends with a terminator of its encoding's width: two zero bytes, aligned, for UTF-16.
        if encoding == 1 || encoding == 2 {
            while p + 1 < body.endIndex, body[p] != 0 || body[p + 1] != 0 { p += 2 }
            p += 2
        } else {
            guard let end = body[p...].firstIndex(of: 0) else { return nil }
            p = end + 1
        }
        guard p < body.endIndex else { return nil }
        let data = body[p...]
        return CoverArt(mimeType: CoverArt.imageType(of: data, claimed: claimed), pictureType: pictureType, bytes: Array(data))
    }

    /// An ID3v1 tag: 128 bytes starting "TAG".
    static func v1(_ b: ArraySlice<UInt8>) -> TrackTags {
        func field(_ offset: Int, _ length: Int) -> String? {
            let start = b.startIndex + offset
            let raw = b[start..<start + length].prefix { $0 != 0 }
            let s = String(raw.map { Character(Unicode.Scalar($0)) }).trimmingSpaces
            return s.isEmpty ? nil : s
        }
        return TrackTags(title: field(3, 30), artist: field(33, 30), album: field(63, 30))
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first?.isWhitespace == true { s.removeFirst() }
        while s.last?.isWhitespace == true { s.removeLast() }
        return String(s)
    }
}
