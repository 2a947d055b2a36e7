import Logging
import NIOCore
import PartyCastControlSeam
import PartyCastCore
import Synchronization

/// One joined listener as the broadcaster sees it.
public struct PeerInfo: Sendable {
    public var id: Int
    /// The listener's own id, stable across its reconnects.
    public var listenerID: String
    public var name: String
    public var host: String
    public var address: String
    /// The listener's last reported buffer fill, in milliseconds of audio.
    public var bufferMilliseconds: Int?
    public var syncErrorMicroseconds: Int?
    /// Its own 99 % bound on its clock's error, as it last reported.
    public var clockBoundMicroseconds: Int?
    /// Whether its clock has settled, as it last reported (nil: it does not say, or has no estimate yet).
    public var clockSettled: Bool?
    /// The speaker delay it plays ahead of, as it last reported.
    public var latencyOffsetMilliseconds = 0
    /// The channel it plays, as it last reported.
    public var channel = ChannelAssignment.stereo
    /// Chunks it missed because its connection could not keep up.
    public var skippedChunks = 0
}

/// Shares each encoded message, serialized once, with every joined listener. Audio chunks are
/// queued and go out together at each `flushChunks()`: one write per listener for several chunks,
/// which is what keeps the cost of a listener small. A listener whose connection backs up misses
/// chunks (it skips to the live edge) and, after `maxSkippedChunks` in a row, is cut off with a
/// reason; no listener ever slows another or the broadcast.
public final class Fanout: Sendable {
    struct Peer {
        var info: PeerInfo
        let channel: Channel
        var consecutiveSkips = 0
    }

    struct State {
        var peers: [Int: Peer] = [:]
        /// Listeners of another protocol, fed the party's PCM (`PCMOutlet`).
        var outlets: [Int: (info: PeerInfo, outlet: any PCMOutlet)] = [:]
        /// The PCM's format; nil until the first source opened, and when packets pass through.
        var audioFormat: AudioFormat?
        var nextID = 1
        /// What a listener joining now needs first: the stream format and the metadata.
        var preamble: [ByteBuffer] = []
        /// Chunks sent but not yet played (presentation time ahead of now), for late joiners.
        var backlog: [Chunk] = []
        /// Chunks queued since the last flush.
        var batch: [Chunk] = []
        var everJoined = 0
        /// What a joining listener is told of the party: paused or not, its gain, what the remote set for it.
        var partyState: ByteBuffer?
        var greeting = Greeting()
        /// Set by `finish`: what a listener that connects after the end is told before it is closed,
        /// and how long it has to hang up.
        var farewell: (bytes: ByteBuffer, deadline: TimeAmount)?
    }

    struct Chunk {
        var position: UInt64
        var presentationNanoseconds: UInt64
        var bytes: ByteBuffer
        /// The PCM it carries (empty when the source's packets pass through), for the outlets.
        var samples: [Float]

        var pcm: PCMChunk { PCMChunk(position: position, presentationNanoseconds: presentationNanoseconds, samples: samples) }
    }

    private let state = LockedValueBox(State())
    /// The backlog's size, kept beside it for the connections' budgets to read without the lock.
    private let backlogByteCount = Atomic<Int>(0)
    /// Told (outside the lock) when a listener joins, leaves or reports.
    private let observers = LockedValueBox<[@Sendable () -> Void]>([])
    public let maxSkippedChunks: Int
    /// What the broadcaster refused its peers (the stream port's and the remote control's), for `status`.
    public let refusals: Refusals
    private let logger: Logger

    public init(maxSkippedChunks: Int = 150, logger: Logger) {
        self.maxSkippedChunks = maxSkippedChunks
        self.refusals = Refusals(logger: logger)
        self.logger = logger
    }

    public var peers: [PeerInfo] {
        state.withLockedValue { s in (s.peers.values.map(\.info) + s.outlets.values.map(\.info)).sorted { $0.id < $1.id } }
    }

    /// The format of the PCM the outlets get; nil before the first source, or without PCM.
    public var audioFormat: AudioFormat? { state.withLockedValue { $0.audioFormat } }

    func setAudioFormat(_ format: AudioFormat) {
        state.withLockedValue { $0.audioFormat = format }
    }
    public var everJoined: Int { state.withLockedValue { $0.everJoined } }

    /// Sets what every new listener gets before any audio (and sends it to those already joined).
    public func setPreamble(_ messages: [ByteBuffer]) {
        state.withLockedValue { s in
            flushBatch(&s)
            s.preamble = messages
            for peer in s.peers.values { for m in messages { peer.channel.write(m, promise: nil) }; peer.channel.flush() }
        }
    }

