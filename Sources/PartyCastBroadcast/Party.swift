import Foundation
import Logging
import NIOCore
import PartyCastCodec
import PartyCastControlSeam
import PartyCastCore
import PartyCastSources
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
    /// The start waits at most this long past `startInSeconds` for the clocks of the listeners
    /// joined by then to settle (StartGate.swift); 0: it does not wait.
    public var settleWaitSeconds = 8.0
    public var loop = false

    /// What `broadcaster share` accepts for each of the times above; a party takes an embedder's
    /// value outside them as the nearest within (a NaN as the default).
    public static let startInRange = 0.0...3600
    public static let settleWaitRange = 0.0...60
    /// Below ~150 ms a listener's own output latency (ALSA's is 100 ms) would eat the margin.
    public static let leadRange = 150...10_000

    public init(name: String) { self.name = name }

    /// These options with each time within its range: the pacer's arithmetic on them cannot trap.
    func withinRanges() -> BroadcastOptions {
        func clamped(_ value: Double, _ range: ClosedRange<Double>, default fallback: Double) -> Double {
            value.isNaN ? fallback : min(max(value, range.lowerBound), range.upperBound)
        }
        var options = self
        options.startInSeconds = clamped(startInSeconds, Self.startInRange, default: 1)
        options.settleWaitSeconds = clamped(settleWaitSeconds, Self.settleWaitRange, default: 8)
        options.leadMilliseconds = min(max(leadMilliseconds, Self.leadRange.lowerBound), Self.leadRange.upperBound)
        return options
    }
}

/// The party: source → encoder → fan-out, and the one place where the party's state changes.
///
/// One thread (the pacer, Pacer.swift) owns the queue, the current source, the timeline and every
/// listener's settings. The remotes only queue commands (`perform`) and read snapshots. Each chunk
/// is sent `leadMilliseconds` before its presentation time, on one line of positions and
/// presentation times (`Timeline`). A command (CommandHandlers.swift) takes effect at the first
/// chunk boundary F heard at least `controlMargin` from now, the same frame on every listener: the
/// pacer withdraws what it sent from F on (`Withdraw`), fades the old audio out just before F and
/// the new in just after (per-listener `Gain`, `GainPolicy`), and sends the replacement.
public final class Party: PartyControl {
    /// How far ahead of now a command takes effect: the Withdraw must reach every listener, and be
    /// applied, before its output thread reads frame F (an ALSA device reads ~100 ms ahead).
    static let controlMarginNanoseconds: UInt64 = 160_000_000
    /// `previous` restarts the song instead when more than this of it has been heard.
    static let restartThresholdSeconds = 3.0
    /// Chunks due this soon after the one being sent go out with it.
    static let batchWindowNanoseconds: UInt64 = 100_000_000

    let options: BroadcastOptions
    let fanout: Fanout
    let logger: Logger
    /// What the remote page offers to add: the files the broadcaster was started with, then the library's.
    private let libraryFiles: [String]
    private let libraryFolder: Library
    private let catalogue: LibraryCatalogue
    private let opener: @Sendable (String) throws(PartyCastError) -> ResolvedSource
    /// The player behind the party's pipe (mpd) and the pipe's item: its transport commands go there.
    let companion: (item: Int, link: any SourceCompanion)?
    /// The monotonic clock; a test's own when it drives the pacer by hand.
    let now: @Sendable () -> UInt64
    public let sessionID: UInt64

    // Commands in, snapshots out: the only state shared with other threads.
    typealias Reply = @Sendable (Result<PartySnapshot, PartyCommandError>) -> Void
    let inbox = LockedValueBox<[(Request, Reply)]>([])
    /// The player's own reports dropped for a newer one since the last line that said so, and when that was.
    private let replacedReports = LockedValueBox((count: 0, loggedAt: UInt64(0)))
    let wakeup = Wakeup()
    let stopRequested = Atomic<Bool>(false)
    /// Whether the start is held for the listeners' clocks: their reports wake the pacer then.
    let startHeld = Atomic<Bool>(false)
    let published = LockedValueBox(Published())
    private let subscribers = LockedValueBox(Subscribers())

    // nonisolated(unsafe): the pacer's state, touched only by the pacer thread (and by init).
    nonisolated(unsafe) var state: PacerState

    /// - Parameters:
    ///   - sources: the songs to start with, in order.
    ///   - library: further files `add` accepts (from `--library`).
    ///   - opener: makes a source of a path `add` was given (after it was matched to the library).
    ///   - companion: the player (mpd) that feeds the first source, a pipe: it reports through
    ///     `companionReported`, and the remotes' transport commands go to it while that pipe plays.
    public convenience init(sources: [ResolvedSource], library: Library, options: BroadcastOptions, fanout: Fanout, logger: Logger,
                            opener: @escaping @Sendable (String) throws(PartyCastError) -> ResolvedSource, companion: (any SourceCompanion)? = nil) {
        self.init(sources: sources, library: library, options: options, fanout: fanout, logger: logger, opener: opener,
                  companion: companion, now: monotonicNanoseconds)
    }

