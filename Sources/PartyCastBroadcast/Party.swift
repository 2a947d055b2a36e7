import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PartyCastCodec
import PartyCastCore
import PartyCastDSP
import PartyCastWire
import Synchronization

public struct BroadcastOptions: Sendable {
    public var name: String
    public var codec: any WireCodec = WireCodecs.all[0]
    public var bitrateKbps = 128
    /// Playback starts this long after launch: listeners that join meanwhile start at sample 0.
    public var startInSeconds = 1.0
    /// How far ahead of its presentation time each chunk is sent (`--buffer`).
    public var leadMilliseconds = 1000
    public var loop = false

    public init(name: String) { self.name = name }
}

/// One song the party can play: a file or a generator, opened afresh each time it plays.
public struct PartySource: Sendable {
    public typealias Open = @Sendable () throws(PartyCastError) -> PCMSource
    public typealias OpenPackets = @Sendable () throws(PartyCastError) -> PacketSource
    /// What the broadcaster was given (a path, `tone:…`): what `add` matches against.
    public var spec: String
    /// Shown when the source has no title of its own; a file's name is anyone's text, so cleaned.
    public var label: String
    /// A pipe or a station: played at its own pace, never opened just to look at it.
    public var isLive: Bool
    public var open: Open
    /// Its own packets, for a codec that passes them through (`--codec mp3`); nil if it has none.
    public var openPackets: OpenPackets?

    public init(spec: String, label: String, isLive: Bool = false, open: @escaping Open, openPackets: OpenPackets? = nil) {
        self.spec = spec
        self.label = String(untrusted: label)
        self.isLive = isLive
        self.open = open
        self.openPackets = openPackets
    }
}

/// The party: source → encoder → fan-out, and the one place where the party's state changes.
///
/// One thread (the pacer, in `run()`) owns the queue, the current source, the timeline and every
/// listener's settings. The remotes only queue commands (`perform`) and read snapshots. Each chunk
/// is sent `leadMilliseconds` before its presentation time, and positions and presentation times
/// stay on one line for the whole broadcast (presentation = origin + position / rate): a pause is a
/// gap in positions, a skip or a seek replaces what was sent from a position F on. A command takes
/// effect at the first chunk boundary F heard at least `controlMargin` from now, the same frame on
/// every listener: the pacer withdraws what it sent from F on (`Withdraw`), fades the old audio out
/// just before F and the new in just after (per-listener `Gain`), and sends the replacement.
public final class Party: PartyControl {
    /// How far ahead of now a command takes effect: the Withdraw must reach every listener, and be
    /// applied, before its output thread reads frame F (an ALSA device reads ~100 ms ahead).
    static let controlMarginNanoseconds: UInt64 = 160_000_000
    /// Fades around a pause, a resume, a skip and a seek; volume changes ramp for longer.
    static let fadeSeconds = 0.005
    static let volumeRampSeconds = 0.030
    /// `previous` restarts the song instead when more than this of it has been heard.
    static let restartThresholdSeconds = 3.0
    /// Chunks due this soon after the one being sent go out with it.
    static let batchWindowNanoseconds: UInt64 = 100_000_000

    private let options: BroadcastOptions
    private let fanout: Fanout
    private let logger: Logger
    private let libraryFiles: [String]
    private let opener: @Sendable (String) throws(PartyCastError) -> PartySource
    public let sessionID: UInt64

    // Commands in, snapshots out: the only state shared with other threads.
    private let inbox = NIOLockedValueBox<[(Request, CheckedContinuation<Result<PartySnapshot, PartyCommandError>, Never>)]>([])
    private let wakeup = Wakeup()
    private let stopRequested = Atomic<Bool>(false)
    private let published = NIOLockedValueBox(Published())
    private let subscribers = NIOLockedValueBox(Subscribers())

    // nonisolated(unsafe): the pacer's state, touched only by the thread in run() (and by init).
    private nonisolated(unsafe) var state: PacerState

    /// - Parameters:
    ///   - sources: the songs to start with, in order.
    ///   - library: further files `add` accepts (from `--library`).
    ///   - opener: makes a source of a path `add` was given (after it was matched to the library).
    public init(sources: [PartySource], library: [String], options: BroadcastOptions, fanout: Fanout, logger: Logger,
                opener: @escaping @Sendable (String) throws(PartyCastError) -> PartySource) {
        self.options = options
        self.fanout = fanout
        self.logger = logger
        self.opener = opener
        libraryFiles = sources.map(\.spec) + library.filter { path in !sources.contains { $0.spec == path } }
        sessionID = UInt64.random(in: 1...UInt64.max)
        state = PacerState()
        for source in sources { state.queue.append(Self.probe(source, id: state.nextItemID, passingThrough: options.codec.passesThrough)); state.nextItemID += 1 }
        let covers = Dictionary(uniqueKeysWithValues: state.queue.compactMap { item in item.cover.map { (item.id, $0) } })
        published.withLockedValue { p in
            p.view.queue = state.queue.map(\.view)
            p.view.name = options.name
            p.covers = covers
        }
        fanout.observe { [weak self] in self?.republish() }
    }

    // MARK: The remotes' side (any thread)

    public var library: [String] { libraryFiles }

