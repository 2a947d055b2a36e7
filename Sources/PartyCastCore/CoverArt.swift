/// A track's picture: from its ID3v2 tag (APIC, or PIC in ID3v2.2), or from mpd (`readpicture`, `albumart`).
public struct CoverArt: Sendable, Equatable {
    /// image/jpeg, image/png, image/gif, image/webp or image/bmp when the bytes say so; otherwise
    /// the tag's own claim, reduced to a safe `type/subtype` (application/octet-stream if none).
    public var mimeType: String
    /// ID3's picture type: 3 is the front cover.
    public var pictureType: UInt8
    public var bytes: [UInt8]

    public init(mimeType: String, pictureType: UInt8, bytes: [UInt8]) {
        self.mimeType = mimeType
        self.pictureType = pictureType
        self.bytes = bytes
    }

    /// The picture's type from its first bytes, which cannot lie about what a browser will decode;
    /// failing that the tag's claim, kept only if it looks like a MIME type.
    public static func imageType(of data: ArraySlice<UInt8>, claimed: ArraySlice<UInt8>) -> String {
        let magic: [(String, [UInt8?])] = [
            ("image/jpeg", [0xFF, 0xD8, 0xFF]), ("image/png", [0x89, 0x50, 0x4E, 0x47]), ("image/gif", Array("GIF8".utf8)),
            ("image/webp", Array("RIFF".utf8) + [nil, nil, nil, nil] + Array("WEBP".utf8)), ("image/bmp", Array("BM".utf8)),
        ]
        for (type, prefix) in magic where data.count >= prefix.count
            && zip(data, prefix).allSatisfy({ $1 == nil || $0 == $1 }) {
            return type
        }
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789.+-/".utf8)
        let text = String(decoding: claimed.prefix(64), as: UTF8.self).lowercased()
        guard text.utf8.allSatisfy(allowed.contains), text.split(separator: "/", omittingEmptySubsequences: false).count == 2,
              !text.hasPrefix("/"), !text.hasSuffix("/") else { return "application/octet-stream" }
        return text
    }
}