    init(sources: [ResolvedSource], library: Library, options: BroadcastOptions, fanout: Fanout, logger: Logger,
         opener: @escaping @Sendable (String) throws(PartyCastError) -> ResolvedSource, companion: (any SourceCompanion)? = nil,
         now: @escaping @Sendable () -> UInt64) {
        self.options = options.withinRanges()
        self.fanout = fanout
        self.logger = logger
        self.opener = opener
        self.now = now
        libraryFiles = sources.map(\.spec) + library.files.filter { path in !sources.contains { $0.spec == path } }
        libraryFolder = library
        sessionID = UInt64.random(in: 1...UInt64.max)
        var initial = PacerState()
        for source in sources {
            initial.queue.append(PartyItem.probe(source, id: initial.nextItemID, passingThrough: options.codec.passesThrough))
            initial.nextItemID += 1
        }
        self.companion = companion.flatMap { link in initial.queue.first.map { ($0.id, link) } }
        state = initial
        let known = Dictionary(initial.queue.map { ($0.source.spec, $0.tags) }, uniquingKeysWith: { first, _ in first })
        catalogue = LibraryCatalogue(files: libraryFiles, known: known, opener: opener)
        let covers = Dictionary(uniqueKeysWithValues: state.queue.compactMap { item in item.cover.map { (item.id, $0) } })
        published.withLockedValue { [state] p in
            p.view.queue = state.queue.map(\.view)
            p.view.name = options.name
            p.covers = covers
        }
        fanout.observe { [weak self] in
            guard let self else { return }
            republish()
            if startHeld.load(ordering: .acquiring) { wakeup.signal() }
        }
    }

    /// What the pacer thread alone reads and changes.
    struct PacerState {
        var queue: [PartyItem] = []
        var nextItemID = 1
        /// Index in `queue` of the item being sent; nil before the first and after the last.
        var currentIndex: Int?
        var source: PCMSource?
        /// `source`'s tone generator, when it is one (`tone:`): what the tone command retunes.
        var tone: ToneGenerator?
        var pending: [Float] = []
        var encoder: AudioEncoder?
        /// The item's own packets instead of `source`, when the codec passes them through.
        var packets: PacketSource?
        /// One for the whole broadcast, set by the first source.
        var chunkFormat: ChunkFormat?
        /// What a pause sends after its fade when packets pass through.
        var silentPacket: AudioPacket?
        var timeline = Timeline(origin: 0)
        var sequence: UInt64 = 0
        var streamIndex: UInt32 = 0
        var gains = GainPolicy()
        var reachedEnd = false
        /// Where on the timeline the last command's change (its cut, or the resume) is heard from.
        var changeHeardFrom: UInt64 = 0
        /// The companion's last report and when it was applied (`now`).
        var companionReport: (report: SourceReport, at: UInt64)?
        /// Whether the start waits for the listeners' clocks; nil once the song has started.
        var startGate: StartGate?
    }

    enum Request: Sendable {
        case command(PartyCommand)
        case add(PartyItem)
        /// unsolicited: a change of the player's own, not the answer to a forwarded command.
        case companion(SourceReport, unsolicited: Bool)
    }

    /// How long a forwarded command may take (the player's answer and the pacer's) before the
    /// remote hears it failed: a stuck player never holds a remote.
    static let forwardDeadlineSeconds = 10
    /// At most one line a second tells of the player's reports dropped for newer ones.
    static let replacedReportsLogInterval: UInt64 = 1_000_000_000

    // MARK: The remotes' side (any thread)

    public var library: [LibraryEntry] { catalogue.list }

    public func perform(_ command: PartyCommand) async -> Result<PartySnapshot, PartyCommandError> {
        let request: Request
        switch command {
        case .add(let path):
            // Looked up and opened here, off the pacer, so a slow disk never delays the audio.
            let spec: String
            do throws(PartyCommandError) {
                spec = libraryFiles.contains(path) ? path : try libraryFolder.locate(path)
            } catch {
                return .failure(error)
            }
            do throws(PartyCastError) {
                let source = try opener(spec)
                let item = PartyItem.probe(source, id: 0, passingThrough: options.codec.passesThrough)
                if let failure = item.failure { return .failure(PartyCommandError(.invalid, "\(path): \(failure.message)")) }
                request = .add(item)
            } catch {
                return .failure(PartyCommandError(.invalid, "\(path): \(error.message)"))
            }
        case _ where command.movesTheSource:
            if case .seek(let seconds) = command {
                do throws(PartyCommandError) { try Self.checkSeek(to: seconds) } catch { return .failure(error) }
            }
            // While its pipe plays, or is about to (nothing is heard before the party starts), the
            // player behind it carries these out.
            if let companion, (makeSnapshot().current ?? companion.item) == companion.item { return await forward(command, to: companion.link) }
            request = .command(command)
        default:
            request = .command(command)
        }
        return await withCheckedContinuation { continuation in enqueue(request) { continuation.resume(returning: $0) } }
    }