    public func perform(_ command: PartyCommand) async -> Result<PartySnapshot, PartyCommandError> {
        let request: Request
        switch command {
        case .add(let path):
            // Opened here, off the pacer, so a slow disk never delays the audio.
            guard libraryFiles.contains(path) else {
                return .failure(PartyCommandError(.notFound, "\(path) is neither in the library nor one of the broadcaster's files"))
            }
            do throws(PartyCastError) {
                let source = try opener(path)
                let item = Self.probe(source, id: 0, passingThrough: options.codec.passesThrough)
                if let failure = item.failure { return .failure(PartyCommandError(.invalid, "\(path): \(failure.message)")) }
                request = .add(item)
            } catch {
                return .failure(PartyCommandError(.invalid, "\(path): \(error.message)"))
            }
        default:
            request = .command(command)
        }
        return await withCheckedContinuation { continuation in
            let accepted = inbox.withLockedValue { queue -> Bool in
                guard !stopRequested.load(ordering: .acquiring) else { return false }
                queue.append((request, continuation))
                return true
            }
            if accepted { wakeup.signal() } else { continuation.resume(returning: .failure(PartyCommandError(.invalid, "the party is over"))) }
        }
    }

    public var snapshot: PartySnapshot { makeSnapshot() }

    public func snapshots() -> AsyncStream<PartySnapshot> {
        let (stream, continuation) = AsyncStream.makeStream(of: PartySnapshot.self, bufferingPolicy: .bufferingNewest(1))
        let id = subscribers.withLockedValue { s in
            defer { s.nextID += 1 }
            s.continuations[s.nextID] = continuation
            return s.nextID
        }
        continuation.onTermination = { [weak self] _ in self?.subscribers.withLockedValue { _ = $0.continuations.removeValue(forKey: id) } }
        continuation.yield(makeSnapshot())
        return stream
    }

    public func cover(item: Int) -> (mimeType: String, bytes: [UInt8])? {
        published.withLockedValue { $0.covers[item].map { ($0.mimeType, $0.bytes) } }
    }

    /// Ends `run()` soon; the listeners are told goodbye by `sayGoodbye`.
    public func stop() {
        stopRequested.store(true, ordering: .releasing)
        wakeup.signal()
    }

    /// The Welcome each listener gets.
    public func welcome() -> PCEnvelope {
        var welcome = PCWelcome()
        welcome.protocolVersion = partyCastProtocolVersion
        welcome.broadcasterName = options.name
        welcome.sessionID = sessionID
        var envelope = PCEnvelope()
        envelope.body = .welcome(welcome)
        return envelope
    }

    // MARK: Snapshots

    /// What the pacer last published, plus the timing that lets a snapshot say what is heard now.
    struct Published {
        var view = PartySnapshot()
        var segments: [Segment] = []
        var pausedAt: (item: Int, songFrame: Int)?
        var origin: UInt64 = 0
        var sampleRate = 48000
        var settings: [String: ListenerSettings] = [:]
        var covers: [Int: CoverArt] = [:]
        var revision: UInt64 = 0
        var lastCurrent: Int?
    }

    struct Subscribers {
        var continuations: [Int: AsyncStream<PartySnapshot>.Continuation] = [:]
        var nextID = 0
    }

    private func makeSnapshot() -> PartySnapshot {
        let peers = fanout.peers
        return published.withLockedValue { p in
            var view = p.view
            view.revision = p.revision
            let now = monotonicNanoseconds()
            if let paused = p.pausedAt {
                view.current = paused.item
                view.elapsedSeconds = Double(paused.songFrame) / Double(p.sampleRate)
            } else if now >= p.origin, let heard = Self.segment(heardAt: Self.position(at: now, origin: p.origin, rate: p.sampleRate), in: p.segments) {
                view.current = heard.segment.item
                view.elapsedSeconds = Double(heard.songFrame) / Double(p.sampleRate)
            }
            view.refused = fanout.refusals.counts
            view.listeners = peers.map { peer in
                let settings = p.settings[peer.listenerID] ?? ListenerSettings()
                return PartySnapshot.Listener(id: peer.listenerID, name: peer.name, host: peer.host, address: peer.address,
                                              volume: settings.volume, muted: settings.muted,
                                              latencyOffsetMilliseconds: settings.latencyOffsetMilliseconds ?? peer.latencyOffsetMilliseconds,
                                              bufferMilliseconds: peer.bufferMilliseconds, syncErrorMicroseconds: peer.syncErrorMicroseconds,
                                              clockBoundMicroseconds: peer.clockBoundMicroseconds)
            }
            return view
        }
    }

    /// Tells every subscriber the party changed.
    private func republish() {
        published.withLockedValue { $0.revision &+= 1 }
        let snapshot = makeSnapshot()
        for continuation in subscribers.withLockedValue({ Array($0.continuations.values) }) { continuation.yield(snapshot) }
    }

    // MARK: The pacer

    /// One item of the queue, probed once for what the remotes show.
    struct Item {
        var id: Int
        var source: PartySource
        var tags = TrackTags()
        var durationFrames: Int?
        var sampleRate = 48000
        var cover: CoverArt?
        var failure: PartyCastError?

        /// A station's name stands in for a title it does not announce, the source's label for both.
        var title: String { tags.title ?? tags.station ?? source.label }

        var view: PartySnapshot.Item {
            PartySnapshot.Item(id: id, title: title, artist: tags.artist, album: tags.album,
                               durationSeconds: durationFrames.map { Double($0) / Double(sampleRate) }, hasCover: cover != nil)
        }
    }

    /// From timeline position `position` on, the song `item` plays from its frame `songFrame`.
    struct Segment {
        var position: UInt64
        var item: Int
        var songFrame: Int
    }

    /// A chunk sent ahead of its time, with the PCM it carries (none when the source's packets pass
    /// through): a pause takes it back exactly.
    struct SentChunk {
        var position: UInt64
        var frames: Int
        var samples: [Float]
    }

    /// A listener's settings, kept across its reconnects.
    struct ListenerSettings {
        var volume = 100
        var muted = false
        /// Set from the remote; nil: the listener's own `--latency-offset`.
        var latencyOffsetMilliseconds: Int?
        /// Where its last Gain started: the next may not start earlier.
        var lastGainPosition: UInt64 = 0
    }

