import HummingbirdWebSocket
import Logging
import NIOCore
import PartyCastBroadcast
import PartyCastControlSeam
import PartyCastCore
import PartyCastSendspin

/// One Sendspin client of the party, from its first frame to its last: the opening (plain or
/// encrypted), the session's verdicts carried out, and, for a player, the party's audio in its
/// format and on the party's clock. The one place where Sendspin meets the party.
struct SendspinConnection {
    struct Shared: Sendable {
        let party: Party
        let fanout: Fanout
        let serverKey: X25519KeyPair
        let serverName: String
        let logger: Logger
    }

    /// A client that has not finished its hello by then is closed.
    static let helloDeadline: Swift.Duration = .seconds(10)
    static let maxMessageBytes = 64 * 1024

    let shared: Shared
    let address: String
    /// How it ended, once `run` returned or threw (a player that closes at once makes writes fail).
    let ending = LockedValueBox(Ending.didNotJoin)

    /// The party's clock in Sendspin's unit: the broadcaster's monotonic clock in µs, on which
    /// every chunk's presentation time is counted too.
    static func nowMicroseconds() -> Int64 { Int64(clamping: monotonicNanoseconds() / 1000) }

    /// How a connection ended, for a dialler deciding whether and when to dial again.
    enum Ending: Equatable, Sendable {
        /// The party is over: its last chunk and stream/end went out.
        case broadcastOver
        /// It came before the party's first song opened, and was told to come back.
        case tooEarly
        /// It went away, after joining the fanout as a player or not, with the reason its
        /// client/goodbye gave (nil: it said none, or no goodbye).
        case left(joinedFanout: Bool, goodbye: String?)

        static let didNotJoin = Ending.left(joinedFanout: false, goodbye: nil)
    }

