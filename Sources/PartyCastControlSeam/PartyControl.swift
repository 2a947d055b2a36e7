import PartyCastCore

/// What the party's remotes (the HTTP API, the web page, `broadcaster ctl`) may ask of it. Every
/// command goes through the party's one command queue (`Party`), which validates it, applies it at
/// a timeline position every listener hears at the same instant, and answers with the new state.
public enum PartyCommand: Sendable, Equatable {
    case pause
    case resume
    case next
    /// The previous song, or the start of this one when more than a few seconds of it were heard.
    case previous
    /// Within the current song, in seconds from its start.
    case seek(seconds: Double)
    /// Jumps to an item of the queue.
    case play(item: Int)
    /// Appends a file: a path under `--library`, or one the broadcaster was started with.
    case add(path: String)
    case remove(item: Int)
    /// Moves an item to `index` in the queue (0 is the first).
    case move(item: Int, index: Int)
    /// The whole party's volume, 0…100.
    case partyVolume(percent: Int)
    /// One listener's volume, 0…100; listeners are named by `ListenerView.id`, or by name when unique.
    case listenerVolume(listener: String, percent: Int)
    case mute(listener: String, muted: Bool)
    /// The speaker's own delay after the sound card, −2000…2000 ms: played that much earlier.
    case latencyOffset(listener: String, milliseconds: Int)
    /// Which of the source's channels the listener plays on each of its outputs (a stereo pair: one left, one right).
    case channel(listener: String, ChannelAssignment)
    /// The test tone's frequency (a `tone:` source playing now), 0 < hertz < 24000: every listener
    /// changes at the same sample, the phase going on where it was (no click).
    case tone(hertz: Double)
    /// A short chime on that listener's speaker alone, over the party: which speaker is which.
    case identify(listener: String)
}

/// Why a command was refused: the party plays on unchanged.
public struct PartyCommandError: Error, Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// An unknown listener, queue item or file (HTTP 404).
        case notFound
        /// A value out of range, or a command that makes no sense now (HTTP 400).
        case invalid
        /// A name that matches several listeners (HTTP 409).
        case ambiguous
        /// A valid command the party could not carry out: its encoder or a source failed (HTTP 500).
        case failed
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
}

/// The party as its remotes show it. `revision` grows with every change.
public struct PartySnapshot: Sendable, Equatable, Codable {
    public struct Item: Sendable, Equatable, Codable {
        public var id: Int
        public var title: String
        public var artist: String?
        public var album: String?
        public var durationSeconds: Double?
        /// Whether `GET /api/items/{id}/cover` has a picture (ID3 APIC).
        public var hasCover: Bool
        /// Changes when the item's picture does (a pipe's player, as mpd, plays one song after another
        /// as one item): what a cache of pictures keys them by, beside `id`.
        public var coverRevision: Int

        public init(id: Int, title: String, artist: String? = nil, album: String? = nil, durationSeconds: Double? = nil, hasCover: Bool = false,
                    coverRevision: Int = 0) {
            self.id = id
            self.title = title
            self.artist = artist
            self.album = album
            self.durationSeconds = durationSeconds
            self.hasCover = hasCover
            self.coverRevision = coverRevision
        }
    }

    public struct Listener: Sendable, Equatable, Codable {
        /// Stable across the listener's reconnects.
        public var id: String
        public var name: String
        public var host: String
        public var address: String
        public var volume: Int
        public var muted: Bool
        public var latencyOffsetMilliseconds: Int
        /// The channel it plays: what the remote set, else what the listener reports (its --channel).
        public var channel: ChannelAssignment
        public var bufferMilliseconds: Int?
        public var syncErrorMicroseconds: Int?
        /// The listener's own 99 % bound on its clock's error against the broadcaster's.
        public var clockBoundMicroseconds: Int?
        /// Whether its clock has settled, as it last said (nil: it does not say): a start waits
        /// for one that has not.
        public var clockSettled: Bool?

        public init(id: String, name: String, host: String, address: String, volume: Int, muted: Bool,
                    latencyOffsetMilliseconds: Int, channel: ChannelAssignment = .stereo, bufferMilliseconds: Int?,
                    syncErrorMicroseconds: Int?, clockBoundMicroseconds: Int?, clockSettled: Bool? = nil) {
            self.id = id
            self.name = name
            self.host = host
            self.address = address
            self.volume = volume
            self.muted = muted
            self.latencyOffsetMilliseconds = latencyOffsetMilliseconds
            self.channel = channel
            self.bufferMilliseconds = bufferMilliseconds
            self.syncErrorMicroseconds = syncErrorMicroseconds
            self.clockBoundMicroseconds = clockBoundMicroseconds
            self.clockSettled = clockSettled
        }
    }

    public var revision: UInt64 = 0
    public var name = ""
    public var paused = false
    /// The party's volume, 0…100.
    public var volume = 100
    /// The item heard now (nil before the first and after the last).
    public var current: Int?
    /// Seconds of the current item heard when this snapshot was taken; it advances in real time
    /// unless `paused`.
    public var elapsedSeconds = 0.0
    public var queue: [Item] = []
    public var listeners: [Listener] = []
    /// The frequency of the test tone being sent (a `tone:` source), nil for anything else.
    public var toneHertz: Double?
    /// True once the queue has played out and the broadcast is over.
    public var ended = false
    /// What the broadcaster refused its peers so far, by kind (`Refusals.Kind`): oversized frames,
    /// peers that do not read, connections over a cap, foreign Host or Origin, wrong keys…
    public var refused: [String: Int] = [:]

    public init() {}
}

/// A file `add` accepts, with the title and artist its tags give (nil until they are read, or
/// when it has none: a page shows its file name then).
public struct LibraryEntry: Sendable, Equatable, Codable {
    public var path: String
    public var title: String?
    public var artist: String?

    public init(path: String, title: String? = nil, artist: String? = nil) {
        self.path = path
        self.title = title
        self.artist = artist
    }
}

/// The seam between the party and its remotes: implemented by `Party`.
public protocol PartyControl: Sendable {
    /// Queues a command and waits for the party to apply or refuse it.
    func perform(_ command: PartyCommand) async -> Result<PartySnapshot, PartyCommandError>
    var snapshot: PartySnapshot { get }
    /// Every snapshot from now on, the current one first; changes that come faster than the reader
    /// takes them are coalesced (the newest wins).
    func snapshots() -> AsyncStream<PartySnapshot>
    /// Files that `add` accepts: those the broadcaster was started with, then those under `--library`.
    var library: [LibraryEntry] { get }
    /// The picture of an item (ID3 APIC): MIME type and bytes.
    func cover(item: Int) -> (mimeType: String, bytes: [UInt8])?
}