    struct PacerState {
        var queue: [Item] = []
        var nextItemID = 1
        /// Index in `queue` of the item being sent; nil before the first and after the last.
        var currentIndex: Int?
        var source: PCMSource?
        var pending: [Float] = []
        var encoder: AudioEncoder?
        /// The item's own packets instead of `source`, when the codec passes them through.
        var packets: PacketSource?
        /// One for the whole broadcast, set by the first source.
        var chunkFormat: ChunkFormat?
        /// What a pause sends after its fade when packets pass through.
        var silentPacket: AudioPacket?
        var origin: UInt64 = 0
        /// The next chunk's position.
        var timelineFrames: UInt64 = 0
        var sequence: UInt64 = 0
        var streamIndex: UInt32 = 0
        var sent: [SentChunk] = []
        var segments: [Segment] = []
        var paused = false
        /// While paused: what was taken back, and the segments it held (as offsets from the pause).
        var pausedSegments: [(offset: UInt64, item: Int, songFrame: Int)] = []
        var partyVolume = 100
        var settings: [String: ListenerSettings] = [:]
        var reachedEnd = false
    }

    /// What every chunk of the broadcast carries.
    struct ChunkFormat {
        var format: AudioFormat
        var framesPerChunk: Int
        var preSkip: Int
    }

    enum Request: Sendable {
        case command(PartyCommand)
        case add(Item)
    }

    /// Streams the queue until its end (true) or `stop()` (false).
    public func run() throws(PartyCastError) -> Bool {
        defer {
            // From now on every command hears that the party is over, those waiting included.
            let waiting = inbox.withLockedValue { queue in
                stopRequested.store(true, ordering: .releasing)
                defer { queue.removeAll() }
                return queue
            }
            for (_, continuation) in waiting { continuation.resume(returning: .failure(PartyCommandError(.invalid, "the party is over"))) }
        }
        state.origin = monotonicNanoseconds() + UInt64(options.startInSeconds * 1e9)
        publishState()
        // Every source failed: the broadcast has nothing to play, and the reason is the last one.
        guard try openFirstPlayable(from: 0) else {
            if stopRequested.load(ordering: .acquiring) { return false }
            throw state.queue.last?.failure ?? PartyCastError(.notAudio, "nothing to play")
        }
        updateGreeting()
        while !stopRequested.load(ordering: .acquiring) {
            applyCommands()
            if state.paused {
                // Nothing changes until a command comes: no wakeups meanwhile.
                wakeup.wait(nanoseconds: 3_600_000_000_000)
                continue
            }
            if state.reachedEnd {
                // The last chunk has gone out: wait for it to be heard (or for a command that adds more).
                let end = presentationTime(ofFrame: state.timelineFrames)
                let now = monotonicNanoseconds()
                if now >= end { break }
                wakeup.wait(nanoseconds: end - now)
                continue
            }
            try sendNextChunk(waiting: true)
        }
        guard !stopRequested.load(ordering: .acquiring) else { return false }
        published.withLockedValue { $0.view.ended = true; $0.pausedAt = nil; $0.segments = [] }
        republish()
        return true
    }

    /// Decodes and encodes the next chunk and sends it when it is due (`waiting`), or at once.
    private func sendNextChunk(waiting: Bool) throws(PartyCastError) {
        guard state.chunkFormat != nil else { return }
        let position = state.timelineFrames
        let pts = presentationTime(ofFrame: position)
        // Due `leadMilliseconds` before it plays; what falls due within the next batch window goes
        // out with it, so each listener gets one write per window rather than per chunk.
        let due = pts - min(pts, UInt64(options.leadMilliseconds) * 1_000_000)
        if waiting, due > monotonicNanoseconds() + Self.batchWindowNanoseconds {
            fanout.flushChunks()
            pruneHeard()
            wakeup.wait(nanoseconds: due - min(due, monotonicNanoseconds()))
            // Woken early by a command: it may change what this chunk holds; the loop starts over.
            if monotonicNanoseconds() < due { return }
        }
        guard let encoder = state.encoder else { return try sendNextPacket() }
        let channels = encoder.format.channels
        let block = encoder.framesPerPacket * channels
        while state.pending.count < block, let source = state.source {
            if try !source.produce(into: &state.pending) { try advanceToNextItem() }
        }
        announceRetitling(heardAt: position + UInt64(block / channels))
        var realFrames = encoder.framesPerPacket
        if state.pending.count < block {
            // The end of the queue: the rest, padded; the chunk counts only the real frames.
            guard !state.pending.isEmpty else { return finishQueue() }
            realFrames = state.pending.count / channels
            state.pending.append(contentsOf: repeatElement(0, count: block - state.pending.count))
        }
        let samples = Array(state.pending[0..<block])
        state.pending.removeFirst(block)
        try send(samples, realFrames: realFrames, encoder: encoder)
        state.sent.append(SentChunk(position: position, frames: realFrames, samples: Array(samples[0..<(realFrames * channels)])))
        if realFrames < encoder.framesPerPacket { finishQueue() }
    }

    /// Sends the item's next packet as it is; on to the next item at its end.
    private func sendNextPacket() throws(PartyCastError) {
        var packet: AudioPacket?
        while packet == nil, let source = state.packets {
            packet = try source.nextPacket()
            if packet == nil { try advanceToNextItem() }
        }
        guard let packet else { return finishQueue() }
        let position = state.timelineFrames
        try sendChunk(packet.payload, skipFrames: packet.skipFrames, realFrames: packet.frames)
        state.sent.append(SentChunk(position: position, frames: packet.frames, samples: []))
    }

