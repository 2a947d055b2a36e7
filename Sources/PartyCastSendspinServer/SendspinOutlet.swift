import HummingbirdWebSocket
import NIOCore
import PartyCastBroadcast
import PartyCastCore
import PartyCastOutput
import PartyCastSendspin
import Synchronization

/// A Sendspin connection as the fanout sees it: what it is handed is queued, never waited for;
/// a player that lets its queue fill is cut off (`overflowed`), as a native listener would be.
final class SendspinOutlet: PCMOutlet {
    enum Item: Sendable {
        case message(SendspinServerMessage)
        case chunks([PCMChunk])
        /// Drop what is buffered, then play these.
        case clear([PCMChunk])
        case gain(Float, at: UInt64, rampFrames: Int)
        /// `clockAnswers` has some: they go before the next chunk.
        case clockAnswers
        /// `artwork` has a picture to show.
        case artwork
        case end
    }

    /// What an artwork client is to show: stream/start's description of its channels, then each
    /// channel's image (empty: cleared), shown at `timestamp` (server clock, µs). The writer sends an
    /// image only if the channel does not show it already: a request that changes only a channel's
    /// description costs a stream/start, not up to 4 × 1 MiB copied and sealed.
    struct Artwork: Sendable {
        let start: SendspinServerMessage
        let images: [(channel: Int, bytes: [UInt8])]
        let timestamp: Int64
    }

    /// The artwork not yet written, at most one: a newer one replaces it, so a client that changes
    /// its channels as fast as it can holds one picture here, not a queue of them.
    let artwork = LockedValueBox<Artwork?>(nil)

    func show(_ picture: Artwork) {
        if artwork.withLockedValue({ pending in defer { pending = picture }; return pending == nil }) { push(.artwork) }
    }

    /// Clock answers waiting, at most `maxClockAnswers`: they go before audio not yet written (a
    /// player that reads slowly has a queue of it), since a player's clock filter trusts a fast
    /// answer more than a slow one. What the socket already holds they cannot pass.
    static let maxClockAnswers = 8
    let clockAnswers = LockedValueBox<[SendspinServerMessage]>([])

    /// Items queued at most: the fanout's batches (~100 ms each) and messages, a few seconds' worth.
    static let maxQueued = 256

    private let continuation: AsyncStream<Item>.Continuation
    let overflowed = Atomic<Bool>(false)

    init(continuation: AsyncStream<Item>.Continuation) { self.continuation = continuation }

    func push(_ item: Item) {
        if case .dropped = continuation.yield(item) {
            overflowed.store(true, ordering: .relaxed)
            continuation.finish()
        }
    }

    /// Queues a server/time ahead of the audio; one over the cap is not answered (the player asks
    /// again), so a player that asks faster than it reads holds no more.
    func answerClock(_ answer: SendspinServerMessage) {
        guard clockAnswers.withLockedValue({ answers in
            guard answers.count < Self.maxClockAnswers else { return false }
            answers.append(answer)
            return true
        }) else { return }
        push(.clockAnswers)
    }

    func deliver(_ chunks: [PCMChunk]) { push(.chunks(chunks)) }
    func withdraw(keeping kept: [PCMChunk]) { push(.clear(kept)) }
    func gain(_ value: Float, at position: UInt64, rampFrames: Int) { push(.gain(value, at: position, rampFrames: rampFrames)) }

    /// What the player said it accepts of server/command (its latest client/state), and the latency
    /// offset the remote set for it (told once the player accepts it: its first client/state comes
    /// after the join, which hands the outlet the offset).
    private let player = LockedValueBox<(commands: Set<String>, latencyOffset: Int?)>(([], nil))
    static let outputDelayCommand = "set_output_delay"

    /// As the player's output delay, which plays early only: a negative offset (play later) is 0 to
    /// it. A player that does not accept the command keeps its own.
    func latencyOffset(milliseconds: Int) {
        let accepted = player.withLockedValue { player in
            player.latencyOffset = milliseconds
            return player.commands.contains(Self.outputDelayCommand)
        }
        if accepted { sendOutputDelay(milliseconds) }
    }

    func accept(commands: Set<String>) {
        let pending = player.withLockedValue { player -> Int? in
            defer { player.commands = commands }
            return player.commands.contains(Self.outputDelayCommand) || !commands.contains(Self.outputDelayCommand) ? nil : player.latencyOffset
        }
        if let pending { sendOutputDelay(pending) }
    }

    private func sendOutputDelay(_ milliseconds: Int) {
        push(.message(.command(.outputDelay(milliseconds: min(max(milliseconds, 0), 5000)))))
    }
    func finish() { push(.end) }
}

