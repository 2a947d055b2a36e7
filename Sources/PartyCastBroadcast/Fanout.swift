import Logging
import NIOConcurrencyHelpers
import NIOCore
import PartyCastCore
import Synchronization

/// One joined listener as the broadcaster sees it.
public struct PeerInfo: Sendable {
    public var id: Int
    public var name: String
    public var host: String
    public var address: String
    /// The listener's last reported buffer fill, in milliseconds of audio.
    public var bufferMilliseconds: Int?
    public var syncErrorMicroseconds: Int?
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
        var nextID = 1
        /// What a listener joining now needs first: the stream format and the metadata.
        var preamble: [ByteBuffer] = []
        /// Chunks sent but not yet played (presentation time ahead of now), for late joiners.
        var backlog: [(presentationNanoseconds: UInt64, bytes: ByteBuffer)] = []
        /// Chunks queued since the last flush, back to back, and how many.
        var batch = ByteBuffer()
        var batchChunks = 0
        var everJoined = 0
        /// Set by `finish`: what a listener that connects after the end is told before it is closed.
        var farewell: ByteBuffer?
    }

    private let state = NIOLockedValueBox(State())
    public let maxSkippedChunks: Int
    private let logger: Logger

    public init(maxSkippedChunks: Int = 150, logger: Logger) {
        self.maxSkippedChunks = maxSkippedChunks
        self.logger = logger
    }

    public var peers: [PeerInfo] { state.withLockedValue { $0.peers.values.map(\.info).sorted { $0.id < $1.id } } }
    public var everJoined: Int { state.withLockedValue { $0.everJoined } }

    /// Sets what every new listener gets before any audio (and sends it to those already joined).
    public func setPreamble(_ messages: [ByteBuffer]) {
        state.withLockedValue { s in
            flushBatch(&s)
            s.preamble = messages
            for peer in s.peers.values { for m in messages { peer.channel.write(m, promise: nil) }; peer.channel.flush() }
        }
    }

    /// Queues an audio chunk for everyone (sent at the next `flushChunks()`) and keeps it for late
    /// joiners until it has been played.
    public func queueChunk(_ bytes: ByteBuffer, presentationNanoseconds: UInt64, now: UInt64) {
        state.withLockedValue { s in
            s.backlog.removeAll { $0.presentationNanoseconds < now }
            s.backlog.append((presentationNanoseconds, bytes))
            var chunk = bytes
            s.batch.writeBuffer(&chunk)
            s.batchChunks += 1
        }
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
        guard s.batchChunks > 0 else { return }
        send(s.batch, chunks: s.batchChunks, in: &s)
        s.batch = ByteBuffer()
        s.batchChunks = 0
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
            logger.warning("cut off \(peer.info.name)@\(peer.info.address): its connection fell \(maxSkippedChunks) chunks behind")
            peer.channel.close(promise: nil)
        }
    }

    /// Registers a listener that completed the handshake and sends it the preamble and the
    /// not-yet-played chunks, all under the lock, so it sees no gap and no duplicate. After `finish`
    /// it sends `first` and the goodbye instead, closes the connection and returns nil: replaying
    /// the last chunks to a listener that reconnects while the broadcaster exits would repeat them.
    /// Must be called on the peer channel's event loop (its writes then precede any broadcast's).
    func join(channel: Channel, name: String, host: String, address: String, first: [ByteBuffer]) -> Int? {
        state.withLockedValue { s in
            if let farewell = s.farewell {
                for m in first + [farewell] { channel.write(m, promise: nil) }
                channel.flush()
                channel.close(promise: nil)
                return nil
            }
            // What is queued goes to the others first: the backlog below already holds it.
            flushBatch(&s)
            let id = s.nextID
            s.nextID += 1
            s.everJoined += 1
            let now = monotonicNanoseconds()
            let unplayed = s.backlog.filter { $0.presentationNanoseconds >= now }.map(\.bytes)
            for m in first + s.preamble + unplayed { channel.write(m, promise: nil) }
            channel.flush()
            s.peers[id] = Peer(info: PeerInfo(id: id, name: name, host: host, address: address), channel: channel)
            return id
        }
    }

    func leave(_ id: Int) {
        state.withLockedValue { _ = $0.peers.removeValue(forKey: id) }
    }

    func update(_ id: Int, bufferMilliseconds: Int, syncErrorMicroseconds: Int?) {
        state.withLockedValue { s in
            s.peers[id]?.info.bufferMilliseconds = bufferMilliseconds
            s.peers[id]?.info.syncErrorMicroseconds = syncErrorMicroseconds
        }
    }

    /// Sends `goodbye` to everyone and closes each connection once everything queued for it has
    /// been written, or after `deadline` whatever the listener does (one that stopped reading
    /// would otherwise hold its connection open for ever); the futures complete when they are closed.
    public func finish(with goodbye: ByteBuffer, deadline: TimeAmount) -> [EventLoopFuture<Void>] {
        state.withLockedValue { s in
            flushBatch(&s)
            s.farewell = goodbye
            defer { s.peers.removeAll() }
            return s.peers.values.map { peer in
                let channel = peer.channel
                channel.eventLoop.scheduleTask(in: deadline) { channel.close(promise: nil) }
                return channel.writeAndFlush(goodbye).flatMap { channel.close() }
            }
        }
    }
}