    /// A live source's title changed (a station's `StreamTitle`): the listeners and the remotes hear
    /// of it from `position` on, as of a song that starts there.
    private func announceRetitling(heardAt position: UInt64) {
        guard let index = state.currentIndex, state.queue[index].source.isLive, let tags = state.source?.tags,
              tags != state.queue[index].tags, let chunkFormat = state.chunkFormat,
              let (_, songFrame) = Self.segment(heardAt: position, in: state.segments) else { return }
        state.queue[index].tags = tags
        logger.info("now playing: \(state.queue[index].title)")
        let retitled = frame(metadata(state.queue[index], start: position, songFrame: songFrame))
        fanout.broadcast(retitled)
        fanout.setPreamble([frame(streamFormat(chunkFormat, total: nil)), retitled])
        publishState()
    }

    /// Encodes one packet and queues it as the chunk at the timeline's end.
    private func send(_ samples: [Float], realFrames: Int, encoder: AudioEncoder) throws(PartyCastError) {
        let packet = try samples.withUnsafeBufferPointer { b throws(PartyCastError) in try encoder.encode(b) }
        try sendChunk(packet, skipFrames: 0, realFrames: realFrames)
    }

    /// Queues a packet as the chunk at the timeline's end.
    private func sendChunk(_ packet: [UInt8], skipFrames: Int, realFrames: Int) throws(PartyCastError) {
        let position = state.timelineFrames
        let pts = presentationTime(ofFrame: position)
        var chunk = PCAudioChunk()
        chunk.sequence = state.sequence
        chunk.mediaPosition = position
        chunk.presentationNanoseconds = Int64(pts)
        chunk.frameCount = UInt32(realFrames)
        chunk.skipFrames = UInt32(skipFrames)
        chunk.streamIndex = state.streamIndex
        chunk.payload = Data(packet)
        var envelope = PCEnvelope()
        envelope.body = .audioChunk(chunk)
        fanout.queueChunk(frame(envelope), position: position, presentationNanoseconds: pts, now: monotonicNanoseconds())
        state.sequence += 1
        state.timelineFrames += UInt64(realFrames)
    }

    /// One chunk of silence where the timeline stops (a pause): a listener's interpolator reads a
    /// few frames ahead, and without it the last frames of the fade would be lost to an underrun.
    private func sendSilence() throws(PartyCommandError) {
        do throws(PartyCastError) {
            if let encoder = state.encoder {
                try send([Float](repeating: 0, count: encoder.framesPerPacket * encoder.format.channels), realFrames: encoder.framesPerPacket, encoder: encoder)
            } else if let silence = state.silentPacket {
                try sendChunk(silence.payload, skipFrames: silence.skipFrames, realFrames: silence.frames)
            }
        } catch {
            throw PartyCommandError(.invalid, error.message)
        }
        fanout.flushChunks()
    }

    /// Every item has been sent: the tail is out, so the broadcast ends once it has been heard.
    private func finishQueue() {
        fanout.flushChunks()
        state.reachedEnd = true
    }

    /// Opens the first item from `index` on that plays (skipping, with a line, those that don't);
    /// false when none does.
    private func openFirstPlayable(from index: Int) throws(PartyCastError) -> Bool {
        var index = index
        while index < state.queue.count {
            do throws(PartyCastError) {
                try open(index: index, atSongFrame: 0, position: state.timelineFrames + UInt64(state.pending.count / max(1, state.chunkFormat?.format.channels ?? 2)))
                return true
            } catch {
                if stopRequested.load(ordering: .acquiring) { return false }
                logger.warning("skipping \(state.queue[index].source.label): \(error.message)")
                state.queue[index].failure = error
                index += 1
            }
        }
        return false
    }

    /// The current item ended: on to the next (or the first again with `--loop`).
    private func advanceToNextItem() throws(PartyCastError) {
        if let live = state.source as? LiveSource, let index = state.currentIndex {
            logger.info("\(state.queue[index].source.label) ended: \(live.healthSummary)")
        }
        state.source = nil
        state.packets = nil
        sendEndOfStream()
        let next = (state.currentIndex ?? -1) + 1
        if try openFirstPlayable(from: next) { return }
        if options.loop, !state.queue.isEmpty, try openFirstPlayable(from: 0) { return }
        state.currentIndex = nil
        // The codec's delay in silence after the last song, so its last real samples come out too.
        if let chunkFormat = state.chunkFormat { state.pending.append(contentsOf: repeatElement(0, count: chunkFormat.preSkip * chunkFormat.format.channels)) }
    }

    /// Opens item `index` at `songFrame`; its first frame is heard at timeline `position`.
    private func open(index: Int, atSongFrame songFrame: Int, position: UInt64) throws(PartyCastError) {
        let item = state.queue[index]
        let opened: (tags: TrackTags, duration: Duration)
        if options.codec.passesThrough {
            let packets = try openPackets(item.source)
            if songFrame > 0 { try packets.seek(toFrame: songFrame) }
            state.packets = packets
            opened = (packets.tags, packets.duration)
        } else {
            let source = try openDecoded(item.source)
            if songFrame > 0 { try source.seek(toFrame: songFrame) }
            state.source = source
            opened = (source.tags, source.duration)
        }
        let chunkFormat = state.chunkFormat!  // set by the open above
        state.currentIndex = index
        state.streamIndex &+= 1
        state.queue[index].tags = opened.tags
        state.queue[index].durationFrames = opened.duration.frames
        state.queue[index].sampleRate = chunkFormat.format.sampleRate
        state.segments.append(Segment(position: position, item: item.id, songFrame: songFrame))
        fanout.setPreamble([frame(streamFormat(chunkFormat, total: opened.duration.frames)),
                            frame(metadata(state.queue[index], start: position, songFrame: songFrame))])
        publishState()
    }