/// Writes a connection's queue to its WebSocket: messages stamped with the party's clock as they
/// go, chunks as PCM frames timestamped on the party's timeline, through the party's gain for this
/// listener (applied here, at its positions, as a native listener applies it), sealed when the
/// connection is. The player itself stays at volume 100.
struct SendspinWriter: Sendable {
    let outbound: WebSocketOutboundWriter
    let channel: LockedValueBox<SendspinSecureChannel>?
    let clockAnswers: LockedValueBox<[SendspinServerMessage]>
    let artwork: LockedValueBox<SendspinOutlet.Artwork?>

    /// Writes until the queue ends; true when it ended with the broadcast.
    func drain(_ stream: AsyncStream<SendspinOutlet.Item>, format: @Sendable () -> SendspinAudioFormat?) async throws -> Bool {
        var curve = GainCurve()
        var shown: [Int: [UInt8]] = [:]
        for await item in stream {
            switch item {
            case .message(let message):
                try await send(text: message.encoded(transmittedAt: SendspinConnection.nowMicroseconds()))
            case .chunks(let chunks):
                try await send(chunks, format: format(), curve: &curve)
            case .clear(let kept):
                try await send(text: SendspinServerMessage.streamClear.encoded(transmittedAt: SendspinConnection.nowMicroseconds()))
                try await send(kept, format: format(), curve: &curve)
            case .gain(let value, let position, let rampFrames):
                curve.set(value, atFrame: Int(clamping: position), rampFrames: rampFrames)
            case .clockAnswers:
                try await sendClockAnswers()
            case .artwork:
                try await sendArtwork(shown: &shown)
            case .end:
                try await send(text: SendspinServerMessage.streamEnd.encoded(transmittedAt: SendspinConnection.nowMicroseconds()))
                return true
            }
        }
        return false
    }

    private func send(_ chunks: [PCMChunk], format: SendspinAudioFormat?, curve: inout GainCurve) async throws {
        guard let format else { return }  // not (yet) a player
        let header: SendspinFrame.AudioHeader = channel == nil ? .spec : .withSendAhead
        for chunk in chunks where !chunk.samples.isEmpty {
            try await sendClockAnswers()
            let start = Int(clamping: chunk.position)
            var samples = chunk.samples
            for index in samples.indices { samples[index] *= curve.value(at: start + index / format.channels) }
            curve.forget(before: start)
            let timestamp = Int64(clamping: chunk.presentationNanoseconds / 1000)
            try await send(binary: SendspinFrame.audio(timestamp: timestamp, sendAhead: timestamp - SendspinConnection.nowMicroseconds(),
                                                       payload: SendspinPCM.encode(samples, bitDepth: format.bitDepth), header: header))
        }
    }

    private func sendClockAnswers() async throws {
        for answer in clockAnswers.withLockedValue({ answers in defer { answers = [] }; return answers }) {
            try await send(text: answer.encoded(transmittedAt: SendspinConnection.nowMicroseconds()))
        }
    }

    /// `shown`: each channel's image as last sent (a channel set to 'none' forgets its image). The
    /// party's covers share their storage with these, so comparing the same cover is not a memcmp.
    private func sendArtwork(shown: inout [Int: [UInt8]]) async throws {
        guard let picture = artwork.withLockedValue({ pending in defer { pending = nil }; return pending }) else { return }
        try await send(text: picture.start.encoded(transmittedAt: SendspinConnection.nowMicroseconds()))
        // An encrypted connection's messages are Noise messages of 64 KiB at most: aiosendspin 10's framing.
        let framing: SendspinFrame.ArtworkFraming = channel == nil ? .spec : .announced
        let previously = shown
        shown = Dictionary(picture.images.map { ($0.channel, $0.bytes) }, uniquingKeysWith: { _, last in last })
        for (index, image) in picture.images where previously[index] != image {
            for message in SendspinFrame.artwork(channel: index, timestamp: picture.timestamp, image: image, framing: framing) {
                try await send(binary: message)
            }
        }
    }

    private func send(text: [UInt8]) async throws {
        if let channel {
            try await outbound.write(.binary(ByteBuffer(bytes: try channel.withLockedValue { channel throws(NoiseError) in try channel.seal(text: text) })))
        } else {
            try await outbound.write(.text(String(decoding: text, as: UTF8.self)))
        }
    }

    private func send(binary: [UInt8]) async throws {
        let bytes = try channel.map { box throws(NoiseError) in try box.withLockedValue { channel throws(NoiseError) in try channel.seal(binary: binary) } } ?? binary
        try await outbound.write(.binary(ByteBuffer(bytes: bytes)))
    }
}
