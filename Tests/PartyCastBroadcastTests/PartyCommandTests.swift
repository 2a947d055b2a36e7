import Logging
import NIOCore
import NIOEmbedded
@testable import PartyCastBroadcast
import PartyCastCodec
import PartyCastControlSeam
import PartyCastCore
import PartyCastWire
import Synchronization
import XCTest

/// The party's commands in-process: a pacer driven by hand on a clock the test moves, and a listener
/// that is an EmbeddedChannel joined to the real Fanout. No threads, sockets or real time. The songs
/// are ramps (sample n of song b is b + n), so where each sample went says what the listener heard.
final class PartyCommandTests: XCTestCase {
    static let rate = 48000
    static let chunk: UInt64 = 960  // PCM chunks of 20 ms
    static let fade: UInt64 = 240  // 5 ms
    static let margin = Party.controlMarginNanoseconds

    /// Mono 48 kHz, 10 s: sample n is `base + n`.
    final class RampSource: PCMSource {
        let base: Float
        let frames: Int
        var next = 0
        init(base: Float, frames: Int = 10 * PartyCommandTests.rate) { (self.base, self.frames) = (base, frames) }
        var format: AudioFormat? { AudioFormat(sampleRate: PartyCommandTests.rate, channels: 1) }
        var tags: TrackTags { TrackTags(title: "ramp from \(Int(base))") }
        var duration: Duration { .exact(frames: frames) }
        var isSeekable: Bool { true }
        func prepare() throws(PartyCastError) {}
        func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool {
            guard next < frames else { return false }
            let count = min(1000, frames - next)
            buffer.append(contentsOf: (next..<next + count).map { base + Float($0) })
            next += count
            return true
        }
        func seek(toFrame frame: Int) throws(PartyCastError) { next = frame }
    }

    final class ManualClock: Sendable {
        let nanoseconds = Atomic<UInt64>(monotonicNanoseconds())
        func advance(milliseconds: UInt64) { nanoseconds.add(milliseconds * 1_000_000, ordering: .relaxed) }
        var now: UInt64 { nanoseconds.load(ordering: .relaxed) }
    }

    /// What the listener was sent, applied as a listener applies it: a Withdraw drops the chunks
    /// from its position on.
    struct Listener {
        var chunks: [UInt64: [Float]] = [:]
        var withdrawals: [UInt64] = []
        var gains: [PCGain] = []
        var pausedStates: [Bool] = []
        var metadata: [PCMetadata] = []
        var settings: [PCListenerSettings] = []

        /// The samples heard from `position` on, for `count` frames (nil where nothing was sent).
        func samples(from position: UInt64, count: Int) -> [Float?] {
            var heard = [Float?](repeating: nil, count: count)
            for (start, samples) in chunks where start < position + UInt64(count) && start + UInt64(samples.count) > position {
                for (offset, sample) in samples.enumerated() {
                    let frame = start + UInt64(offset)
                    if frame >= position && frame < position + UInt64(count) { heard[Int(frame - position)] = sample }
                }
            }
            return heard
        }
    }

    var clock: ManualClock!
    var channel: EmbeddedChannel!
    var party: Party!
    var decoder = WireFrameDecoder()
    var listener = Listener()
    /// The snapshot the last command that was carried out answered with.
    var answered: PartySnapshot?

    override func setUp() {
        makeParty([0, 1_000_000].map { base in
            ResolvedSource(spec: "ramp:\(base)", label: "ramp", isLive: false, open: { () throws(PartyCastError) -> PCMSource in RampSource(base: Float(base)) })
        })
    }

    /// A party of `sources` sending PCM, with one listener joined; `companion` behind the first,
    /// `adjust` on its options.
    func makeParty(_ sources: [ResolvedSource], companion: (any SourceCompanion)? = nil, adjust: (inout BroadcastOptions) -> Void = { _ in }) {
        clock = ManualClock()
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let fanout = Fanout(logger: logger)
        var options = BroadcastOptions(name: "test party")
        options.codec = WireCodecs.all.first { $0.name == "pcm" }!
        adjust(&options)
        let clock = clock!
        party = Party(sources: sources, library: Library(), options: options, fanout: fanout, logger: logger,
                      opener: { path throws(PartyCastError) in throw PartyCastError(.fileNotFound, path) }, companion: companion, now: { clock.now })
        channel = EmbeddedChannel()
        decoder = WireFrameDecoder()
        listener = Listener()
        XCTAssertNotNil(fanout.join(channel: channel, listenerID: "L1", name: "kitchen", host: "kitchen.local", address: "127.0.0.1", first: []))
    }