    public func observe(_ observer: @escaping @Sendable () -> Void) {
        observers.withLockedValue { $0.append(observer) }
    }

    private func changed() {
        for observer in observers.withLockedValue({ $0 }) { observer() }
    }

    /// Queues an audio chunk for everyone (sent at the next `flushChunks()`) and keeps it for late
    /// joiners until it has been played.
    public func queueChunk(_ bytes: ByteBuffer, position: UInt64, presentationNanoseconds: UInt64, samples: [Float] = [], now: UInt64) {
        state.withLockedValue { s in
            s.backlog.removeAll { $0.presentationNanoseconds < now }
            let chunk = Chunk(position: position, presentationNanoseconds: presentationNanoseconds, bytes: bytes, samples: samples)
            s.backlog.append(chunk)
            s.batch.append(chunk)
            countBacklog(s)
        }
    }

    /// The bytes of audio sent and not yet played: about `--buffer` worth of the stream.
    public var backlogBytes: Int { backlogByteCount.load(ordering: .relaxed) }

    private func countBacklog(_ s: State) {
        backlogByteCount.store(s.backlog.reduce(0) { $0 + $1.bytes.readableBytes }, ordering: .relaxed)
    }

    /// Takes back every chunk from `position` on: those not yet sent are dropped here, and every
    /// listener is told (`notice`, a Withdraw) to drop what it already has of them. Bytes already
    /// handed to a connection cannot be recalled; the listener drops them when the notice arrives.
    public func withdraw(from position: UInt64, notice: ByteBuffer) {
        state.withLockedValue { s in
            s.backlog.removeAll { $0.position >= position }
            countBacklog(s)
            s.batch.removeAll { $0.position >= position }
            flushBatch(&s)
            send(notice, chunks: 0, in: &s)
            let now = monotonicNanoseconds()
            let kept = s.backlog.filter { $0.presentationNanoseconds >= now }.map(\.pcm)
            for (_, outlet) in s.outlets.values { outlet.withdraw(keeping: kept) }
        }
    }

    /// What every listener joining from now on is told of the party before any audio.
    func setGreeting(partyState: ByteBuffer, _ greeting: Greeting) {
        state.withLockedValue { s in
            s.partyState = partyState
            s.greeting = greeting
        }
    }

    /// A message for one listener's connections (its channel, which an outlet has no use for),
    /// after the chunks queued for it.
    func send(_ message: ByteBuffer?, toListener listenerID: String) {
        state.withLockedValue { s in write(message, toListener: listenerID, in: &s) }
    }

    /// A message for one listener's PartyCast connections; false when it has none (gone, or a Sendspin player).
    func sendIfJoined(_ message: ByteBuffer?, toListener listenerID: String) -> Bool {
        state.withLockedValue { s in
            guard s.peers.values.contains(where: { $0.info.listenerID == listenerID }) else { return false }
            write(message, toListener: listenerID, in: &s)
            return true
        }
    }

    /// A latency offset the remote set for one listener: the framed settings to its connections, the
    /// value to its outlets.
    func sendLatencyOffset(_ message: ByteBuffer?, milliseconds: Int, toListener listenerID: String) {
        state.withLockedValue { s in
            write(message, toListener: listenerID, in: &s)
            for (info, outlet) in s.outlets.values where info.listenerID == listenerID { outlet.latencyOffset(milliseconds: milliseconds) }
        }
    }

    /// A Gain for one listener: the framed message to its connections, the values to its outlets.
    func sendGain(_ message: ByteBuffer?, value: Float, at position: UInt64, rampFrames: Int, toListener listenerID: String) {
        state.withLockedValue { s in
            write(message, toListener: listenerID, in: &s)
            for (info, outlet) in s.outlets.values where info.listenerID == listenerID { outlet.gain(value, at: position, rampFrames: rampFrames) }
        }
    }

    private func write(_ message: ByteBuffer?, toListener listenerID: String, in s: inout State) {
        flushBatch(&s)
        guard let message else { return }
        for peer in s.peers.values where peer.info.listenerID == listenerID { peer.channel.writeAndFlush(message, promise: nil) }
    }

    /// Sends the queued chunks to everyone.
    public func flushChunks() {
        state.withLockedValue { flushBatch(&$0) }
    }

    /// Sends a control message (end of stream, goodbye) to everyone, after the queued chunks.
    public func broadcast(_ bytes: ByteBuffer) {
        state.withLockedValue { s in
            flushBatch(&s)
            send(bytes, chunks: 0, in: &s)
        }
    }

