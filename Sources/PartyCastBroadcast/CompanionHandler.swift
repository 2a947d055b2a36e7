import PartyCastControlSeam
import PartyCastCore

/// The party following the player behind its pipe (mpd): the handler of its reports.
extension Party {
    /// How far the player's position may stray from where its last report said it would be by now
    /// before it counts as moved (a seek, or the same song again).
    static let companionJumpSeconds = 1.0

    /// The player reported (a change of its own, or the outcome of a command it was forwarded).
    /// The remotes see its song, tags and cover at once; the listeners from where its audio lies on
    /// the timeline: after what the pacer has sent and what the pipe has delivered but the pacer
    /// not taken yet. Its pause pauses the party (a fade, then silence, not an underrun) and its
    /// play resumes it; a pipe that is not playing now only shows what the player says.
    func follow(_ report: SourceReport) throws(PartyCommandError) {
        guard let companion, let index = state.queue.firstIndex(where: { $0.id == companion.item }) else { return }
        let item = state.queue[index]
        let time = now()
        let last = state.companionReport
        state.companionReport = (report, time)
        state.queue[index].tags = report.tags
        if report.tags != item.tags { logger.info("now playing: \(state.queue[index].title)") }
        state.queue[index].durationFrames = report.durationSeconds.map { Int(($0 * Double(item.sampleRate)).rounded()) }
        if report.cover != item.cover {
            state.queue[index].cover = report.cover
            state.queue[index].coverRevision &+= 1
            published.withLockedValue { $0.covers[item.id] = report.cover }
        }
        guard index == state.currentIndex, let chunkFormat = state.chunkFormat else { return }
        let moved = last.map { last in
            let expected = last.report.elapsedSeconds + (last.report.playing ? Double(time &- last.at) / 1e9 : 0)
            return last.report.song != report.song || abs(report.elapsedSeconds - expected) > Self.companionJumpSeconds
        } ?? true
        let songFrame = Int((report.elapsedSeconds * Double(item.sampleRate)).rounded())
        if !report.playing && !state.timeline.paused { try pause() }
        if state.timeline.paused {
            if moved {
                // A skip or seek while paused: the player dropped what it had buffered, and the
                // party drops what the pause took back; the resume starts where the player is.
                state.pending.removeAll(keepingCapacity: true)
                state.timeline.hold(item: item.id, songFrame: songFrame)
            }
            if moved || report.tags != item.tags {
                // Listeners (those joining meanwhile too) see the song the resume will play.
                announceLiveItem(index, at: state.timeline.end, songFrame: state.timeline.held.first?.songFrame ?? songFrame)
            }
            if report.playing { try resume() }
            return
        }
        let pendingFrames = state.pending.count / chunkFormat.format.channels
        if moved {
            let delivered = (state.source as? LiveSource)?.bufferedFrames ?? 0
            let position = state.timeline.end + UInt64(pendingFrames + delivered)
            state.timeline.start(item: item.id, songFrame: songFrame, at: position)
            state.changeHeardFrom = position
            announceLiveItem(index, at: position, songFrame: songFrame)
        } else if report.tags != item.tags, case let position = state.timeline.end + UInt64(pendingFrames),
                  let heard = Timeline.heard(at: position, in: state.timeline.segments) {
            announceLiveItem(index, at: position, songFrame: heard.songFrame)
        }
    }
}