    /// The player behind the pipe carries the command out; the answer is the party once it has
    /// followed the player's report of it.
    /// Answered within `forwardDeadlineSeconds` whatever the player does.
    private func forward(_ command: PartyCommand, to link: any SourceCompanion) async -> Result<PartySnapshot, PartyCommandError> {
        typealias Answer = CheckedContinuation<Result<PartySnapshot, PartyCommandError>, Never>
        let waiting = LockedValueBox<(answer: Answer?, timer: Task<Void, Never>?)>((nil, nil))
        // The first outcome answers; the later one (the player's, or the deadline's) finds none.
        @Sendable func answer(_ outcome: Result<PartySnapshot, PartyCommandError>) {
            let (answer, timer) = waiting.withLockedValue { w in defer { w = (nil, nil) }; return w }
            timer?.cancel()
            answer?.resume(returning: outcome)
        }
        return await withCheckedContinuation { continuation in
            let timer = Task {
                do { try await Task.sleep(for: .seconds(Self.forwardDeadlineSeconds)) } catch { return }
                answer(.failure(PartyCommandError(.failed, "the player (mpd) did not answer within \(Self.forwardDeadlineSeconds) s")))
            }
            waiting.withLockedValue { $0 = (continuation, timer) }
            link.forward(command) { [self] outcome in
                switch outcome {
                case .success(let report): enqueue(.companion(report, unsolicited: false), reply: answer)
                case .failure(let refusal): answer(.failure(refusal))
                }
            }
        }
    }

    /// The player behind the pipe changed (song, tags, cover, pause, position): the party follows.
    /// Called in the order the player changed, from one thread. At most one such report waits for
    /// the pacer: a newer one replaces it (it tells the whole state), so a player that reports
    /// without end cannot fill the inbox; once the party is over they are dropped.
    public func companionReported(_ report: SourceReport) {
        let reply: Reply = { [logger] outcome in
            if case .failure(let refusal) = outcome { logger.warning("cannot follow the player: \(refusal.message)") }
        }
        let replaced = inbox.withLockedValue { queue -> Int? in
            guard !stopRequested.load(ordering: .acquiring) else { return nil }
            let waiting = queue.count
            queue.removeAll { request, _ in if case .companion(_, unsolicited: true) = request { true } else { false } }
            queue.append((.companion(report, unsolicited: true), reply))
            return waiting + 1 - queue.count
        }
        guard let replaced else { return }
        wakeup.signal()
        guard replaced > 0 else { return }
        let time = now()
        let dropped = replacedReports.withLockedValue { r -> Int? in
            r.count += replaced
            guard time &- r.loggedAt >= Self.replacedReportsLogInterval else { return nil }
            defer { r = (0, time) }
            return r.count
        }
        if let dropped { logger.notice("the player reports faster than the party follows: \(dropped) report(s) dropped for newer ones") }
    }

    /// Queues a request for the pacer; `reply` hears its outcome (once).
    private func enqueue(_ request: Request, reply: @escaping Reply) {
        let accepted = inbox.withLockedValue { queue -> Bool in
            guard !stopRequested.load(ordering: .acquiring) else { return false }
            queue.append((request, reply))
            return true
        }
        if accepted { wakeup.signal() } else { reply(.failure(PartyCommandError(.invalid, "the party is over"))) }
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
        catalogue.stop()
        wakeup.signal()
    }

    /// The Welcome each listener gets.
    public func welcome() -> PCEnvelope {
        Messages.welcome(name: options.name, sessionID: sessionID)
    }

    /// Tells every listener the broadcast is over and closes the connections once flushed.
    /// Waits at most `goodbyeDeadline` for any listener, however slow.
    public func sayGoodbye(_ reason: String) {
        guard let goodbye = frame(Messages.goodbye(reason)) else { return }
        let closing = fanout.finish(with: goodbye, deadline: Self.goodbyeDeadline)
        for future in closing { _ = try? future.wait() }
    }

    /// Long enough to flush a goodbye to any listener still reading; short enough that Ctrl-C ends
    /// the broadcaster within 2 s.
    public static let goodbyeDeadline = TimeAmount.milliseconds(1000)