    /// Sends what the pacer would have sent by now, and reads it as the listener.
    func pump() throws {
        while !party.state.timeline.paused && !party.state.reachedEnd && party.nextChunkDue <= clock.now + Party.batchWindowNanoseconds { try party.sendNextChunk() }
        party.fanout.flushChunks()
        while let bytes = try channel.readOutbound(as: ByteBuffer.self) { decoder.push(bytes.readableBytesView) }
        while let envelope = try decoder.next() {
            switch envelope.body {
            case .audioChunk(let chunk):
                listener.chunks[chunk.mediaPosition] = chunk.payload.withUnsafeBytes { raw in
                    (0..<raw.count / 4).map { Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 4, as: UInt32.self))) }
                }
            case .withdraw(let withdraw):
                listener.withdrawals.append(withdraw.fromPosition)
                listener.chunks = listener.chunks.filter { $0.key < withdraw.fromPosition }
            case .gain(let gain): listener.gains.append(gain)
            case .partyState(let state): listener.pausedStates.append(state.paused)
            case .metadata(let metadata): listener.metadata.append(metadata)
            case .listenerSettings(let settings): listener.settings.append(settings)
            default: break
            }
        }
    }

    /// Starts the party (1 s from now) and plays 1.5 s: 0.5 s of the first song has been heard.
    func startAndPlay() throws {
        XCTAssertTrue(try party.start())
        try pump()
        clock.advance(milliseconds: 1500)
        try pump()
        listener.gains = []
        listener.metadata = []
    }

    /// Applies a command as the pacer does between chunks, keeps the party's answer, and reads what it sent.
    @discardableResult
    func command(_ command: PartyCommand) throws -> PartyCommandError? {
        switch party.answer(.command(command)) {
        case .success(let snapshot): answered = snapshot
        case .failure(let refusal): return refusal
        }
        try pump()
        return nil
    }

    /// Compares runs of samples by their first difference, not as two long lists.
    func assertSamples(_ heard: [Float?], _ expected: [Float?], _ what: String, line: UInt = #line) {
        XCTAssertEqual(heard.count, expected.count, what, line: line)
        if let index = heard.indices.first(where: { $0 < expected.count && heard[$0] != expected[$0] }) {
            XCTFail("\(what): sample \(index) is \(heard[index].map { "\($0)" } ?? "missing"), expected \(expected[index].map { "\($0)" } ?? "missing")", line: line)
        }
    }

    /// Where a command given now takes effect: the first chunk boundary heard at least the control
    /// margin and a fade from now.
    func expectedCut() -> UInt64 {
        let earliest = party.state.timeline.position(at: clock.now + Self.margin) + Self.fade
        return (earliest + Self.chunk - 1) / Self.chunk * Self.chunk
    }

    func testPauseAndResumeLoseAndRepeatNoSample() throws {
        try startAndPlay()
        let cut = expectedCut()
        XCTAssertNil(try command(.pause))
        XCTAssertEqual(listener.withdrawals, [cut])
        XCTAssertEqual(listener.pausedStates.last, true)
        XCTAssertEqual(listener.gains.map { [Double($0.gain), Double($0.atPosition), Double($0.rampFrames)] }, [[0, Double(cut - Self.fade), Double(Self.fade)]],
                       "faded out, silent at the cut")
        XCTAssertTrue(party.snapshot.paused)
        XCTAssertEqual(party.snapshot.elapsedSeconds, Double(cut) / Double(Self.rate), "paused on the cut")

        clock.advance(milliseconds: 5000)
        let resumeAt = party.state.timeline.position(at: clock.now + Self.margin)
        XCTAssertNil(try command(.resume))
        XCTAssertEqual(listener.withdrawals, [cut], "a resume takes nothing back")
        XCTAssertEqual(listener.pausedStates.last, false)
        XCTAssertEqual(listener.gains.last.map { [Double($0.gain), Double($0.atPosition), Double($0.rampFrames)] }, [1, Double(resumeAt), Double(Self.fade)])
        XCTAssertEqual(listener.metadata.last.map { [$0.startPosition, $0.songFrame] }, [resumeAt, cut])
        clock.advance(milliseconds: 500)
        try pump()

        // The song up to the cut, one chunk of silence, nothing until the resume, then the song on.
        assertSamples(listener.samples(from: 0, count: Int(cut)), (0..<Int(cut)).map { Float($0) }, "before the cut")
        assertSamples(listener.samples(from: cut, count: Int(Self.chunk)), Array(repeating: 0, count: Int(Self.chunk)), "at the cut")
        let gap = Int(resumeAt - cut - Self.chunk)
        assertSamples(listener.samples(from: cut + Self.chunk, count: gap), Array(repeating: nil, count: gap), "while paused")
        assertSamples(listener.samples(from: resumeAt, count: 24000), (0..<24000).map { Float(Int(cut) + $0) }, "from the resume")
    }

    /// Paused once the queue's last chunk has gone out, the resume still plays the rest of it.
    func testAPauseAfterTheLastChunkWentOutLosesNothing() throws {
        let frames = 57600  // 1.2 s: all sent by 0.5 s into it
        makeParty([ResolvedSource(spec: "ramp:0", label: "ramp", isLive: false, open: { () throws(PartyCastError) -> PCMSource in
            RampSource(base: 0, frames: frames)
        })])
        try startAndPlay()
        XCTAssertTrue(party.state.reachedEnd)
        let cut = expectedCut()
        XCTAssertNil(try command(.pause))
        clock.advance(milliseconds: 2000)
        let resumeAt = party.state.timeline.position(at: clock.now + Self.margin)
        XCTAssertNil(try command(.resume))
        clock.advance(milliseconds: 1000)
        try pump()
        let rest = frames - Int(cut)
        assertSamples(listener.samples(from: resumeAt, count: rest), (0..<rest).map { Float(Int(cut) + $0) }, "from the resume")
    }

    /// The audio positions written to the listener since the last read, without a flush.
    func positionsWritten() throws -> [UInt64] {
        var positions: [UInt64] = []
        while let bytes = try channel.readOutbound(as: ByteBuffer.self) { decoder.push(bytes.readableBytesView) }
        while let envelope = try decoder.next() {
            if case .audioChunk(let chunk) = envelope.body { positions.append(chunk.mediaPosition) }
        }
        return positions
    }

    /// After a resume the pacer refills a whole lead (a second) at once, and encoding that takes
    /// tens of ms on a busy machine: the chunks due within the control margin must not wait for the
    /// last of them. At the pace, chunks go out a batch window at a time.
    func testChunksBehindThePaceGoOutAtOnceAndThoseAtItInBatches() throws {
        try startAndPlay()
        XCTAssertNil(try command(.pause))
        clock.advance(milliseconds: 5000)
        let resumeAt = party.state.timeline.position(at: clock.now + Self.margin)
        guard case .success = party.answer(.command(.resume)) else { return XCTFail("resume refused") }
        _ = try positionsWritten()
        try party.sendNextChunk()
        XCTAssertEqual(try positionsWritten(), [resumeAt], "the first chunk after the resume, written as soon as it is encoded")
        try pump()
        let caughtUp = party.state.timeline.end
        clock.advance(milliseconds: 20)
        for _ in 0..<3 { try party.sendNextChunk() }
        XCTAssertEqual(try positionsWritten(), [], "at the pace, chunks wait for the batch")
        party.fanout.flushChunks()
        XCTAssertEqual(try positionsWritten(), [caughtUp, caughtUp + Self.chunk, caughtUp + 2 * Self.chunk])
    }

    func testSeekPlaysTheSongFromThatSecondAtTheCut() throws {
        try startAndPlay()
        let cut = expectedCut()
        XCTAssertNil(try command(.seek(seconds: 2)))
        XCTAssertEqual(listener.withdrawals, [cut])
        XCTAssertEqual(listener.gains.map { [Double($0.gain), Double($0.atPosition)] }, [[0, Double(cut - Self.fade)], [1, Double(cut)]],
                       "out just before the cut, in from it")
        XCTAssertEqual(listener.metadata.last.map { [$0.startPosition, $0.songFrame] }, [cut, 96000])
        clock.advance(milliseconds: 500)
        try pump()
        assertSamples(listener.samples(from: cut - 10, count: 20), (0..<20).map { Float($0 < 10 ? Int(cut) - 10 + $0 : 96000 + $0 - 10) }, "around the cut")
        clock.advance(milliseconds: 500)
        XCTAssertEqual(party.snapshot.current, 1)
        XCTAssertEqual(party.snapshot.elapsedSeconds, 2 + Double(party.state.timeline.position(at: clock.now) - cut) / Double(Self.rate), accuracy: 1e-9)
    }

    func testNextPlaysTheNextSongFromItsStart() throws {
        try startAndPlay()
        let cut = expectedCut()
        XCTAssertNil(try command(.next))
        clock.advance(milliseconds: 500)
        try pump()
        assertSamples(listener.samples(from: cut - 2, count: 4), [Float(cut) - 2, Float(cut) - 1, 1_000_000, 1_000_001], "around the cut")
        clock.advance(milliseconds: 500)
        XCTAssertEqual(party.snapshot.current, 2)
        XCTAssertEqual(try command(.next)?.kind, .invalid, "the second song is the last")
    }

    func testVolumesRampFromTheControlMarginOn() throws {
        try startAndPlay()
        let at = party.state.timeline.position(at: clock.now + Self.margin)
        XCTAssertNil(try command(.listenerVolume(listener: "kitchen", percent: 50)))
        XCTAssertEqual(listener.gains.map { [Double($0.gain), Double($0.atPosition), Double($0.rampFrames)] }, [[0.125, Double(at), 1440]])
        XCTAssertNil(try command(.partyVolume(percent: 50)))
        XCTAssertEqual(listener.gains.last?.gain, 1.0 / 64)
        XCTAssertEqual(party.snapshot.listeners.map { [$0.id, "\($0.volume)"] }, [["L1", "50"]])
        XCTAssertEqual(party.snapshot.volume, 50)
    }

    /// A remote adding in a loop fills the queue to its cap, then is told so; the song's cover, read
    /// afresh for each add, is held once; a removed song's cover goes with it.
    func testTheQueueHasACapAndACoverIsHeldOnceAndFreedWithItsSong() throws {
        try startAndPlay()
        // Each add probes the file again, so each brings its own copy of the picture's bytes.
        func readCover() -> CoverArt { CoverArt(mimeType: "image/png", pictureType: 3, bytes: [UInt8](repeating: 0x89, count: 65_536)) }
        let cover = readCover()
        while party.state.queue.count < Party.maxQueueItems {
            var item = PartyItem(id: 0, source: party.state.queue[0].source)
            item.cover = readCover()
            try party.apply(.add(item))
        }
        let storage = Set(party.state.queue.compactMap { $0.cover?.bytes.withUnsafeBufferPointer { Int(bitPattern: $0.baseAddress) } })
        XCTAssertEqual(storage.count, 1, "\(Party.maxQueueItems - 1) copies of one cover are held once")
        var extra = PartyItem(id: 0, source: party.state.queue[0].source)
        extra.cover = cover
        XCTAssertThrowsError(try party.apply(.add(extra))) { error in
            XCTAssertEqual((error as? PartyCommandError)?.kind, .invalid)
        }
        XCTAssertEqual(party.state.queue.count, Party.maxQueueItems)
        let last = try XCTUnwrap(party.state.queue.last?.id)
        XCTAssertEqual(party.cover(item: last)?.bytes, cover.bytes)
        XCTAssertNil(try command(.remove(item: last)))
        XCTAssertNil(party.cover(item: last), "the removed song's cover is not kept")
    }

    /// A channel goes to its listener alone, at once (no cut, no fade), carries nothing the remote
    /// did not set, and greets the listener's reconnects; until the remote sets one, the snapshot
    /// shows what each listener reports it plays.
    func testAChannelGoesToItsListenerAndGreetsItsReconnects() throws {
        try startAndPlay()
        let hall = EmbeddedChannel()
        let hallID = try XCTUnwrap(party.fanout.join(channel: hall, listenerID: "L2", name: "hall", host: "hall.local", address: "127.0.0.2", first: []))
        party.fanout.update(hallID, bufferMilliseconds: 900, syncErrorMicroseconds: 3, clockBoundMicroseconds: 5, clockSettled: nil, latencyOffsetMilliseconds: 0, channel: .right)
        XCTAssertEqual(party.snapshot.listeners.map { [$0.id, $0.channel.rawValue] }, [["L1", "stereo"], ["L2", "right"]])
        _ = try greeting(hall)

        XCTAssertNil(try command(.channel(listener: "kitchen", .left)))
        XCTAssertEqual(listener.settings.map(\.channel), [.left])
        XCTAssertFalse(listener.settings[0].hasLatencyOffsetMilliseconds, "the offset the remote never set stays the listener's own")
        XCTAssertEqual(listener.gains.count, 0)
        XCTAssertEqual(listener.withdrawals, [])
        XCTAssertFalse(try greeting(hall).contains { if case .listenerSettings? = $0.body { true } else { false } }, "the others are told nothing")
        XCTAssertEqual(party.snapshot.listeners.map(\.channel), [.left, .right])
        // The listener's report of its own --channel does not hide what the remote set.
        party.fanout.update(1, bufferMilliseconds: 900, syncErrorMicroseconds: 3, clockBoundMicroseconds: 5, clockSettled: nil, latencyOffsetMilliseconds: 0, channel: .stereo)
        XCTAssertEqual(party.snapshot.listeners.map(\.channel), [.left, .right])
        XCTAssertEqual(try command(.channel(listener: "garden", .right))?.kind, .notFound)

        XCTAssertNil(try command(.latencyOffset(listener: "L1", milliseconds: 30)))
        XCTAssertEqual(listener.settings.last.map { [$0.hasLatencyOffsetMilliseconds, $0.channel == .channelUnspecified] }, [true, true])
        let rejoined = EmbeddedChannel()
        XCTAssertNotNil(party.fanout.join(channel: rejoined, listenerID: "L1", name: "kitchen", host: "kitchen.local", address: "127.0.0.1", first: []))
        let greeted = try greeting(rejoined).compactMap { envelope -> PCListenerSettings? in
            if case .listenerSettings(let settings)? = envelope.body { settings } else { nil }
        }
        XCTAssertEqual(greeted.map { [$0.channel.rawValue, Int($0.latencyOffsetMilliseconds)] }, [[PCChannelAssignment.left.rawValue, 30]])
        let newcomer = EmbeddedChannel()
        XCTAssertNotNil(party.fanout.join(channel: newcomer, listenerID: "L3", name: "porch", host: "porch.local", address: "127.0.0.3", first: []))
        XCTAssertFalse(try greeting(newcomer).contains { if case .listenerSettings? = $0.body { true } else { false } },
                       "a listener the remote never set keeps its own")
    }

    /// Everything a listener's connection was sent so far, decoded.
    func greeting(_ channel: EmbeddedChannel) throws -> [PCEnvelope] {
        var decoder = WireFrameDecoder()
        while let bytes = try channel.readOutbound(as: ByteBuffer.self) { decoder.push(bytes.readableBytesView) }
        var envelopes: [PCEnvelope] = []
        while let envelope = try decoder.next() { envelopes.append(envelope) }
        return envelopes
    }

    func testRefusedCommandsLeaveThePartyAsItWas() throws {
        try startAndPlay()
        let before = party.snapshot
        XCTAssertEqual(try command(.seek(seconds: -1))?.kind, .invalid)
        XCTAssertEqual(try command(.seek(seconds: 10))?.kind, .invalid, "the song lasts 10 s")
        XCTAssertEqual(try command(.partyVolume(percent: 101))?.kind, .invalid)
        XCTAssertEqual(try command(.listenerVolume(listener: "garden", percent: 50))?.kind, .notFound)
        XCTAssertEqual(try command(.play(item: 99))?.kind, .notFound)
        XCTAssertEqual(try command(.move(item: 1, index: 2))?.kind, .invalid)
        XCTAssertEqual(try command(.latencyOffset(listener: "kitchen", milliseconds: 2001))?.kind, .invalid)
        XCTAssertEqual(try command(.channel(listener: "garden", .left))?.kind, .notFound)
        XCTAssertEqual(listener.withdrawals, [])
        XCTAssertEqual(listener.settings.count, 0)
        XCTAssertEqual(listener.gains.count, 0)
        var after = party.snapshot
        after.elapsedSeconds = before.elapsedSeconds
        XCTAssertEqual(after, before)
    }
}

