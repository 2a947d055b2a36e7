import PartyCastCore

/// Decoding of the pieces of ID3 tags the parser keeps.
enum ID3 {
    /// Text frames longer than this are skipped rather than kept.
    static let maxTextFrame = 4096

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
