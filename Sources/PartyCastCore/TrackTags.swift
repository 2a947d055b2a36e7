/// Title, artist and album from a file's tags (ID3, Vorbis comments, FLAC metadata), or what a
/// station announces (its name, and the title it is playing).
public struct TrackTags: Sendable, Equatable {
    public var title: String?
    public var artist: String?
    public var album: String?
    /// A station's name (`icy-name`): what stands in when it announces no title.
    public var station: String?

    public init(title: String? = nil, artist: String? = nil, album: String? = nil, station: String? = nil) {
        self.title = title
        self.artist = artist
        self.album = album
        self.station = station
    }

    public var isEmpty: Bool { title == nil && artist == nil && album == nil && station == nil }
}