    private func flushBatch(_ s: inout State) {
        guard !s.batch.isEmpty else { return }
        var bytes = ByteBuffer()
        bytes.reserveCapacity(s.batch.reduce(0) { $0 + $1.bytes.readableBytes })
        for var chunk in s.batch { bytes.writeBuffer(&chunk.bytes) }
        send(bytes, chunks: s.batch.count, in: &s)
        if !s.outlets.isEmpty {
            let pcm = s.batch.map(\.pcm)
            for (_, outlet) in s.outlets.values { outlet.deliver(pcm) }
        }
        s.batch.removeAll(keepingCapacity: true)
    }

    private func send(_ bytes: ByteBuffer, chunks: Int, in s: inout State) {
        var cutOff: [Int] = []
        for (id, var peer) in s.peers {
            if peer.channel.isWritable {
                peer.channel.writeAndFlush(bytes, promise: nil)
                peer.consecutiveSkips = 0
            } else {
                if peer.consecutiveSkips == 0 && chunks > 0 {
                    logger.debug("\(peer.info.name)@\(peer.info.address) is backed up: skipping its chunks until it catches up")
                }
                peer.consecutiveSkips += chunks
                peer.info.skippedChunks += chunks
                if peer.consecutiveSkips > maxSkippedChunks { cutOff.append(id) }
            }
            s.peers[id] = peer
        }
        for id in cutOff {
            guard let peer = s.peers.removeValue(forKey: id) else { continue }
            refusals.refuse(.slowReader, "cut off \(peer.info.name)@\(peer.info.address): its connection fell \(maxSkippedChunks) chunks behind")
            peer.channel.close(promise: nil)
        }
    }

    /// Registers a listener that completed the handshake and sends it the preamble and the
    /// not-yet-played chunks, all under the lock, so it sees no gap and no duplicate. After `finish`
    /// it sends `first` and the goodbye instead, closes the connection and returns nil: replaying
    /// the last chunks to a listener that reconnects while the broadcaster exits would repeat them.
    /// Must be called on the peer channel's event loop (its writes then precede any broadcast's).
    func join(channel: Channel, listenerID: String, name: String, host: String, address: String, first: [ByteBuffer]) -> Int? {
        defer { changed() }
        return state.withLockedValue { s in
            if let farewell = s.farewell {
                _ = hangUp(channel, name: name, after: first + [farewell.bytes], deadline: farewell.deadline)
                return nil
            }
            let (id, backlog) = admit(&s)
            let unplayed = backlog.map(\.bytes)
            let greeted = greeting(for: listenerID, in: s)
            for m in first + s.preamble + greeted + unplayed { channel.write(m, promise: nil) }
            channel.flush()
            s.peers[id] = Peer(info: PeerInfo(id: id, listenerID: listenerID, name: name, host: host, address: address), channel: channel)
            return id
        }
    }

    /// The party's state, the listener's gain from the start of the timeline, and its latency
    /// offset and channel if the remote set them.
    private func greeting(for listenerID: String, in s: State) -> [ByteBuffer] {
        var messages = s.partyState.map { [$0] } ?? []
        messages += [Messages.frame(Messages.gain(s.greeting.gains[listenerID] ?? s.greeting.defaultGain), logger: logger)].compactMap { $0 }
        if let remote = s.greeting.remoteSettings[listenerID],
           let settings = Messages.frame(Messages.listenerSettings(latencyOffsetMilliseconds: remote.latencyOffsetMilliseconds, channel: remote.channel),
                                         logger: logger) {
            messages.append(settings)
        }
        return messages
    }

    /// A joining listener's id and the chunks it has yet to hear (under the lock). What is queued goes
    /// to the others first: the backlog already holds it.
    private func admit(_ s: inout State) -> (id: Int, backlog: [Chunk]) {
        flushBatch(&s)
        let id = s.nextID
        s.nextID += 1
        s.everJoined += 1
        let now = monotonicNanoseconds()
        return (id, s.backlog.filter { $0.presentationNanoseconds >= now })
    }

    /// Registers a listener of another protocol (`PCMOutlet`) and hands it its gain and the
    /// not-yet-played chunks; nil (and the outlet finished) after `finish`.
    public func join(outlet: any PCMOutlet, listenerID: String, name: String, host: String, address: String) -> Int? {
        defer { changed() }
        return state.withLockedValue { s in
            if s.farewell != nil {
                outlet.finish()
                return nil
            }
            let (id, backlog) = admit(&s)
            outlet.gain(s.greeting.gains[listenerID] ?? s.greeting.defaultGain, at: 0, rampFrames: 0)
            if let offset = s.greeting.remoteSettings[listenerID]?.latencyOffsetMilliseconds { outlet.latencyOffset(milliseconds: offset) }
            outlet.deliver(backlog.map(\.pcm))
            s.outlets[id] = (PeerInfo(id: id, listenerID: listenerID, name: name, host: host, address: address), outlet)
            return id
        }
    }

