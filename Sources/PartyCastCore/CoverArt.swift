/// A track's picture from its ID3v2 tag (APIC, or PIC in ID3v2.2).
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
}
