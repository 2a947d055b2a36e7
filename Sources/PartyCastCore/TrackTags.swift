/// Title, artist and album from a file's tags (ID3, Vorbis comments, FLAC metadata), or what a
/// station announces (its name, and the title it is playing). Every field is cleaned of control
/// characters as it is set (`String(untrusted:)`): whoever wrote the file or runs the station
/// cannot reach a terminal, a log or a page through it, whichever decoder read it.
public struct TrackTags: Sendable, Equatable {
    static let limit = 200
    public var title: String? { didSet { title = Self.clean(title) } }
    public var artist: String? { didSet { artist = Self.clean(artist) } }
    public var album: String? { didSet { album = Self.clean(album) } }
    /// A station's name (`icy-name`): what stands in when it announces no title.
    public var station: String? { didSet { station = Self.clean(station) } }

    public init(title: String? = nil, artist: String? = nil, album: String? = nil, station: String? = nil) {
        self.title = Self.clean(title)
        self.artist = Self.clean(artist)
        self.album = Self.clean(album)
        self.station = Self.clean(station)
    }

    /// Nil stays nil; text that is nothing but control characters and spaces becomes nil too.
    static func clean(_ text: String?) -> String? {
        text.map { String(untrusted: $0, limit: limit) }.flatMap { $0.isEmpty ? nil : $0 }
    }

    public var isEmpty: Bool { title == nil && artist == nil && album == nil && station == nil }
}
