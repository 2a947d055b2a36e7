import Foundation
import PartyCastControlSeam
import PartyCastCore
import PartyCastSources

/// The remotes' commands, applied by the pacer between chunks: one handler each.
extension Party {
    /// Applies every queued command and answers each with the new snapshot or why it was refused.
    func applyCommands() {
        let requests = inbox.withLockedValue { q in defer { q.removeAll() }; return q }
        guard !requests.isEmpty else { return }
        for (request, reply) in requests { reply(answer(request)) }
        republish()
    }

    /// Applies one request; the answer is the party as it is once the change is heard.
    func answer(_ request: Request) -> Result<PartySnapshot, PartyCommandError> {
        do throws(PartyCommandError) {
            try apply(request)
        } catch {
            return .failure(error)
        }
        publishState()
        return .success(makeSnapshot())
    }

    func apply(_ request: Request) throws(PartyCommandError) {
        switch request {
        case .add(let item): try add(item)
        case .command(let command): try apply(command)
        case .companion(let report, _): try follow(report)
        }
    }

    func apply(_ command: PartyCommand) throws(PartyCommandError) {
        switch command {
        case .pause: try pause()
        case .resume: try resume()
        case .next: try next()
        case .previous: try previous()
        case .seek(let seconds): try seek(to: seconds)
        case .play(let id): try replace(with: try index(of: id), songFrame: 0, cut: true)
        case .add: throw PartyCommandError(.invalid, "add goes through perform")  // opened off the pacer, see perform(_:)
        case .remove(let id): try remove(id)
        case .move(let id, let to): try move(id, to: to)
        case .partyVolume(let percent): try setPartyVolume(percent)
        case .listenerVolume(let name, let percent): try setVolume(percent, of: name)
        case .mute(let name, let muted): try setMuted(muted, name)
        case .latencyOffset(let name, let milliseconds): try setLatencyOffset(milliseconds, of: name)
        case .channel(let name, let assignment): try setChannel(assignment, of: name)
        case .tone(let hertz): try retuneTone(hertz)
        case .identify(let name): try identify(name)
        }
    }

    /// The most songs a queue holds: a remote that adds in a loop costs a bounded snapshot, not all memory.
    static let maxQueueItems = 1000

    private func add(_ item: PartyItem) throws(PartyCommandError) {
        guard state.queue.count < Self.maxQueueItems else {
            throw PartyCommandError(.invalid, "the queue is full (\(Self.maxQueueItems) songs): remove some first")
        }
        var item = item
        item.id = state.nextItemID
        state.nextItemID += 1
        // A picture is held once however often its song is queued (each add reads it afresh): a
        // queue of one album's songs, or of one song a thousand times, holds its cover once.
        if let cover = item.cover, let held = state.queue.lazy.compactMap(\.cover).first(where: { $0 == cover }) { item.cover = held }
        state.queue.append(item)
        if let cover = item.cover { published.withLockedValue { $0.covers[item.id] = cover } }
        logger.info("queued \(item.view.title)")
        if state.reachedEnd || state.currentIndex == nil {
            // The queue had played out: the new song follows what is still being heard.
            state.reachedEnd = false
            state.timeline.end = max(state.timeline.end, state.timeline.position(at: now() + Self.controlMarginNanoseconds))
            try replace(with: state.queue.count - 1, songFrame: 0, cut: false)
        }
    }

    func pause() throws(PartyCommandError) {
        if startIsHeld {
            // The start was held for the clocks, and is now held by the remote.
            state.startGate = nil
            startHeld.store(false, ordering: .releasing)
            if let partyState = frame(Messages.partyState(paused: true)) { fanout.broadcast(partyState) }
            logger.info("paused before the start")
            return
        }
        // Paused before the start: its resume starts the song, clocks settled or not.
        state.startGate = nil
        guard !state.timeline.paused else { return }
        let cut = try cutPosition()
        fadeEveryone(to: 0, endingAt: cut)
        takeBack(from: cut)
        do throws(PartyCastError) { try sendSilence() } catch { throw PartyCommandError(.failed, error.message) }
        try reopenHeldPackets()
        if let partyState = frame(Messages.partyState(paused: true)) { fanout.broadcast(partyState) }
        let heard = state.timeline.held.first.flatMap { p in state.queue.first { $0.id == p.item }.map { ($0, p.songFrame) } }
        logger.info("paused\(heard.map { String(format: " at %.3f s of %@", Double($0.1) / Double($0.0.sampleRate), $0.0.view.title) } ?? "") (timeline frame \(cut))")
    }