    func run(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async throws {
        var messages = inbound.messages(maxSize: Self.maxMessageBytes).makeAsyncIterator()
        let deadline = Task {
            try await Task.sleep(for: Self.helloDeadline)
            shared.fanout.refusals.refuse(.silentPeer, "Sendspin client \(address) did not finish its hello in \(Self.helloDeadline)")
            try await outbound.close(.policyViolation, reason: "no hello in time")
        }
        defer { deadline.cancel() }
        guard case .text(let first)? = try await messages.next() else { return }
        var handshake = SendspinHandshake(serverKey: shared.serverKey)
        var step = handshake.receive(text: Array(first.utf8))
        var channel: SendspinSecureChannel?
        var session: SendspinServerSession
        let format = shared.fanout.audioFormat
        func makeSession(_ transport: SendspinServerSession.Transport) -> SendspinServerSession {
            SendspinServerSession(serverID: handshake.serverID, serverName: shared.serverName, transport: transport, encodable: [.pcm], partyFormat: format)
        }
        var firstMessage: [UInt8]?
        opening: while true {
            switch step {
            case .plain:
                session = makeSession(.plain)
                firstMessage = Array(first.utf8)
                break opening
            case .reply(let frames):
                for frame in frames { try await outbound.write(.text(String(decoding: frame, as: UTF8.self))) }
                guard case .text(let next)? = try await messages.next() else { return }
                step = handshake.receive(text: Array(next.utf8))
            case .established(let clientID, let secure):
                channel = secure
                session = makeSession(.encrypted(clientID: clientID))
                break opening
            case .reject(let reply, let reason):
                shared.fanout.refusals.refuse(.badData, "refused Sendspin client \(address): \(reason)")
                if let reply { try await outbound.write(.text(String(decoding: reply, as: UTF8.self))) }
                try await outbound.close(.policyViolation, reason: "handshake refused")
                return
            }
        }
        guard format != nil else {
            // The first source sets the party's format within moments of the start.
            shared.logger.info("Sendspin client \(address) came before the party's first song opened: told to come back")
            ending.withLockedValue { $0 = .tooEarly }
            try await outbound.close(SendspinServer.tryAgainLater, reason: "the party has not started yet")
            return
        }
        let (stream, continuation) = AsyncStream.makeStream(of: SendspinOutlet.Item.self, bufferingPolicy: .bufferingOldest(SendspinOutlet.maxQueued))
        let outlet = SendspinOutlet(continuation: continuation)
        let writer = SendspinWriter(outbound: outbound, channel: channel.map { LockedValueBox($0) }, clockAnswers: outlet.clockAnswers,
                                    artwork: outlet.artwork)
        let player = Player()
        defer {
            continuation.finish()
            if let id = player.fanoutID.withLockedValue({ $0 }) { shared.fanout.leave(id) }
            ending.withLockedValue { $0 = player.ending(goodbye: session.goodbyeReason) }
        }
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                let ended = try await writer.drain(stream, format: { player.format.withLockedValue { $0 } })
                if outlet.overflowed.load(ordering: .relaxed) {
                    shared.fanout.refusals.refuse(.slowReader, "cut off Sendspin player \(address): it fell behind the party")
                    try await outbound.close(.policyViolation, reason: "fell behind")
                } else if ended {
                    player.broadcastOver.withLockedValue { $0 = true }
                    try await outbound.close(.normalClosure, reason: "the broadcast is over")
                }
            }
            tasks.addTask { await followParty(player, outlet: outlet) }
            var actions = session.opening()
            if let firstMessage { actions += session.receiveText(firstMessage, receivedAt: Self.nowMicroseconds()) }
            while true {
                for action in actions {
                    guard try await carryOut(action, session: session, outlet: outlet, player: player, outbound: outbound) else {
                        tasks.cancelAll()
                        return
                    }
                }
                if session.peer != nil { deadline.cancel() }
                guard let message = try await messages.next() else { break }
                let receivedAt = Self.nowMicroseconds()
                switch (message, writer.channel) {
                case (.text(let text), nil):
                    actions = session.receiveText(Array(text.utf8), receivedAt: receivedAt)
                case (.binary(let bytes), nil):
                    actions = session.receiveBinary(count: bytes.readableBytes)
                case (.binary(let bytes), let secure?):
                    do throws(NoiseError) {
                        switch try secure.withLockedValue({ channel throws(NoiseError) in try channel.open(Array(buffer: bytes)) }) {
                        case .text(let json): actions = session.receiveText(json, receivedAt: receivedAt)
                        case .binary(let binary): actions = session.receiveBinary(count: binary.count)
                        }
                    } catch {
                        actions = [.close("its message failed to open: \(error.reason)")]
                    }
                case (.text, _?):
                    actions = [.close("it sent a cleartext frame after the handshake")]
                }
            }
            // The writer says the broadcast is over before it closes, which is what ended the messages.
            tasks.cancelAll()
        }
    }

    /// Carries out one of the session's verdicts; false when the connection is to end.
    private func carryOut(_ action: SendspinServerSession.Action, session: SendspinServerSession, outlet: SendspinOutlet,
                          player: Player, outbound: WebSocketOutboundWriter) async throws -> Bool {
        switch action {
        case .send(let message):
            if case .time = message { outlet.answerClock(message) } else { outlet.push(.message(message)) }
        case .joined(let peer):
            if peer.has("artwork") { player.artworkChannels.withLockedValue { $0 = peer.artworkChannels } }
            player.told.withLockedValue { $0.peer = peer }
            // What the party is now; `followParty` tells what changes from here.
            tellParty(to: player, on: outlet)
            guard let format = peer.format else {
                shared.logger.info("Sendspin client \(peer.name)@\(address) joined without the player role (\(peer.activeRoles.joined(separator: ", ")))")
                return true
            }
            outlet.push(.message(.streamStart(format, codecHeader: nil)))
            outlet.push(.message(.groupUpdate(.playing, groupID: session.serverID, groupName: shared.serverName)))
            // The party's gain for this listener is in the PCM it gets (SendspinWriter), so the speaker
            // plays at 100 rather than its last setting (sendspin's own default is 25 of 100).
            outlet.push(.message(.command(.volume(100))))
            // Before joining: the join hands the outlet the unplayed chunks, which go out in this format.
            player.format.withLockedValue { $0 = format }
            let id = shared.fanout.join(outlet: outlet, listenerID: "sendspin-" + String(peer.clientID.prefix(16)), name: peer.name, host: "sendspin", address: address)
            player.fanoutID.withLockedValue { $0 = id }
            shared.logger.info("Sendspin player \(peer.name)@\(address) joined (\(format.codec.rawValue) \(format.sampleRate) Hz, \(format.bitDepth) bit)")
        case .playerState(let volume, let muted, let delay):
            outlet.accept(commands: session.playerCommands)
            shared.logger.debug("Sendspin player \(address): volume \(volume.map(String.init) ?? "-"), muted \(muted.map(String.init) ?? "-"), delay \(delay.map(String.init) ?? "-") ms")
        case .artworkChannels(let channels):
            // The session passes on changes only, within a budget; the writer sends only pictures not shown yet.
            showArtwork(of: SendspinPartyState(shared.party.snapshot).song, to: player, on: outlet, setting: channels)
        case .available(let available):
            shared.logger.debug("Sendspin client \(address) is \(available ? "" : "not ")available")
        case .control(let control):
            guard let command = Self.partyCommand(for: control) else {
                shared.logger.notice("Sendspin controller \(address): the party has no mute of its own")
                return true
            }
            if case .failure(let refusal) = await shared.party.perform(command) {
                shared.logger.notice("Sendspin controller \(address): \(refusal.message)")
            }
        case .close(let reason):
            if session.badMessages > 0 { shared.fanout.refusals.refuse(.badData, "closed Sendspin client \(address): \(reason)") }
            else { shared.logger.info("Sendspin client \(address) left: \(reason)") }
            try await outbound.close(.normalClosure, reason: nil)
            return false
        }
        return true
    }

    /// Shows `song`'s cover on an artwork client's album channels (the party has no artist
    /// pictures: those are cleared, as is an album channel when the song has no cover it can send),
    /// first setting its channels to `channels` if given. Built and posted under the channels'
    /// lock, so a layout read before a newer one was set cannot be posted after it (`show` takes
    /// only the outlet's lock and never awaits).
    private func showArtwork(of song: PartySnapshot.Item?, to player: Player, on outlet: SendspinOutlet, setting channels: [SendspinArtworkChannel]? = nil) {
        let cover = song.flatMap { shared.party.cover(item: $0.id) }
        let picture = cover.flatMap { SendspinPicture($0.bytes) }
        if let song, let cover, picture == nil {
            shared.logger.debug("the cover of \"\(song.title)\" (\(cover.mimeType), \(cover.bytes.count) bytes) is not PNG, JPEG or BMP within \(SendspinPicture.maxBytes) bytes: not sent")
        }
        player.artworkChannels.withLockedValue { current in
            if let channels { current = channels }
            guard !current.isEmpty else { return }
            let carried = current.map { channel in
                channel.source == "album" ? picture?.channel(source: "album") ?? channel : channel
            }
            let images = current.indices.filter { current[$0].source != "none" }.map { index in
                (channel: index, bytes: current[index].source == "album" ? picture?.bytes ?? [] : [])
            }
            outlet.show(.init(start: .artworkStart(carried), images: images, timestamp: Self.nowMicroseconds()))
        }
    }

    /// What a Sendspin controller's command means to the party.
    static func partyCommand(for control: SendspinControl) -> PartyCommand? {
        switch control {
        case .play: .resume
        case .pause, .stop: .pause
        case .next: .next
        case .previous: .previous
        case .volume(let percent): .partyVolume(percent: percent)
        case .mute: nil
        }
    }

    /// What the connection knows of its player once it joined.
    final class Player: Sendable {
        let format = LockedValueBox<SendspinAudioFormat?>(nil)
        let fanoutID = LockedValueBox<Int?>(nil)
        /// Who it is once it joined, and what it was last told of the party (`tellParty`).
        let told = LockedValueBox(Told())
        /// The artwork channels it asked for, if an artwork client.
        let artworkChannels = LockedValueBox<[SendspinArtworkChannel]>([])
        /// Its stream ended with the broadcast.
        let broadcastOver = LockedValueBox(false)

        func ending(goodbye: String?) -> Ending {
            if broadcastOver.withLockedValue({ $0 }) { return .broadcastOver }
            return .left(joinedFanout: fanoutID.withLockedValue { $0 } != nil, goodbye: goodbye)
        }
    }

    struct Told: Sendable {
        var peer: SendspinPeer?
        var state: SendspinPartyState?
    }

    /// Tells a client with the metadata, controller or artwork role what changes of the party, until the
    /// connection ends (the task is cancelled).
    private func followParty(_ player: Player, outlet: SendspinOutlet) async {
        for await _ in shared.party.snapshots() { tellParty(to: player, on: outlet) }
    }

    /// Tells a client that joined what of the party it has not been told: the party's newest state,
    /// read and told under the lock of what it was told last. So the join's telling and each of
    /// `followParty`'s come in order, each against the one before, and a change that lands while the
    /// client joins (the song first heard, its cover read) is told once, never lost.
    private func tellParty(to player: Player, on outlet: SendspinOutlet) {
        player.told.withLockedValue { told in
            guard let peer = told.peer, peer.has("metadata") || peer.has("controller") || peer.has("artwork") else { return }
            let state = SendspinPartyState(shared.party.snapshot)
            if peer.has("metadata") && state.changesMetadata(from: told.state) {
                outlet.push(.message(.metadata(state.metadata(at: Self.nowMicroseconds()))))
            }
            if peer.has("controller") && state.volume != told.state?.volume { outlet.push(.message(.controller(state.controller))) }
            // Each new song's picture, and each new picture of the same item (a pipe's player plays
            // its songs as one).
            let newPicture = told.state.map { $0.song?.id != state.song?.id || $0.song?.coverRevision != state.song?.coverRevision } ?? true
            if peer.has("artwork") && newPicture {
                showArtwork(of: state.song, to: player, on: outlet)
            }
            told.state = state
        }
    }
}