    /// An envelope framed for the wire (nil, logged, if it cannot be).
    func frame(_ envelope: PCEnvelope) -> ByteBuffer? { Messages.frame(envelope, logger: logger) }

    // MARK: Snapshots

    /// What the pacer last published, plus the timing that lets a snapshot say what is heard now.
    /// A command's change is heard a control margin and a fade after it is applied: until then a
    /// snapshot tells of the party as of that frame, so the answer to `next` names the new song and
    /// the remotes never step back to the old one in between.
    struct Published {
        var view = PartySnapshot()
        var segments: [Timeline.Segment] = []
        var pausedAt: (item: Int, songFrame: Int)?
        var origin: UInt64 = 0
        var changeHeardFrom: UInt64 = 0
        var sampleRate = 48000
        var settings: [String: GainPolicy.ListenerSettings] = [:]
        var covers: [Int: CoverArt] = [:]
        var revision: UInt64 = 0
        var lastCurrent: Int?
    }

    struct Subscribers {
        var continuations: [Int: AsyncStream<PartySnapshot>.Continuation] = [:]
        var nextID = 0
    }

    func makeSnapshot() -> PartySnapshot {
        let peers = fanout.peers
        let time = now()
        return published.withLockedValue { p in
            var view = p.view
            view.revision = p.revision
            if let paused = p.pausedAt {
                view.current = paused.item
                view.elapsedSeconds = Double(paused.songFrame) / Double(p.sampleRate)
            } else if let heard = Timeline.heard(at: time, origin: p.origin, rate: p.sampleRate, changeHeardFrom: p.changeHeardFrom,
                                                 in: p.segments) {
                view.current = heard.item
                view.elapsedSeconds = Double(heard.songFrame) / Double(p.sampleRate)
            }
            view.refused = fanout.refusals.counts
            view.listeners = peers.map { peer in
                let settings = p.settings[peer.listenerID] ?? GainPolicy.ListenerSettings()
                return PartySnapshot.Listener(id: peer.listenerID, name: peer.name, host: peer.host, address: peer.address,
                                              volume: settings.volume, muted: settings.muted,
                                              latencyOffsetMilliseconds: settings.latencyOffsetMilliseconds ?? peer.latencyOffsetMilliseconds,
                                              channel: settings.channel ?? peer.channel,
                                              bufferMilliseconds: peer.bufferMilliseconds, syncErrorMicroseconds: peer.syncErrorMicroseconds,
                                              clockBoundMicroseconds: peer.clockBoundMicroseconds, clockSettled: peer.clockSettled)
            }
            return view
        }
    }

    /// Tells every subscriber the party changed.
    func republish() {
        published.withLockedValue { $0.revision &+= 1 }
        let snapshot = makeSnapshot()
        for continuation in subscribers.withLockedValue({ Array($0.continuations.values) }) { continuation.yield(snapshot) }
    }

    /// Publishes the pacer's state for the snapshots (pacer thread).
    func publishState() {
        let view = state.queue.map(\.view)
        let timeline = state.timeline
        let gains = state.gains
        let changeHeardFrom = state.changeHeardFrom
        let toneHertz = state.tone?.frequency
        // A start held for the clocks is not a pause the remotes made: nothing is heard yet.
        let paused = timeline.paused && !startIsHeld
        let pausedAt = paused ? timeline.held.first.map { (item: $0.item, songFrame: $0.songFrame) } : nil
        published.withLockedValue { p in
            p.view.queue = view
            p.view.paused = paused
            p.view.volume = gains.partyVolume
            p.view.toneHertz = toneHertz
            p.segments = timeline.segments
            p.pausedAt = pausedAt
            p.origin = timeline.origin
            p.changeHeardFrom = changeHeardFrom
            p.sampleRate = timeline.sampleRate
            p.settings = gains.settings
        }
    }

    /// Forgets chunks and segments that have been heard (keeping the segment heard now), and tells
    /// the remotes when another song has started being heard (pacer thread).
    func pruneHeard() {
        let time = now()
        state.timeline.forgetHeard(before: state.timeline.position(at: time))
        let segments = state.timeline.segments
        // As the snapshots see it: before the origin nothing is heard, so the first song's start
        // is a change the remotes and Sendspin's metadata clients are told of.
        let current = Timeline.heard(at: time, origin: state.timeline.origin, rate: state.timeline.sampleRate,
                                     changeHeardFrom: state.changeHeardFrom, in: segments)?.item
        let changed = published.withLockedValue { p in
            defer { p.lastCurrent = current; p.segments = segments }
            return p.lastCurrent != current
        }
        if changed { republish() }
    }
}