    /// A source decoded and converted to the broadcast's format, ready to encode.
    private func openDecoded(_ item: PartySource) throws(PartyCastError) -> PCMSource {
        let decoded = try LiveSource.open(item, wakeup: wakeup) { stopRequested.load(ordering: .acquiring) }
        guard let sourceFormat = decoded.format else { throw PartyCastError(.notAudio, "no audio") }
        // One format for the whole broadcast: the encoder's, set by the first source.
        if state.encoder == nil {
            let encoder = try makeEncoder(for: sourceFormat)
            state.encoder = encoder
            state.chunkFormat = ChunkFormat(format: encoder.format, framesPerChunk: encoder.framesPerPacket, preSkip: encoder.preSkip)
        }
        let target = state.encoder!.format
        let source: PCMSource = sourceFormat == target
            ? decoded : try FormatConverter(source: decoded, sampleRate: target.sampleRate, channels: target.channels)
        try source.prepare()
        return source
    }

    /// A source's own packets, which must match the broadcast's format: they are sent as they are.
    private func openPackets(_ item: PartySource) throws(PartyCastError) -> PacketSource {
        guard let open = item.openPackets else { throw Self.noPackets }
        let packets = try LiveSource.openAside(open, mayWait: item.isLive, wakeup: wakeup, stopping: { stopRequested.load(ordering: .acquiring) }) {
            source throws(PartyCastError) in try source.prepare()
        }.source
        guard let format = packets.format else { throw PartyCastError(.notAudio, "no audio") }
        if state.chunkFormat == nil {
            state.chunkFormat = ChunkFormat(format: format, framesPerChunk: packets.framesPerPacket, preSkip: 0)
            state.silentPacket = packets.silentPacket
        }
        let broadcast = state.chunkFormat!
        guard format == broadcast.format, packets.framesPerPacket == broadcast.framesPerChunk else {
            throw PartyCastError(.unsupportedFormat, "it is \(format), the broadcast \(broadcast.format), and --codec \(options.codec.name) sends frames as they are, without resampling (use --codec opus to mix them)")
        }
        return packets
    }

    static let noPackets = PartyCastError(.unsupportedFormat, "a tone or a pipe has no MP3 frames to pass through (use --codec opus or pcm for it)")

    // MARK: Commands

    private func applyCommands() {
        let requests = inbox.withLockedValue { q in defer { q.removeAll() }; return q }
        guard !requests.isEmpty else { return }
        for (request, continuation) in requests {
            let result: Result<PartySnapshot, PartyCommandError>
            do throws(PartyCommandError) {
                try apply(request)
                publishState()
                result = .success(makeSnapshot())
            } catch {
                result = .failure(error)
            }
            continuation.resume(returning: result)
        }
        republish()
    }

    private func apply(_ request: Request) throws(PartyCommandError) {
        switch request {
        case .add(var item):
            item.id = state.nextItemID
            state.nextItemID += 1
            state.queue.append(item)
            if let cover = item.cover { published.withLockedValue { $0.covers[item.id] = cover } }
            logger.info("queued \(item.view.title)")
            if state.reachedEnd || state.currentIndex == nil {
                // The queue had played out: the new song follows what is still being heard.
                state.reachedEnd = false
                state.timelineFrames = max(state.timelineFrames, position(at: monotonicNanoseconds() + Self.controlMarginNanoseconds))
                try replace(with: state.queue.count - 1, songFrame: 0, cut: false)
            }
        case .command(let command):
            try apply(command)
        }
    }

