import Foundation
@testable import PartyCastNetwork
import PartyCastClock
import PartyCastCore
import PartyCastWire
import XCTest

/// Protocol 4's timeline messages as the receiver takes them: checked, counted when absurd, and
/// handed to the player in order.
extension ListenerValidationTests {
    func withdraw(_ position: UInt64) -> PCEnvelope {
        var withdraw = PCWithdraw()
        withdraw.fromPosition = position
        return envelope(.withdraw(withdraw))
    }

    func gain(_ value: Float, at position: UInt64, ramp: UInt32) -> PCEnvelope {
        var gain = PCGain()
        gain.gain = value
        gain.atPosition = position
        gain.rampFrames = ramp
        return envelope(.gain(gain))
    }

    func latencyOffset(_ milliseconds: Int32) -> PCEnvelope {
        var settings = PCListenerSettings()
        settings.latencyOffsetMilliseconds = milliseconds
        return envelope(.listenerSettings(settings))
    }

    func channel(_ channel: PCChannelAssignment, latencyOffset milliseconds: Int32? = nil) -> PCEnvelope {
        var settings = PCListenerSettings()
        settings.channel = channel
        if let milliseconds { settings.latencyOffsetMilliseconds = milliseconds }
        return envelope(.listenerSettings(settings))
    }

    /// Chunk `k`'s place carrying the samples `value`.
    func replacement(_ k: Int, value: Float) -> PCEnvelope {
        var chunk = pcmChunk(k)
        chunk.payload = Data([Float](repeating: value, count: frames * channels).withUnsafeBytes { Array($0) })
        return envelope(.audioChunk(chunk))
    }

    func testAWithdrawLetsTheReplacementFromItsPositionPlay() {
        var receiver = receiver()
        var played = play([welcome(), pcmFormat()] + (0..<5).map { envelope(.audioChunk(pcmChunk($0))) }, into: &receiver)
        XCTAssertEqual(played.count, 5 * frames)
        // Without a withdraw, chunks already played are a rejoin's repeats.
        XCTAssertEqual(play([replacement(3, value: -1)], into: &receiver), [])
        XCTAssertEqual(receiver.takeEvents(), [])
        played = play([withdraw(UInt64(3 * frames)), replacement(3, value: -3), replacement(4, value: -4), replacement(5, value: -5)], into: &receiver)
        XCTAssertEqual(receiver.takeEvents(), [.withdraw(fromFrame: 3 * frames)])
        XCTAssertEqual(played, [-3, -4, -5].flatMap { [Float](repeating: $0, count: frames) })
        XCTAssertEqual(receiver.droppedChunks, 0)
        XCTAssertEqual(receiver.takeEvents(), [], "taken once")
    }

    func testAPauseIsAGapAndAResumeLaterOnTheSameTimelinePlays() {
        var receiver = receiver()
        _ = play([welcome(), pcmFormat()] + (0..<5).map { envelope(.audioChunk(pcmChunk($0))) }, into: &receiver)
        // Paused from chunk 3, resumed at chunk 100: the line stays, so the resume is on it.
        let played = play([withdraw(UInt64(3 * frames)), replacement(100, value: -100)], into: &receiver)
        XCTAssertEqual(played, [Float](repeating: -100, count: frames))
        XCTAssertEqual(receiver.takeEvents(), [.withdraw(fromFrame: 3 * frames)])
    }

    func testGainsPartyStateAndLatencyOffsetAreCheckedAndPassedOn() {
        var receiver = receiver()
        var paused = PCPartyState()
        paused.paused = true
        _ = play([welcome(), gain(0.5, at: 0, ramp: 0), pcmFormat(), envelope(.partyState(paused)), latencyOffset(-1500),
                  gain(-3, at: 960, ramp: 480), gain(7, at: 1920, ramp: 480_000)], into: &receiver)
        XCTAssertEqual(receiver.takeEvents(), [.gain(0.5, atFrame: 0, rampFrames: 0), .gain(0, atFrame: 960, rampFrames: 480),
                                               .gain(1, atFrame: 1920, rampFrames: 480_000)], "clamped to 0…1")
        XCTAssertTrue(receiver.partyPaused)
        XCTAssertEqual(receiver.latencyOffsetMilliseconds, -1500)
        XCTAssertEqual(receiver.droppedMessages, 0)
        paused.paused = false
        _ = play([envelope(.partyState(paused)), latencyOffset(2000)], into: &receiver)
        XCTAssertFalse(receiver.partyPaused)
        XCTAssertEqual(receiver.latencyOffsetMilliseconds, 2000)
    }

    /// Each field of ListenerSettings stands alone: a channel leaves the latency offset as it was,
    /// and an offset the channel; a message with one absurd field changes nothing.
    func testAChannelIsTakenAndWhatIsNotSaidIsKept() {
        var receiver = receiver()
        _ = play([welcome(), pcmFormat(), latencyOffset(120)], into: &receiver)
        XCTAssertNil(receiver.channel, "the listener's own until the broadcaster sets one")
        _ = play([channel(.left)], into: &receiver)
        XCTAssertEqual(receiver.channel, .left)
        XCTAssertEqual(receiver.latencyOffsetMilliseconds, 120)
        _ = play([latencyOffset(-40)], into: &receiver)
        XCTAssertEqual(receiver.channel, .left)
        XCTAssertEqual(receiver.latencyOffsetMilliseconds, -40)
        _ = play([channel(.mono, latencyOffset: 0), channel(.right), channel(.channelUnspecified)], into: &receiver)
        XCTAssertEqual(receiver.channel, .right)
        XCTAssertEqual(receiver.latencyOffsetMilliseconds, 0)
        XCTAssertEqual(receiver.droppedMessages, 0)
        _ = play([channel(.UNRECOGNIZED(5)), channel(.UNRECOGNIZED(-1)), channel(.stereo, latencyOffset: 2001)], into: &receiver)
        XCTAssertEqual(receiver.droppedMessages, 3)
        XCTAssertEqual(receiver.channel, .right, "the last good one stands")
        XCTAssertEqual(receiver.latencyOffsetMilliseconds, 0)
        _ = play([channel(.stereo)], into: &receiver)
        XCTAssertEqual(receiver.channel, .stereo)
    }

