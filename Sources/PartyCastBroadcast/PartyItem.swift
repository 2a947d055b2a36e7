import PartyCastControlSeam
import PartyCastCore

/// One item of the party's queue, probed once for what the remotes show.
struct PartyItem {
    var id: Int
    var source: ResolvedSource
    var tags = TrackTags()
    var durationFrames: Int?
    var sampleRate = 48000
    var cover: CoverArt?
    /// Counts the changes of `cover`, for the remotes' caches.
    var coverRevision = 0
    var failure: PartyCastError?

    /// A station's name stands in for a title it does not announce, the source's label for both.
    var title: String { tags.title ?? tags.station ?? source.label }

    var view: PartySnapshot.Item {
        PartySnapshot.Item(id: id, title: title, artist: tags.artist, album: tags.album,
                           durationSeconds: durationFrames.map { Double($0) / Double(sampleRate) }, hasCover: cover != nil, coverRevision: coverRevision)
    }

    static let noPackets = PartyCastError(.unsupportedFormat, "a tone or a pipe has no MP3 frames to pass through (use --codec opus or pcm for it)")

    /// Opens a source once for what the remotes show (title, duration, cover); one that cannot be
    /// opened stays in the queue, marked, and is skipped when its turn comes. `passingThrough`: it is
    /// opened for its packets, as it will play.
    static func probe(_ source: ResolvedSource, id: Int, passingThrough: Bool) -> PartyItem {
        var item = PartyItem(id: id, source: source)
        // A live source is opened only to play: looking at it would eat its audio (or its one pipe).
        guard !source.isLive else { return item }
        do throws(PartyCastError) {
            let format: AudioFormat?
            if passingThrough {
                guard let open = source.openPackets else { throw noPackets }
                let opened = try open()
                try opened.prepare()
                (format, item.tags, item.durationFrames, item.cover) = (opened.format, opened.tags, opened.duration.frames, opened.cover)
            } else {
                let opened = try source.open()
                try opened.prepare()
                (format, item.tags, item.durationFrames, item.cover) = (opened.format, opened.tags, opened.duration.frames, opened.cover)
            }
            guard let format else { throw PartyCastError(.notAudio, "no audio") }
            item.sampleRate = format.sampleRate
        } catch {
            item.failure = error
        }
        return item
    }
}
