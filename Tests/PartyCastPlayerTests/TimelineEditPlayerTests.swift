import Foundation
import PartyCastClock
import PartyCastCore
import PartyCastOutput
@testable import PartyCastPlayer
import PartyCastTestSupport
import Synchronization
import XCTest

/// A live source played from a script: each `produce` call takes the next step, audio placed at a
/// stream frame or timeline events, as a broadcast's messages come one by one.
final class ScriptedPartySource: ScheduledPCMSource {
    enum Step: Sendable {
        case audio(frame: Int, samples: [Float])
        case events([TimelineEvent], paused: Bool, latencyOffset: Int?, channel: ChannelAssignment? = nil)
    }

    let format: AudioFormat? = AudioFormat(sampleRate: 48_000, channels: 2)
    let tags = TrackTags()
    let duration = Duration.unknown
    let isSeekable = false
    let schedule = PlaybackSchedule()
    private(set) var lastProducedFrame: Int?
    private(set) var isPartyPaused = false
    private(set) var latencyOffsetMilliseconds: Int?
    private(set) var channel: ChannelAssignment?
    private var steps: [Step]
    private var events: [TimelineEvent] = []

    init(_ steps: [Step]) { self.steps = steps }

    func prepare() {}
    func seek(toFrame frame: Int) throws(PartyCastError) { throw PartyCastError(.invalidArgument, "live") }
    func tags(atFrame frame: Int?) -> TrackTags { tags }

    func takeTimelineEvents() -> [TimelineEvent] {
        defer { events = [] }
        return events
    }

    func produce(into buffer: inout [Float]) -> Bool {
        lastProducedFrame = nil
        guard !steps.isEmpty else { return false }
        switch steps.removeFirst() {
        case .audio(let frame, let samples):
            buffer += samples
            lastProducedFrame = frame
        case .events(let new, let paused, let offset, let channel):
            events += new
            isPartyPaused = paused
            latencyOffsetMilliseconds = offset
            self.channel = channel
        }
        return true
    }
}

final class TimelineEditPlayerTests: XCTestCase {
    func testTheKeeperBridgesGapsTrimsEarlyStartsAndWithdraws() {
        var keeper = TimelineKeeper(sampleRate: 48_000)
        XCTAssertEqual(keeper.place(frame: 1000, frames: 960), .restart, "the first block starts the timeline")
        XCTAssertEqual(keeper.place(frame: 1960, frames: 960), .continues)
        XCTAssertEqual(keeper.place(frame: 3000, frames: 960), .gap(frames: 80))
        XCTAssertFalse(keeper.withdraw(from: 3960), "nothing placed from there on: nothing to cut")
        XCTAssertFalse(keeper.withdraw(from: 100_000))
        XCTAssertTrue(keeper.withdraw(from: 3500))
        // A replacement whose first 312 frames come before the cut (Opus's codec delay).
        XCTAssertEqual(keeper.place(frame: 3500 - 312, frames: 960), .trim(frames: 312))
        XCTAssertEqual(keeper.place(frame: 3500 - 312 + 960, frames: 960), .continues)
        // A block wholly before where the timeline stands loses all of it, and the timeline stays.
        XCTAssertEqual(keeper.place(frame: 3000, frames: 100), .trim(frames: 100))
        XCTAssertEqual(keeper.place(frame: 3500 - 312 + 1920, frames: 960), .continues)
        XCTAssertEqual(keeper.place(frame: 6068 + 48_001, frames: 960), .restart, "a gap longer than a second")
        XCTAssertEqual(keeper.place(frame: 0, frames: 960), .restart, "more than a second before: a new timeline")
        XCTAssertEqual(keeper.place(frame: 960, frames: 960), .continues)
    }