    func resume() throws(PartyCommandError) {
        if startIsHeld { return startHeldSong(because: "the remote resumed it") }
        guard state.timeline.paused else { return }
        let resumeAt = max(state.timeline.end, state.timeline.position(at: now() + Self.controlMarginNanoseconds))
        putBack(at: resumeAt)
        if let partyState = frame(Messages.partyState(paused: false)) { fanout.broadcast(partyState) }
        fadeEveryoneIn(at: resumeAt)
        logger.info("resumed (timeline frame \(resumeAt))")
    }

    private func next() throws(PartyCommandError) {
        let current = currentlyHeard().flatMap { h in state.queue.firstIndex { $0.id == h.item } } ?? state.currentIndex ?? -1
        var next = current + 1
        if next == state.queue.count && options.loop { next = 0 }
        guard next < state.queue.count else { throw PartyCommandError(.invalid, "this is the last song of the queue") }
        try replace(with: next, songFrame: 0, cut: true)
    }

    private func previous() throws(PartyCommandError) {
        guard let heard = currentlyHeard(), let index = state.queue.firstIndex(where: { $0.id == heard.item }) else {
            throw PartyCommandError(.invalid, "nothing is playing")
        }
        let restart = Double(heard.songFrame) / Double(state.queue[index].sampleRate) > Self.restartThresholdSeconds || index == 0
        try replace(with: restart ? index : index - 1, songFrame: 0, cut: true)
    }

    /// Whether `seconds` can be a song's position: the party's seek and the player's (mpd reads
    /// a negative one as relative, and a huge one overflows its float) are checked alike.
    static func checkSeek(to seconds: Double) throws(PartyCommandError) {
        guard seconds.isFinite, seconds >= 0 else { throw PartyCommandError(.invalid, "seek takes seconds from the start of the song, ≥ 0") }
        guard seconds < 86_400 else { throw PartyCommandError(.invalid, "seek past the end") }
    }

    private func seek(to seconds: Double) throws(PartyCommandError) {
        guard let heard = currentlyHeard(), let index = state.queue.firstIndex(where: { $0.id == heard.item }) else {
            throw PartyCommandError(.invalid, "nothing is playing")
        }
        let item = state.queue[index]
        try Self.checkSeek(to: seconds)
        if let frames = item.durationFrames, seconds * Double(item.sampleRate) >= Double(frames) {
            throw PartyCommandError(.invalid, String(format: "%.3f s is past the end of %@ (%.3f s)", seconds, item.view.title, Double(frames) / Double(item.sampleRate)))
        }
        try replace(with: index, songFrame: Int((seconds * Double(item.sampleRate)).rounded()), cut: true)
    }

    private func remove(_ id: Int) throws(PartyCommandError) {
        let index = try index(of: id)
        if index == state.currentIndex {
            guard index + 1 < state.queue.count else {
                throw PartyCommandError(.invalid, "the song playing is the last of the queue: skip or pause instead")
            }
            try replace(with: index + 1, songFrame: 0, cut: true)
        }
        state.queue.remove(at: index)
        published.withLockedValue { _ = $0.covers.removeValue(forKey: id) }
        if let current = state.currentIndex, index < current { state.currentIndex = current - 1 }
    }

    private func move(_ id: Int, to destination: Int) throws(PartyCommandError) {
        let index = try index(of: id)
        guard (0..<state.queue.count).contains(destination) else {
            throw PartyCommandError(.invalid, "index \(destination) is outside the queue (0…\(state.queue.count - 1))")
        }
        let currentID = state.currentIndex.map { state.queue[$0].id }
        let item = state.queue.remove(at: index)
        state.queue.insert(item, at: destination)
        state.currentIndex = currentID.flatMap { id in state.queue.firstIndex { $0.id == id } }
    }

    private func setPartyVolume(_ percent: Int) throws(PartyCommandError) {
        guard (0...100).contains(percent) else { throw PartyCommandError(.invalid, "volume takes 0…100 percent") }
        state.gains.partyVolume = percent
        for id in everyone.union(state.gains.settings.keys) { ramp(id) }
        updateGreeting()
    }

    private func setVolume(_ percent: Int, of name: String) throws(PartyCommandError) {
        guard (0...100).contains(percent) else { throw PartyCommandError(.invalid, "volume takes 0…100 percent") }
        let id = try listenerID(name)
        state.gains.settings[id, default: GainPolicy.ListenerSettings()].volume = percent
        ramp(id)
    }

