import PartyCastControlSeam
import PartyCastSendspin

/// What a Sendspin client with the metadata or controller role is told of the party: the song
/// heard now and where in it, and the controls (the party's volume; no mute of its own, so none
/// offered). Sent when it changes, not at every snapshot (listeners' reports make many).
struct SendspinPartyState: Equatable {
    /// The controller commands the party maps (SendspinConnection.partyCommand).
    static let controllerCommands = ["play", "pause", "stop", "next", "previous", "volume"]

    var song: PartySnapshot.Item?
    var paused: Bool
    var volume: Int
    var elapsedMilliseconds: Int

    init(_ snapshot: PartySnapshot) {
        song = snapshot.current.flatMap { current in snapshot.queue.first { $0.id == current } }
        paused = snapshot.paused || snapshot.ended
        volume = snapshot.volume
        elapsedMilliseconds = Int(clamping: Int64((snapshot.elapsedSeconds * 1000).rounded()))
    }

    /// Whether the metadata a client holds is out of date: another song, or a pause or resume
    /// (progress runs on by itself between them).
    func changesMetadata(from old: SendspinPartyState?) -> Bool {
        old.map { $0.song != song || $0.paused != paused } ?? true
    }

    func metadata(at now: Int64) -> SendspinMetadata {
        SendspinMetadata(timestamp: now, title: song?.title, artist: song?.artist, album: song?.album,
                         progress: song.map { song in
                             .init(trackProgressMs: elapsedMilliseconds, trackDurationMs: Int(clamping: Int64(((song.durationSeconds ?? 0) * 1000).rounded())),
                                   playbackSpeed: paused ? 0 : 1000)
                         })
    }

    var controller: SendspinControllerState {
        SendspinControllerState(supportedCommands: Self.controllerCommands, volume: volume, muted: false)
    }
}
