/// Title, artist and album from an ID3v2 or ID3v1 tag.
public struct TrackTags: Sendable, Equatable {
    public var title: String?
    public var artist: String?
    public var album: String?

    public init(title: String? = nil, artist: String? = nil, album: String? = nil) {
        self.title = title
        self.artist = artist
        self.album = album
    }

    public var isEmpty: Bool { title == nil && artist == nil && album == nil }
}