    /// Through the real player in the plain path (no schedule) on the virtual card: the original
    /// plays up to the withdrawn frame bit for bit, the replacement follows with its early head
    /// trimmed, the gain is applied, and the party's pause and latency offset reach the status.
    func testAWithdrawCutsThePlainPathAndTheReplacementFollows() throws {
        let cutAt = 48_000, preSkip = 312
        // Sample values name their frame, exactly (a power-of-two scale keeps them exact in a WAV).
        func value(_ frame: Int) -> Float { Float(frame + 1) / 131_072 }
        let original = (0..<72_000).flatMap { [value($0), value($0)] }
        let junk = [Float](repeating: 0.9, count: preSkip * 2)
        let replacement = junk + (cutAt..<60_000).flatMap { [-value($0), -value($0)] }
        let steps: [ScriptedPartySource.Step] = [
            .events([.gain(0.5, atFrame: 0, rampFrames: 0)], paused: false, latencyOffset: nil),
            .audio(frame: 0, samples: original),
            .events([.withdraw(fromFrame: cutAt)], paused: true, latencyOffset: 250),
            .audio(frame: cutAt - preSkip, samples: replacement),
        ]
        let path = try temporaryDirectory() + "/live.wav"
        var options = PlayerOptions()
        options.sync = false
        let player = Player(output: VirtualCardOutput(path: path), options: options) { () throws(PartyCastError) -> PCMSource in ScriptedPartySource(steps) }
        let seen = Mutex<(paused: Bool, offset: Int)>((false, 0))
        player.observe { status in seen.withLock { if status.partyPaused { $0 = (true, status.latencyOffsetMilliseconds) } } }
        XCTAssertEqual(player.run(), .endOfStream)

        let heard = try readAudio(path).samples.drop { $0 == 0 }
        let expected = (0..<60_000).flatMap { frame -> [Float] in
            let sample = 0.5 * (frame < cutAt ? value(frame) : -value(frame))
            return [sample, sample]
        }
        XCTAssertGreaterThanOrEqual(heard.count, expected.count)
        let firstDifference = zip(heard, expected).enumerated().first { $1.0 != $1.1 }?.offset
        XCTAssertNil(firstDifference.map { "frame \($0 / 2): \(heard[heard.startIndex + $0]), expected \(expected[$0])" })
        XCTAssertTrue(heard.dropFirst(expected.count).allSatisfy { $0 == 0 }, "nothing after the replacement")
        XCTAssertEqual(seen.withLock { $0.paused }, true)
        XCTAssertEqual(seen.withLock { $0.offset }, 250)
    }

    /// `--mixer none`: the volume is left to the amplifier, so a gain plays at full scale; a gain
    /// of 0 (a mute, a pause) still silences, from its frame.
    func testWithoutAMixerAGainPlaysAtFullScaleAndZeroStillSilences() throws {
        let steps: [ScriptedPartySource.Step] = [
            .events([.gain(0.25, atFrame: 0, rampFrames: 0), .gain(0, atFrame: 24_000, rampFrames: 0)], paused: false, latencyOffset: nil),
            .audio(frame: 0, samples: [Float](repeating: 0.5, count: 96_000)),
        ]
        let path = try temporaryDirectory() + "/unmixed.wav"
        var options = PlayerOptions()
        options.sync = false
        options.volume = .none
        let player = Player(output: VirtualCardOutput(path: path), options: options) { () throws(PartyCastError) -> PCMSource in ScriptedPartySource(steps) }
        XCTAssertEqual(player.run(), .endOfStream)
        let heard = try readAudio(path).samples.drop { $0 == 0 }
        XCTAssertEqual(heard.prefix { $0 != 0 }.count, 48_000, "frames 0..<24000 heard")
        XCTAssertTrue(heard.prefix(48_000).allSatisfy { $0 == 0.5 }, "at full scale")
        XCTAssertTrue(heard.dropFirst(48_000).allSatisfy { $0 == 0 }, "silent from the gain of 0 on")
    }

