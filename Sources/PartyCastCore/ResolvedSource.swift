/// A source named on the command line (or added from the remote), checked before anything goes
/// live (SourceRegistry), and opened afresh each time it plays: by the listener, or as one song of
/// the broadcaster's party.
public struct ResolvedSource: Sendable {
    public typealias Open = @Sendable () throws(PartyCastError) -> PCMSource
    public typealias OpenPackets = @Sendable () throws(PartyCastError) -> PacketSource
    /// What was given: a path, `tone:…`, `-`, `pipe:PATH`, a URL.
    public var spec: String
    /// Shown when the source has no title of its own; a file's name is anyone's text, so cleaned.
    public var label: String
    /// A pipe or a station: it plays at its own pace, cannot seek, and is opened only to play
    /// (looking at it first would eat its audio).
    public var isLive: Bool
    public var open: Open
    /// Its MP3 frames as they are (`--codec mp3`): nil for a source that has none (a tone, a pipe).
    public var openPackets: OpenPackets?

    public init(spec: String, label: String, isLive: Bool, open: @escaping Open, openPackets: OpenPackets? = nil) {
        self.spec = spec
        self.label = String(untrusted: label)
        self.isLive = isLive
        self.open = open
        self.openPackets = openPackets
    }
}
