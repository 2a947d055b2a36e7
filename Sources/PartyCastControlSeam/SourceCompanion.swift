import PartyCastCore

/// What the player that feeds the party's pipe (mpd) is doing: the song, where in it, and whether
/// it plays. Text and picture come from that player's peer, so they arrive cleaned and bounded
/// (`TrackTags`, and the companion's own limit on pictures).
public struct SourceReport: Sendable, Equatable {
    public var playing: Bool
    /// Which song, as the player numbers them: another number is another song (mpd's song id).
    public var song: Int?
    public var tags: TrackTags
    /// Where the player is in the song now: what enters the pipe now.
    public var elapsedSeconds: Double
    public var durationSeconds: Double?
    public var cover: CoverArt?

    public init(playing: Bool, song: Int?, tags: TrackTags, elapsedSeconds: Double, durationSeconds: Double?, cover: CoverArt?) {
        self.playing = playing
        self.song = song
        self.tags = tags
        self.elapsedSeconds = elapsedSeconds
        self.durationSeconds = durationSeconds
        self.cover = cover
    }
}

/// The player behind a pipe (mpd): the party's pause, resume, next, previous and seek go to it
/// instead of moving the party's own queue, and the party follows what it reports.
public protocol SourceCompanion: Sendable {
    /// Carries out `command` (one of pause, resume, next, previous, seek) on the player, then hands
    /// `completion` the player's state after it, or why it could not. Called once per command, on
    /// the thread that reports the player's own changes, so the party gets every report in order.
    func forward(_ command: PartyCommand, completion: @escaping @Sendable (Result<SourceReport, PartyCommandError>) -> Void)
}

extension PartyCommand {
    /// The commands a source's companion carries out instead of the party.
    public var movesTheSource: Bool {
        switch self {
        case .pause, .resume, .next, .previous, .seek: true
        default: false
        }
    }
}