    public func leave(_ id: Int) {
        state.withLockedValue { s in
            s.peers.removeValue(forKey: id)
            s.outlets.removeValue(forKey: id)
        }
        changed()
    }

    func update(_ id: Int, bufferMilliseconds: Int, syncErrorMicroseconds: Int?, clockBoundMicroseconds: Int?, clockSettled: Bool?,
                latencyOffsetMilliseconds: Int, channel: ChannelAssignment?) {
        state.withLockedValue { s in
            s.peers[id]?.info.clockSettled = clockSettled
            if let channel { s.peers[id]?.info.channel = channel }
            s.peers[id]?.info.bufferMilliseconds = bufferMilliseconds
            s.peers[id]?.info.syncErrorMicroseconds = syncErrorMicroseconds
            s.peers[id]?.info.clockBoundMicroseconds = clockBoundMicroseconds
            s.peers[id]?.info.latencyOffsetMilliseconds = latencyOffsetMilliseconds
        }
        changed()
    }

    /// Sends `goodbye` to everyone and closes each connection once everything queued for it has
    /// been written, or after `deadline` whatever the listener does (one that stopped reading
    /// would otherwise hold its connection open for ever); the futures complete when they are closed.
    public func finish(with goodbye: ByteBuffer, deadline: TimeAmount) -> [EventLoopFuture<Void>] {
        state.withLockedValue { s in
            flushBatch(&s)
            s.farewell = (goodbye, deadline)
            for (_, outlet) in s.outlets.values { outlet.finish() }
            s.outlets.removeAll()
            defer { s.peers.removeAll() }
            return s.peers.values.map { hangUp($0.channel, name: $0.info.name, after: [goodbye], deadline: deadline) }
        }
    }

    /// Sends `messages`, shuts this side of the connection after them (the FIN follows the data) and
    /// closes it once the listener hangs up, or after `deadline` whatever it does. Not closed at
    /// once: the kernel would answer whatever the listener still sends (its status report) with a
    /// reset, and a reset throws away what was queued and not yet delivered, which on a slow link
    /// is the end of the song and the goodbye. The future completes when the connection is closed.
    private func hangUp(_ channel: Channel, name: String, after messages: [ByteBuffer], deadline: TimeAmount) -> EventLoopFuture<Void> {
        let timeout = channel.eventLoop.scheduleTask(in: deadline) { channel.close(promise: nil) }
        channel.closeFuture.whenComplete { _ in timeout.cancel() }
        // Writes complete in order: the last one's promise stands for all.
        let written = channel.eventLoop.makePromise(of: Void.self)
        for (index, message) in messages.enumerated() { channel.write(message, promise: index == messages.count - 1 ? written : nil) }
        channel.flush()
        written.futureResult.flatMap { channel.close(mode: .output) }.whenComplete { [logger] result in
            switch result {
            case .success: logger.debug("said goodbye to \(name); waiting for it to hang up")
            case .failure: channel.close(promise: nil)
            }
        }
        return channel.closeFuture
    }
}

/// A chunk of the party's audio as PCM: interleaved Float32 in `Fanout.audioFormat`, its first
/// frame heard at `presentationNanoseconds` (the broadcaster's monotonic clock).
public struct PCMChunk: Sendable {
    public let position: UInt64
    public let presentationNanoseconds: UInt64
    public let samples: [Float]
}

/// A listener of another protocol (Sendspin), fed the party's PCM rather than its wire messages.
/// Called under the fanout's lock: each call must only hand its argument over, never block.
public protocol PCMOutlet: AnyObject, Sendable {
    /// New chunks, in timeline order.
    func deliver(_ chunks: [PCMChunk])
    /// A command took back what was sent from some position on: drop what is buffered and play
    /// `kept` (the not-yet-played chunks before that position), then what follows.
    func withdraw(keeping kept: [PCMChunk])
    /// From timeline position `position` on, ramp to amplitude `value` over `rampFrames`: the
    /// party's Gain for this listener (volume, mute, the fades around a cut), as a native listener
    /// gets it.
    func gain(_ value: Float, at position: UInt64, rampFrames: Int)
    /// The remote's latency offset for this listener (−2000…2000 ms: played that much earlier).
    func latencyOffset(milliseconds: Int)
    /// The broadcast is over.
    func finish()
}