/// A listener of another protocol (Sendspin's) as the fanout feeds it: the party's PCM, and on a
/// withdrawal the unplayed chunks before the cut in place of all it held.
final class RecordingOutlet: PCMOutlet {
    let chunks = LockedValueBox<[UInt64: [Float]]>([:])
    let withdrawals = Atomic<Int>(0)
    let finished = Atomic<Bool>(false)
    let gains = LockedValueBox<[[Double]]>([])
    let latencyOffsets = LockedValueBox<[Int]>([])

    func deliver(_ delivered: [PCMChunk]) { chunks.withLockedValue { for chunk in delivered { $0[chunk.position] = chunk.samples } } }
    func withdraw(keeping kept: [PCMChunk]) {
        withdrawals.add(1, ordering: .relaxed)
        chunks.withLockedValue { $0 = Dictionary(uniqueKeysWithValues: kept.map { ($0.position, $0.samples) }) }
    }
    func gain(_ value: Float, at position: UInt64, rampFrames: Int) { gains.withLockedValue { $0.append([Double(value), Double(position), Double(rampFrames)]) } }
    func latencyOffset(milliseconds: Int) { latencyOffsets.withLockedValue { $0.append(milliseconds) } }
    func finish() { finished.store(true, ordering: .relaxed) }
}