    private func apply(_ command: PartyCommand) throws(PartyCommandError) {
        switch command {
        case .pause:
            guard !state.paused else { return }
            let cut = try cutPosition()
            fadeEveryone(to: 0, endingAt: cut)
            let withdrawn = withdraw(from: cut)
            // What was taken back plays first on resume: not a sample lost or repeated.
            state.pending.insert(contentsOf: withdrawn.flatMap(\.samples), at: 0)
            state.pausedSegments = state.segments.filter { $0.position >= cut }.map { ($0.position - cut, $0.item, $0.songFrame) }
            state.segments.removeAll { $0.position >= cut }
            if state.pausedSegments.first?.offset != 0, let heard = Self.segment(heardAt: cut, in: state.segments) {
                state.pausedSegments.insert((0, heard.segment.item, heard.songFrame), at: 0)
            }
            state.timelineFrames = cut
            try sendSilence()
            state.paused = true
            if options.codec.passesThrough, let heard = state.pausedSegments.first, let index = state.queue.firstIndex(where: { $0.id == heard.item }) {
                // Packets cannot be cut like samples: the resume starts a fresh stream at the frame paused on.
                try replace(with: index, songFrame: heard.songFrame, cut: false)
            }
            fanout.broadcast(frame(partyState()))
            let heard = state.pausedSegments.first.flatMap { p in state.queue.first { $0.id == p.item }.map { ($0, p.songFrame) } }
            logger.info("paused\(heard.map { String(format: " at %.3f s of %@", Double($0.1) / Double($0.0.sampleRate), $0.0.view.title) } ?? "") (timeline frame \(cut))")
        case .resume:
            guard state.paused else { return }
            let resumeAt = max(state.timelineFrames, position(at: monotonicNanoseconds() + Self.controlMarginNanoseconds))
            state.timelineFrames = resumeAt
            for segment in state.pausedSegments {
                state.segments.append(Segment(position: resumeAt + segment.offset, item: segment.item, songFrame: segment.songFrame))
            }
            if let first = state.pausedSegments.first, let index = state.queue.firstIndex(where: { $0.id == first.item }) {
                fanout.broadcast(frame(metadata(state.queue[index], start: resumeAt, songFrame: first.songFrame)))
            }
            state.pausedSegments = []
            state.paused = false
            fanout.broadcast(frame(partyState()))
            fadeEveryoneIn(at: resumeAt)
            logger.info("resumed (timeline frame \(resumeAt))")
        case .next:
            let current = currentlyHeard().flatMap { h in state.queue.firstIndex { $0.id == h.item } } ?? state.currentIndex ?? -1
            var next = current + 1
            if next == state.queue.count && options.loop { next = 0 }
            guard next < state.queue.count else { throw PartyCommandError(.invalid, "this is the last song of the queue") }
            try replace(with: next, songFrame: 0, cut: true)
        case .previous:
            let heard = currentlyHeard()
            if let heard, let index = state.queue.firstIndex(where: { $0.id == heard.item }),
               Double(heard.songFrame) / Double(state.queue[index].sampleRate) > Self.restartThresholdSeconds || index == 0 {
                try replace(with: index, songFrame: 0, cut: true)
            } else if let index = heard.flatMap({ h in state.queue.firstIndex { $0.id == h.item } }) {
                try replace(with: index - 1, songFrame: 0, cut: true)
            } else {
                throw PartyCommandError(.invalid, "nothing is playing")
            }
        case .seek(let seconds):
            guard let heard = currentlyHeard(), let index = state.queue.firstIndex(where: { $0.id == heard.item }) else {
                throw PartyCommandError(.invalid, "nothing is playing")
            }
            let item = state.queue[index]
            guard seconds.isFinite, seconds >= 0 else { throw PartyCommandError(.invalid, "seek takes seconds from the start of the song, ≥ 0") }
            if let frames = item.durationFrames, seconds * Double(item.sampleRate) >= Double(frames) {
                throw PartyCommandError(.invalid, String(format: "%.3f s is past the end of %@ (%.3f s)", seconds, item.view.title, Double(frames) / Double(item.sampleRate)))
            }
            guard seconds < 86_400 else { throw PartyCommandError(.invalid, "seek past the end") }
            try replace(with: index, songFrame: Int((seconds * Double(item.sampleRate)).rounded()), cut: true)
        case .play(let id):
            guard let index = state.queue.firstIndex(where: { $0.id == id }) else { throw PartyCommandError(.notFound, "no item \(id) in the queue") }
            try replace(with: index, songFrame: 0, cut: true)
        case .add:
            throw PartyCommandError(.invalid, "add goes through perform")  // opened off the pacer, see perform(_:)
        case .remove(let id):
            guard let index = state.queue.firstIndex(where: { $0.id == id }) else { throw PartyCommandError(.notFound, "no item \(id) in the queue") }
            if index == state.currentIndex {
                if index + 1 < state.queue.count { try replace(with: index + 1, songFrame: 0, cut: true) }
                else { throw PartyCommandError(.invalid, "the song playing is the last of the queue: skip or pause instead") }
            }
            state.queue.remove(at: index)
            if let current = state.currentIndex, index < current { state.currentIndex = current - 1 }
        case .move(let id, let to):
            guard let index = state.queue.firstIndex(where: { $0.id == id }) else { throw PartyCommandError(.notFound, "no item \(id) in the queue") }
            guard (0..<state.queue.count).contains(to) else { throw PartyCommandError(.invalid, "index \(to) is outside the queue (0…\(state.queue.count - 1))") }
            let currentID = state.currentIndex.map { state.queue[$0].id }
            let item = state.queue.remove(at: index)
            state.queue.insert(item, at: to)
            state.currentIndex = currentID.flatMap { id in state.queue.firstIndex { $0.id == id } }
        case .partyVolume(let percent):
            guard (0...100).contains(percent) else { throw PartyCommandError(.invalid, "volume takes 0…100 percent") }
            state.partyVolume = percent
            rampEveryone()
        case .listenerVolume(let name, let percent):
            guard (0...100).contains(percent) else { throw PartyCommandError(.invalid, "volume takes 0…100 percent") }
            let id = try listenerID(name)
            state.settings[id, default: ListenerSettings()].volume = percent
            ramp(id)
        case .mute(let name, let muted):
            let id = try listenerID(name)
            state.settings[id, default: ListenerSettings()].muted = muted
            ramp(id)
        case .latencyOffset(let name, let milliseconds):
            guard (-2000...2000).contains(milliseconds) else { throw PartyCommandError(.invalid, "the latency offset takes −2000…2000 ms") }
            let id = try listenerID(name)
            state.settings[id, default: ListenerSettings()].latencyOffsetMilliseconds = milliseconds
            var settings = PCListenerSettings()
            settings.latencyOffsetMilliseconds = Int32(milliseconds)
            var envelope = PCEnvelope()
            envelope.body = .listenerSettings(settings)
            fanout.send(frame(envelope), toListener: id)
        }
    }