    func testAbsurdTimelineMessagesAreDroppedAndCounted() {
        var receiver = receiver()
        _ = play([welcome(), pcmFormat(), envelope(.audioChunk(pcmChunk(0))), latencyOffset(250)], into: &receiver)
        let absurd = [
            withdraw(.max), withdraw(StreamReceiver.maximumPosition), withdraw(UInt64(Int.max) + 1),
            gain(.nan, at: 0, ramp: 0), gain(.infinity, at: 0, ramp: 0), gain(-.infinity, at: 0, ramp: 0),
            gain(.signalingNaN, at: 0, ramp: 0), gain(1, at: .max, ramp: 0), gain(1, at: StreamReceiver.maximumPosition, ramp: 0),
            gain(1, at: 0, ramp: .max), gain(1, at: 0, ramp: 480_001),
            latencyOffset(2001), latencyOffset(-2001), latencyOffset(.max), latencyOffset(.min),
        ]
        XCTAssertEqual(play(absurd, into: &receiver), [])
        XCTAssertEqual(receiver.droppedMessages, absurd.count)
        XCTAssertEqual(receiver.takeEvents(), [])
        XCTAssertEqual(receiver.latencyOffsetMilliseconds, 250, "the last good one stands")
        // The stream goes on as if nothing had come.
        XCTAssertEqual(play([envelope(.audioChunk(pcmChunk(1)))], into: &receiver), [Float](repeating: 1, count: frames))
    }

    func testAFloodOfTimelineMessagesStaysBounded() {
        var receiver = receiver()
        _ = play([welcome(), pcmFormat(), envelope(.audioChunk(pcmChunk(0)))], into: &receiver)
        // Nobody takes the events (the player is busy): they stop piling up at the limit.
        var pcm: [Float] = []
        for k in 0..<100_000 {
            let message = k % 2 == 0 ? withdraw(UInt64(k)) : gain(0.5, at: UInt64(k), ramp: 480)
            XCTAssertEqual(receiver.receive(message, arrivedAt: 0, into: &pcm), .continues)
        }
        XCTAssertEqual(receiver.takeEvents().count, StreamReceiver.eventLimit)
        XCTAssertEqual(receiver.droppedMessages, 100_000 - StreamReceiver.eventLimit)
        XCTAssertTrue(pcm.isEmpty)
    }

    func testAWithdrawBeforeAnyAudioIsNothingToDo() {
        var receiver = receiver()
        _ = play([welcome(), pcmFormat(), withdraw(0), withdraw(960)], into: &receiver)
        XCTAssertEqual(receiver.takeEvents(), [])
        XCTAssertEqual(play([envelope(.audioChunk(pcmChunk(0)))], into: &receiver).count, frames)
    }

    func testTheTitleChangesWhereTheSongIsHeardFrom() {
        var receiver = receiver()
        func song(_ title: String, from start: UInt64) -> PCEnvelope {
            var metadata = PCMetadata()
            metadata.title = title
            metadata.startPosition = start
            return envelope(.metadata(metadata))
        }
        _ = play([welcome(), song("One", from: 0), song("Two", from: 48_000), song("Three", from: 96_000)], into: &receiver)
        XCTAssertEqual(receiver.tags.title, "Three", "the newest, when where playback stands is not known")
        XCTAssertEqual(receiver.tags(atFrame: nil).title, "Three")
        XCTAssertEqual(receiver.tags(atFrame: 47_999).title, "One")
        XCTAssertEqual(receiver.tags(atFrame: 48_000).title, "Two")
        XCTAssertEqual(receiver.tags(atFrame: 200_000).title, "Three")
        // A skip at 60 000: what was announced from there on is replaced.
        _ = play([song("Skipped to", from: 60_000)], into: &receiver)
        XCTAssertEqual(receiver.tags(atFrame: 59_999).title, "Two")
        XCTAssertEqual(receiver.tags(atFrame: 100_000).title, "Skipped to")
        // Hostile positions and floods stay bounded and answer something sane.
        _ = play((0..<1000).map { song("S\($0)", from: UInt64.max - UInt64($0)) }, into: &receiver)
        XCTAssertEqual(receiver.tags(atFrame: -5).title, receiver.tags(atFrame: 0).title)
        XCTAssertEqual(receiver.tags(atFrame: Int.max).title, "S999")
    }

    func testTheGateDeliversTimelineMessagesOnlyAfterTheWelcome() {
        var paused = PCPartyState()
        paused.paused = true
        for message in [withdraw(0), gain(1, at: 0, ramp: 0), envelope(.partyState(paused)), latencyOffset(0), identify(0)] {
            var early = gate()
            guard case .close? = early.handle(message, arrivedAt: 0).first else { return XCTFail("\(message) accepted before Welcome") }
            var joined = gate()
            _ = joined.handle(welcome(), arrivedAt: 0)
            XCTAssertEqual(joined.handle(message, arrivedAt: 0), [.deliver(message)])
        }
    }
}