extension PartyCommandTests {
    func testAnOutletHearsWhatTheListenerHearsThroughAPauseAndResume() throws {
        let outlet = RecordingOutlet()
        let id = try XCTUnwrap(party.fanout.join(outlet: outlet, listenerID: "S1", name: "speaker", host: "sendspin", address: "127.0.0.1"))
        XCTAssertEqual(party.fanout.peers.map(\.listenerID), ["L1", "S1"])
        XCTAssertNil(party.fanout.audioFormat, "no format before the first song opens")
        try startAndPlay()
        XCTAssertEqual(outlet.gains.withLockedValue { $0 }, [[1, 0, 0]], "greeted with its gain")
        outlet.gains.withLockedValue { $0 = [] }
        XCTAssertEqual(party.fanout.audioFormat, AudioFormat(sampleRate: Self.rate, channels: 1))
        let cut = expectedCut()
        XCTAssertNil(try command(.pause))
        XCTAssertEqual(outlet.withdrawals.load(ordering: .relaxed), 1)
        XCTAssertEqual(outlet.chunks.withLockedValue { $0.keys.filter { $0 > cut } }, [], "nothing after the cut is kept")
        clock.advance(milliseconds: 5000)
        XCTAssertNil(try command(.resume))
        clock.advance(milliseconds: 500)
        try pump()
        XCTAssertNil(try command(.listenerVolume(listener: "S1", percent: 50)))
        XCTAssertNil(try command(.partyVolume(percent: 80)))
        let listenerGains = listener.gains.map { [Double($0.gain), Double($0.atPosition), Double($0.rampFrames)] }
        let outletGains = outlet.gains.withLockedValue { $0 }
        XCTAssertEqual(outletGains.count, 4)
        XCTAssertEqual(Array(outletGains.prefix(2)), Array(listenerGains.prefix(2)), "the fades around the pause, as the listener got them")
        for (got, expected) in zip(outletGains.dropFirst(2).map { $0[0] }, [0.125, 0.125 * 0.512]) {
            XCTAssertEqual(got, expected, accuracy: 1e-6, "its own volume (50 %), then the party's (80 %)")
        }
        XCTAssertEqual(listenerGains.last?[0] ?? 0, 0.512, accuracy: 1e-6, "the other listener hears only the party's")
        XCTAssertNil(try command(.latencyOffset(listener: "S1", milliseconds: 120)))
        XCTAssertEqual(outlet.latencyOffsets.withLockedValue { $0 }, [120])
        let late = RecordingOutlet()
        let lateID = try XCTUnwrap(party.fanout.join(outlet: late, listenerID: "S1", name: "speaker again", host: "sendspin", address: "127.0.0.1"))
        XCTAssertEqual(late.latencyOffsets.withLockedValue { $0 }, [120], "a rejoining speaker is told its offset")
        party.fanout.leave(lateID)
        let held = outlet.chunks.withLockedValue { $0 }
        XCTAssertTrue(held.keys.contains { $0 > cut + Self.chunk }, "it got the audio after the resume")
        for (position, samples) in held {
            assertSamples(listener.samples(from: position, count: samples.count), samples.map { $0 }, "the outlet's chunk at \(position)")
        }
        party.fanout.leave(id)
        XCTAssertEqual(party.fanout.peers.map(\.listenerID), ["L1"])
        _ = party.fanout.finish(with: ByteBuffer(), deadline: .milliseconds(1))
        XCTAssertFalse(outlet.finished.load(ordering: .relaxed), "a listener that left is not told")
    }

    func testAnOutletIsToldTheBroadcastIsOver() throws {
        let outlet = RecordingOutlet()
        XCTAssertNotNil(party.fanout.join(outlet: outlet, listenerID: "S1", name: "speaker", host: "sendspin", address: "127.0.0.1"))
        // Not `sayGoodbye`, which waits for the EmbeddedChannel to close on a timer no one runs.
        _ = party.fanout.finish(with: ByteBuffer(), deadline: .milliseconds(1))
        XCTAssertTrue(outlet.finished.load(ordering: .relaxed))
        XCTAssertNil(party.fanout.join(outlet: RecordingOutlet(), listenerID: "S2", name: "late", host: "sendspin", address: "127.0.0.1"), "none joins after the end")
    }
}