    /// A channel the remote sets mid-song reaches the output thread through the renderer's atomic:
    /// on the real-time virtual card, every frame the source's left and right differ in plays as
    /// stereo until the change, then as what was set, and every frame written after the change is
    /// news to the producer plays it. The source's right is minus twice its left, so each
    /// assignment gives a frame of its own: stereo (l, r), left (l, l), right (r, r), mono ((l+r)/2 twice).
    func testAChannelSetMidSongIsHeardFromThenOn() throws {
        func left(_ frame: Int) -> Float { Float(frame % 4096 + 1) / 8192 }
        func block(_ frames: Range<Int>) -> [Float] { frames.flatMap { [left($0), -2 * left($0)] } }
        let (a, b, c) = (0..<24_000, 24_000..<36_000, 36_000..<48_000)
        let steps: [ScriptedPartySource.Step] = [
            .audio(frame: a.lowerBound, samples: block(a)),
            .events([], paused: false, latencyOffset: nil, channel: .left),
            .audio(frame: b.lowerBound, samples: block(b)),
            .events([], paused: false, latencyOffset: nil, channel: .mono),
            .audio(frame: c.lowerBound, samples: block(c)),
        ]
        let path = try temporaryDirectory() + "/channels.wav"
        var options = PlayerOptions()
        options.sync = false
        // A ring of ~0.17 s: the first block (0.5 s) cannot all be in it before the change.
        options.bufferSeconds = 0.1
        options.prebufferSeconds = 0.02
        let player = Player(output: VirtualCardOutput(path: path), options: options) { () throws(PartyCastError) -> PCMSource in ScriptedPartySource(steps) }
        let seen = Mutex<ChannelAssignment>(.stereo)
        player.observe { status in seen.withLock { $0 = status.channel } }
        XCTAssertEqual(player.run(), .endOfStream)

        let recorded = try readAudio(path)
        XCTAssertEqual(recorded.channels, 2)
        // The source is never silent: silence is the card waiting (the start, an underrun), not a frame of it.
        let heard = stride(from: 0, to: recorded.samples.count, by: 2).map { (recorded.samples[$0], recorded.samples[$0 + 1]) }.filter { $0 != (0, 0) }
        XCTAssertEqual(heard.count, c.upperBound, "every frame is heard once")
        func assignment(_ played: (Float, Float), frame: Int) -> ChannelAssignment? {
            let (l, r) = (left(frame), -2 * left(frame))
            return ChannelAssignment.allCases.first { expected in
                switch expected {
                case .stereo: played == (l, r)
                case .left: played == (l, l)
                case .right: played == (r, r)
                case .mono: played == ((l + r) * 0.5, (l + r) * 0.5)
                }
            }
        }
        let played = heard.prefix(c.upperBound).enumerated().map { assignment($0.element, frame: $0.offset) }
        XCTAssertNil(played.firstIndex(of: nil).map { "frame \($0) is none of the four: \(heard[$0])" })
        // In order, never back: stereo, then left, then mono.
        let order: [ChannelAssignment] = [.stereo, .left, .mono]
        let ranks = played.compactMap { $0.flatMap { order.firstIndex(of: $0) } }
        XCTAssertEqual(ranks, ranks.sorted(), "a frame went back to an earlier assignment")
        XCTAssertEqual(played.count, ranks.count, "an assignment that was never set was heard")
        guard played.count == c.upperBound else { return }
        // What played before the producer got to a change: the part of a block the ring could not hold.
        XCTAssertGreaterThan(played[a].filter { $0 == .stereo }.count, a.count / 2, "the first block plays stereo until the change")
        XCTAssertTrue(played[b].contains(.left), "the second block plays left until the change to mono")
        XCTAssertTrue(played[b].allSatisfy { $0 == .left || $0 == .mono }, "the second block came after the change to left")
        XCTAssertTrue(played[c].allSatisfy { $0 == .mono }, "the third block came after the change to mono")
        XCTAssertEqual(seen.withLock { $0 }, .mono, "the status says what plays")
    }
}
