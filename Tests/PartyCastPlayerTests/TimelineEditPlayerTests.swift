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
        case events([TimelineEvent], paused: Bool, latencyOffset: Int?)
    }

    let format: AudioFormat? = AudioFormat(sampleRate: 48_000, channels: 2)
    let tags = TrackTags()
    let duration = Duration.unknown
    let isSeekable = false
    let schedule = PlaybackSchedule()
    private(set) var lastProducedFrame: Int?
    private(set) var isPartyPaused = false
    private(set) var latencyOffsetMilliseconds: Int?
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
        case .events(let new, let paused, let offset):
            events += new
            isPartyPaused = paused
            latencyOffsetMilliseconds = offset
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
}