    private func setMuted(_ muted: Bool, _ name: String) throws(PartyCommandError) {
        let id = try listenerID(name)
        state.gains.settings[id, default: GainPolicy.ListenerSettings()].muted = muted
        ramp(id)
    }

    private func setLatencyOffset(_ milliseconds: Int, of name: String) throws(PartyCommandError) {
        guard (-2000...2000).contains(milliseconds) else { throw PartyCommandError(.invalid, "the latency offset takes −2000…2000 ms") }
        let id = try listenerID(name)
        state.gains.settings[id, default: GainPolicy.ListenerSettings()].latencyOffsetMilliseconds = milliseconds
        fanout.sendLatencyOffset(frame(Messages.listenerSettings(latencyOffsetMilliseconds: milliseconds)), milliseconds: milliseconds, toListener: id)
        // A reconnect is told it too.
        updateGreeting()
    }

    /// Heard from the listener's next output period on, not at a timeline position: a channel is
    /// not something two speakers change together.
    private func setChannel(_ assignment: ChannelAssignment, of name: String) throws(PartyCommandError) {
        let id = try listenerID(name)
        state.gains.settings[id, default: GainPolicy.ListenerSettings()].channel = assignment
        fanout.send(frame(Messages.listenerSettings(channel: assignment)), toListener: id)
        updateGreeting()
    }

    /// Heard from the next cut on every listener: what was sent beyond it is taken back and made
    /// again at the new frequency, the phase going on from the cut's, so there is nothing to fade.
    /// Paused, or with another item starting before the sent audio ends, the tone changes after
    /// what is already sent instead.
    private func retuneTone(_ hertz: Double) throws(PartyCommandError) {
        guard ToneGenerator.accepts(hertz) else { throw PartyCommandError(.invalid, "a tone's frequency must lie between 0 and 24000 Hz") }
        guard let tone = state.tone, let index = state.currentIndex else {
            throw PartyCommandError(.invalid, "no tone is playing: share tone:FREQ to have one")
        }
        var atFrame: Int?
        if !state.timeline.paused {
            let cut = try cutPosition()
            let id = state.queue[index].id
            if let heard = state.timeline.heard(at: cut), heard.item == id, state.timeline.segments.allSatisfy({ $0.position <= cut || $0.item == id }) {
                _ = withdraw(from: cut)
                state.timeline.cut(at: cut)
                if state.timeline.heard(at: cut)?.item != id { state.timeline.start(item: id, songFrame: heard.songFrame, at: cut) }
                state.pending.removeAll(keepingCapacity: true)
                state.changeHeardFrom = cut
                atFrame = heard.songFrame
            }
        }
        do throws(PartyCastError) {
            try tone.retune(to: hertz, atFrame: atFrame)
        } catch {
            throw PartyCommandError(.invalid, error.message)
        }
        state.queue[index].tags = tone.tags
    }

    /// The chime rides on the timeline, from the frame heard a control margin from now (the
    /// listener mixes it at its output, so that frame may already be sent). A paused party has no
    /// frames to carry it.
    private func identify(_ name: String) throws(PartyCommandError) {
        let id = try listenerID(name)
        guard !state.timeline.paused else { throw PartyCommandError(.invalid, "the party is paused: resume it to hear the chime") }
        let position = state.timeline.position(at: now() + Self.controlMarginNanoseconds)
        guard fanout.sendIfJoined(frame(Messages.identify(at: position)), toListener: id) else {
            throw PartyCommandError(.notFound, "\(name) is not a PartyCast listener joined now: it cannot play the chime")
        }
        logger.info("identify \(name): a chime from timeline frame \(position)")
    }

    // MARK: What the handlers share

    private func index(of id: Int) throws(PartyCommandError) -> Int {
        guard let index = state.queue.firstIndex(where: { $0.id == id }) else { throw PartyCommandError(.notFound, "no item \(id) in the queue") }
        return index
    }