    /// Replaces what is heard from the next cut on (or, paused, what resume plays) with item
    /// `index` from `songFrame`. `cut`: the old audio is withdrawn and faded out first.
    private func replace(with index: Int, songFrame: Int, cut: Bool) throws(PartyCommandError) {
        guard state.queue.indices.contains(index) else { throw PartyCommandError(.notFound, "no such item") }
        var position = state.timelineFrames
        if cut && !state.paused {
            position = try cutPosition()
            fadeEveryone(to: 0, endingAt: position)
            _ = withdraw(from: position)
            state.segments.removeAll { $0.position >= position }
            state.timelineFrames = position
        }
        state.pending.removeAll(keepingCapacity: true)
        state.reachedEnd = false
        state.source = nil
        state.packets = nil
        do throws(PartyCastError) {
            try open(index: index, atSongFrame: songFrame, position: position)
        } catch {
            state.queue[index].failure = error
            logger.warning("cannot play \(state.queue[index].source.label): \(error.message)")
            _ = try? openFirstPlayable(from: index + 1)
            throw PartyCommandError(.invalid, "\(state.queue[index].source.label): \(error.message)")
        }
        if state.paused {
            state.segments.removeAll { $0.position >= position }
            state.pausedSegments = [(0, state.queue[index].id, songFrame)]
        } else if cut {
            fadeEveryoneIn(at: position)
        }
    }

    /// The first chunk boundary heard at least the control margin (and a fade) from now: the frame
    /// where a command takes effect on every listener. Sends ahead up to it if it is not sent yet.
    private func cutPosition() throws(PartyCommandError) -> UInt64 {
        let earliest = position(at: monotonicNanoseconds() + Self.controlMarginNanoseconds) + UInt64(fadeFrames)
        if let chunk = state.sent.first(where: { $0.position >= earliest }) { return chunk.position }
        do throws(PartyCastError) {
            while state.timelineFrames < earliest && !state.reachedEnd && (state.source != nil || state.packets != nil) {
                try sendNextChunk(waiting: false)
            }
        } catch {
            throw PartyCommandError(.invalid, error.message)
        }
        fanout.flushChunks()
        return state.timelineFrames
    }

    /// Takes back every chunk from `position` on: from the backlog, the batch, and (by telling
    /// them) from every listener; returns what they carried.
    private func withdraw(from position: UInt64) -> [SentChunk] {
        let withdrawn = state.sent.filter { $0.position >= position }
        state.sent.removeAll { $0.position >= position }
        var message = PCWithdraw()
        message.fromPosition = position
        var envelope = PCEnvelope()
        envelope.body = .withdraw(message)
        fanout.withdraw(from: position, notice: frame(envelope))
        return withdrawn
    }

    /// The song and its frame heard at the next cut, or paused on.
    private func currentlyHeard() -> (item: Int, songFrame: Int)? {
        if state.paused, let first = state.pausedSegments.first { return (first.item, first.songFrame) }
        let at = position(at: monotonicNanoseconds() + Self.controlMarginNanoseconds)
        return Self.segment(heardAt: at, in: state.segments).map { ($0.segment.item, $0.songFrame) }
    }

    private func listenerID(_ name: String) throws(PartyCommandError) -> String {
        let peers = fanout.peers
        if peers.contains(where: { $0.listenerID == name }) || state.settings[name] != nil { return name }
        let named = Set(peers.filter { $0.name == name }.map(\.listenerID))
        guard let id = named.first else { throw PartyCommandError(.notFound, "no listener \(name)") }
        guard named.count == 1 else { throw PartyCommandError(.ambiguous, "\(named.count) listeners are called \(name): use an id") }
        return id
    }

    // MARK: Gains

    private var fadeFrames: Int { Int(Self.fadeSeconds * Double(sampleRate)) }

    /// The amplitude for a volume: cubic, so that equal steps of the slider sound like equal steps.
    private func gain(forVolume volume: Int, muted: Bool, party: Int) -> Float {
        muted ? 0 : Float(pow(Double(volume) / 100, 3) * pow(Double(party) / 100, 3))
    }

    private func gain(of id: String) -> Float {
        let settings = state.settings[id] ?? ListenerSettings()
        return gain(forVolume: settings.volume, muted: settings.muted, party: state.partyVolume)
    }

    private func sendGain(_ value: Float, at position: UInt64, ramp: Int, to id: String) {
        let start = max(position, state.settings[id]?.lastGainPosition ?? 0)
        state.settings[id, default: ListenerSettings()].lastGainPosition = start
        var message = PCGain()
        message.atPosition = start
        message.gain = value
        message.rampFrames = UInt32(ramp)
        var envelope = PCEnvelope()
        envelope.body = .gain(message)
        fanout.send(frame(envelope), toListener: id)
    }

    private var everyone: Set<String> { Set(fanout.peers.map(\.listenerID)) }

    private func fadeEveryone(to value: Float, endingAt position: UInt64) {
        let fade = fadeFrames
        for id in everyone { sendGain(value, at: position - min(position, UInt64(fade)), ramp: fade, to: id) }
        updateGreeting()
    }

    private func fadeEveryoneIn(at position: UInt64) {
        for id in everyone { sendGain(gain(of: id), at: position, ramp: fadeFrames, to: id) }
        updateGreeting()
    }

    /// A volume change, heard after the control margin (paused: when the party resumes).
    private func ramp(_ id: String) {
        updateGreeting()
        guard !state.paused else { return }
        let rate = Double(sampleRate)
        sendGain(gain(of: id), at: position(at: monotonicNanoseconds() + Self.controlMarginNanoseconds),
                 ramp: Int(Self.volumeRampSeconds * rate), to: id)
    }

    private func rampEveryone() {
        for id in everyone.union(state.settings.keys) { ramp(id) }
        updateGreeting()
    }

    /// What a listener joining now is told first: paused or not, and its gain.
    private func updateGreeting() {
        let gains = state.settings.mapValues { gain(forVolume: $0.volume, muted: $0.muted, party: state.partyVolume) }
        let offsets = state.settings.compactMapValues(\.latencyOffsetMilliseconds)
        fanout.setGreeting(partyState: frame(partyState()), defaultGain: state.paused ? 0 : gain(forVolume: 100, muted: false, party: state.partyVolume),
                           gains: state.paused ? gains.mapValues { _ in 0 } : gains, latencyOffsets: offsets)
    }