    /// Replaces what is heard from the next cut on (or, paused, what resume plays) with item
    /// `index` from `songFrame`. `cut`: the old audio is withdrawn and faded out first.
    private func replace(with index: Int, songFrame: Int, cut: Bool) throws(PartyCommandError) {
        guard state.queue.indices.contains(index) else { throw PartyCommandError(.notFound, "no such item") }
        var position = state.timeline.end
        if cut && !state.timeline.paused {
            position = try cutPosition()
            fadeEveryone(to: 0, endingAt: position)
            _ = withdraw(from: position)
            state.timeline.cut(at: position)
        }
        state.pending.removeAll(keepingCapacity: true)
        state.reachedEnd = false
        state.source = nil
        state.tone = nil
        state.packets = nil
        do throws(PartyCastError) {
            try open(index: index, atSongFrame: songFrame, position: position)
        } catch {
            state.queue[index].failure = error
            logger.warning("cannot play \(state.queue[index].source.label): \(error.message)")
            do throws(PartyCastError) {
                _ = try openFirstPlayable(from: index + 1)
            } catch {
                logger.warning("nor the items after it: \(error.message)")
            }
            throw PartyCommandError(.invalid, "\(state.queue[index].source.label): \(error.message)")
        }
        if state.timeline.paused {
            state.timeline.hold(item: state.queue[index].id, songFrame: songFrame)
        } else {
            if cut { fadeEveryoneIn(at: position) }
            state.changeHeardFrom = position
        }
    }

    /// The first chunk boundary heard at least the control margin (and a fade) from now: the frame
    /// where a command takes effect on every listener. Sends ahead up to it if it is not sent yet.
    private func cutPosition() throws(PartyCommandError) -> UInt64 {
        let earliest = state.timeline.position(at: now() + Self.controlMarginNanoseconds) + UInt64(fadeFrames)
        if let boundary = state.timeline.sentBoundary(atOrAfter: earliest) { return boundary }
        do throws(PartyCastError) {
            while state.timeline.end < earliest && !state.reachedEnd && (state.source != nil || state.packets != nil) {
                try sendNextChunk()
            }
        } catch {
            throw PartyCommandError(.failed, error.message)
        }
        fanout.flushChunks()
        return state.timeline.end
    }

    /// Takes back what was sent from `position` on and pauses the timeline there. What was taken
    /// back plays first on resume: not a sample lost or repeated (the queue's last chunks too).
    func takeBack(from position: UInt64) {
        let withdrawn = withdraw(from: position)
        state.pending.insert(contentsOf: withdrawn.flatMap(\.samples), at: 0)
        if !withdrawn.isEmpty { state.reachedEnd = false }
        state.timeline.pause(at: position)
    }

    /// Packets cannot be cut like samples: after `takeBack`, the resume starts a fresh stream at
    /// the frame paused on.
    func reopenHeldPackets() throws(PartyCommandError) {
        guard options.codec.passesThrough, let heard = state.timeline.held.first,
              let index = state.queue.firstIndex(where: { $0.id == heard.item }) else { return }
        try replace(with: index, songFrame: heard.songFrame, cut: false)
    }

    /// Puts what `takeBack` held on the line from `position` on, and tells the listeners which
    /// song plays there.
    func putBack(at position: UInt64) {
        if let first = state.timeline.resume(at: position), let index = state.queue.firstIndex(where: { $0.id == first.item }),
           let metadata = frame(Messages.metadata(state.queue[index], streamIndex: state.streamIndex, start: position, songFrame: first.songFrame)) {
            fanout.broadcast(metadata)
        }
        state.changeHeardFrom = position
    }

    /// Takes back every chunk from `position` on: from the backlog, the batch, and (by telling
    /// them) from every listener; returns what they carried.
    private func withdraw(from position: UInt64) -> [Timeline.SentChunk] {
        let withdrawn = state.timeline.withdraw(from: position)
        if let notice = frame(Messages.withdraw(from: position)) { fanout.withdraw(from: position, notice: notice) }
        return withdrawn
    }

    /// The song and its frame heard at the next cut, or paused on; after a change not heard yet,
    /// those it brings, as its answer said: a second command builds on the first.
    private func currentlyHeard() -> (item: Int, songFrame: Int)? {
        state.timeline.heard(at: max(state.timeline.position(at: now() + Self.controlMarginNanoseconds), state.changeHeardFrom))
    }

    private func listenerID(_ name: String) throws(PartyCommandError) -> String {
        let peers = fanout.peers
        if peers.contains(where: { $0.listenerID == name }) || state.gains.settings[name] != nil { return name }
        let named = Set(peers.filter { $0.name == name }.map(\.listenerID))
        guard let id = named.first else { throw PartyCommandError(.notFound, "no listener \(name)") }
        guard named.count == 1 else { throw PartyCommandError(.ambiguous, "\(named.count) listeners are called \(name): use an id") }
        return id
    }
}