    private func partyState() -> PCEnvelope {
        var message = PCPartyState()
        message.paused = state.paused
        var envelope = PCEnvelope()
        envelope.body = .partyState(message)
        return envelope
    }

    // MARK: Bookkeeping

    private func publishState() {
        let view = state.queue.map(\.view)
        let settings = state.settings
        let segments = state.segments
        let paused = state.paused ? state.pausedSegments.first.map { (item: $0.item, songFrame: $0.songFrame) } : nil
        let rate = sampleRate
        published.withLockedValue { p in
            p.view.queue = view
            p.view.paused = state.paused
            p.view.volume = state.partyVolume
            p.segments = segments
            p.pausedAt = paused
            p.origin = state.origin
            p.sampleRate = rate
            p.settings = settings
        }
    }

    /// Forgets chunks and segments that have been heard (keeping the segment heard now), and tells
    /// the remotes when another song has started being heard.
    private func pruneHeard() {
        let now = position(at: monotonicNanoseconds())
        state.sent.removeAll { $0.position + UInt64($0.frames) <= now }
        if let heardIndex = state.segments.lastIndex(where: { $0.position <= now }), heardIndex > 0 {
            state.segments.removeFirst(heardIndex)
        }
        let current = Self.segment(heardAt: now, in: state.segments)?.segment.item
        let changed = published.withLockedValue { p in
            defer { p.lastCurrent = current; p.segments = state.segments }
            return p.lastCurrent != current
        }
        if changed { republish() }
    }

    static func segment(heardAt position: UInt64, in segments: [Segment]) -> (segment: Segment, songFrame: Int)? {
        guard let segment = segments.last(where: { $0.position <= position }) else { return nil }
        return (segment, segment.songFrame + Int(position - segment.position))
    }

    private func presentationTime(ofFrame frame: UInt64) -> UInt64 {
        let rate = sampleRate
        return state.origin &+ UInt64(StreamTime.nanoseconds(frames: Int64(clamping: frame), sampleRate: rate) ?? Int64.max)
    }

    /// The timeline position heard at `time` (0 before the broadcast starts).
    private func position(at time: UInt64) -> UInt64 {
        Self.position(at: time, origin: state.origin, rate: sampleRate)
    }

    static func position(at time: UInt64, origin: UInt64, rate: Int) -> UInt64 {
        guard time > origin else { return 0 }
        let elapsed = time - origin
        return elapsed / 1_000_000_000 * UInt64(rate) + (elapsed % 1_000_000_000) * UInt64(rate) / 1_000_000_000
    }

    /// The broadcast's rate, the timeline's unit (48 kHz until the first source sets it).
    private var sampleRate: Int { state.chunkFormat?.format.sampleRate ?? 48000 }

    private func makeEncoder(for format: AudioFormat) throws(PartyCastError) -> AudioEncoder {
        try options.codec.makeEncoder(for: format, bitrateKbps: options.bitrateKbps)
    }

    private func sendEndOfStream() {
        var end = PCEndOfStream()
        end.streamIndex = state.streamIndex
        var envelope = PCEnvelope()
        envelope.body = .endOfStream(end)
        fanout.broadcast(frame(envelope))
    }

    private func streamFormat(_ chunks: ChunkFormat, total: Int?) -> PCEnvelope {
        var format = PCStreamFormat()
        format.codec = options.codec.kind
        format.sampleRate = UInt32(chunks.format.sampleRate)
        format.channels = UInt32(chunks.format.channels)
        format.framesPerChunk = UInt32(chunks.framesPerChunk)
        format.preSkip = UInt32(chunks.preSkip)
        format.streamIndex = state.streamIndex
        format.totalFrames = UInt64(total ?? 0)
        var envelope = PCEnvelope()
        envelope.body = .streamFormat(format)
        return envelope
    }

    private func metadata(_ item: Item, start: UInt64, songFrame: Int) -> PCEnvelope {
        var metadata = PCMetadata()
        metadata.title = item.title
        metadata.artist = item.tags.artist ?? ""
        metadata.album = item.tags.album ?? ""
        metadata.durationFrames = UInt64(item.durationFrames ?? 0)
        metadata.streamIndex = state.streamIndex
        metadata.startPosition = start
        metadata.songFrame = UInt64(songFrame)
        var envelope = PCEnvelope()
        envelope.body = .metadata(metadata)
        return envelope
    }

    private func frame(_ envelope: PCEnvelope) -> ByteBuffer {
        ByteBuffer(bytes: (try? WireFraming.encode(envelope)) ?? [])
    }

    /// Opens a source once for what the remotes show (title, duration, cover); one that cannot be
    /// opened stays in the queue, marked, and is skipped when its turn comes. `passingThrough`: it is
    /// opened for its packets, as it will play.
    static func probe(_ source: PartySource, id: Int, passingThrough: Bool) -> Item {
        var item = Item(id: id, source: source)
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

    /// Tells every listener the broadcast is over and closes the connections once flushed.
    /// Waits at most `goodbyeDeadline` for any listener, however slow.
    public func sayGoodbye(_ reason: String) {
        var goodbye = PCGoodbye()
        goodbye.reason = reason
        var envelope = PCEnvelope()
        envelope.body = .goodbye(goodbye)
        let closing = fanout.finish(with: frame(envelope), deadline: Self.goodbyeDeadline)
        for future in closing { _ = try? future.wait() }
    }

    /// Long enough to flush a goodbye to any listener still reading; short enough that Ctrl-C ends
    /// the broadcaster within 2 s.
    public static let goodbyeDeadline = TimeAmount.milliseconds(1000)
}
