@testable import PartyCastBroadcast
import XCTest

/// The timeline as a value: positions against presentation times, and what a pause, a resume and a
/// cut do to the song heard at each position.
final class TimelineTests: XCTestCase {
    /// The exact frame heard `elapsed` ns after the origin, by 128-bit arithmetic.
    private func exactPosition(elapsed: UInt64, rate: Int) -> UInt64 {
        let product = elapsed.multipliedFullWidth(by: UInt64(rate))
        return UInt64(1_000_000_000).dividingFullWidth(product).quotient
    }

    func testPositionIsTheFrameWhoseTimeHasBegun() {
        let origin: UInt64 = 5_000_000_000
        for rate in [8000, 44100, 48000, 96000] {
            var timeline = Timeline(origin: origin)
            timeline.sampleRate = rate
            XCTAssertEqual(timeline.position(at: origin - 1), 0, "before the broadcast starts")
            // Up to a month of elapsed time, where elapsed × rate no longer fits in 64 bits.
            for elapsed: UInt64 in [0, 1, 22_675, 22_676, 999_999_999, 1_000_000_000, 3_600_000_000_017, 2_592_000_000_000_003] {
                XCTAssertEqual(timeline.position(at: origin + elapsed), exactPosition(elapsed: elapsed, rate: rate), "\(elapsed) ns at \(rate) Hz")
            }
        }
    }

    func testPresentationTimesRoundTripToPositions() {
        for rate in [44100, 48000] {
            var timeline = Timeline(origin: 1_000_000)
            timeline.sampleRate = rate
            for frame: UInt64 in [0, 1, 2, 441, 959, 960, 44_099, 44_100, 48_000, 123_456_789] {
                let time = timeline.presentationTime(ofFrame: frame)
                // Frame f starts at f / rate s: the nanosecond after its (truncated) time is in it,
                // and the time itself is at most one frame before.
                XCTAssertEqual(timeline.position(at: time + 1), frame, "frame \(frame) at \(rate) Hz")
                XCTAssertTrue(timeline.position(at: time) == frame || timeline.position(at: time) + 1 == frame)
                XCTAssertLessThan(timeline.presentationTime(ofFrame: frame), timeline.presentationTime(ofFrame: frame + 1))
            }
        }
    }

    /// A timeline of song 1 from frame 0, with `chunks` chunks of 960 frames sent.
    private func playing(chunks: Int) -> Timeline {
        var timeline = Timeline(origin: 0)
        timeline.start(item: 1, songFrame: 0, at: 0)
        for index in 0..<chunks { timeline.append(frames: 960, samples: (0..<960).map { Float(index * 960 + $0) }) }
        return timeline
    }

    func testPauseAndResumeContinueFromTheFramePausedOn() throws {
        var timeline = playing(chunks: 10)
        let withdrawn = timeline.withdraw(from: 4800)
        XCTAssertEqual(withdrawn.map(\.position), [4800, 5760, 6720, 7680, 8640])
        XCTAssertEqual(withdrawn.first?.samples.first, 4800, "what was taken back starts at the cut")
        XCTAssertEqual(timeline.sent.last.map { $0.position + UInt64($0.frames) }, 4800)
        timeline.pause(at: 4800)
        XCTAssertTrue(timeline.paused)
        XCTAssertEqual(timeline.end, 4800)
        XCTAssertEqual(timeline.heard(at: 1_000_000).map { [$0.item, $0.songFrame] }, [1, 4800], "paused: what resume plays")

        let first = try XCTUnwrap(timeline.resume(at: 100_000))
        XCTAssertEqual([first.item, first.songFrame], [1, 4800])
        XCTAssertFalse(timeline.paused)
        XCTAssertEqual(timeline.end, 100_000)
        XCTAssertEqual(timeline.heard(at: 4799).map { [$0.item, $0.songFrame] }, [1, 4799], "before the pause: unchanged")
        for offset: UInt64 in [0, 1, 960, 50_000] {
            XCTAssertEqual(timeline.heard(at: 100_000 + offset).map { [$0.item, $0.songFrame] }, [1, 4800 + Int(offset)])
        }
    }

    func testAPauseKeepsTheSongsQueuedAfterTheCut() {
        var timeline = playing(chunks: 10)
        timeline.start(item: 2, songFrame: 0, at: 7680)  // song 2 follows song 1 in what was sent
        _ = timeline.withdraw(from: 4800)
        timeline.pause(at: 4800)
        XCTAssertEqual(timeline.held, [.init(offset: 0, item: 1, songFrame: 4800), .init(offset: 2880, item: 2, songFrame: 0)])
        _ = timeline.resume(at: 20_000)
        XCTAssertEqual(timeline.heard(at: 22_879).map { [$0.item, $0.songFrame] }, [1, 7679])
        XCTAssertEqual(timeline.heard(at: 22_880).map { [$0.item, $0.songFrame] }, [2, 0])
    }

    func testACutReplacesWhatFollowsIt() {
        var timeline = playing(chunks: 10)
        _ = timeline.withdraw(from: 3840)
        timeline.cut(at: 3840)
        timeline.start(item: 1, songFrame: 96_000, at: 3840)  // a seek to 2 s
        XCTAssertEqual(timeline.end, 3840)
        XCTAssertEqual(timeline.heard(at: 3839).map { [$0.item, $0.songFrame] }, [1, 3839])
        XCTAssertEqual(timeline.heard(at: 3840).map { [$0.item, $0.songFrame] }, [1, 96_000])
        XCTAssertEqual(timeline.sentBoundary(atOrAfter: 1000), 1920)
        XCTAssertNil(timeline.sentBoundary(atOrAfter: 3841), "nothing sent after the cut yet")
    }

    func testForgettingWhatWasHeardKeepsWhatIsHeardNow() {
        var timeline = playing(chunks: 10)
        timeline.start(item: 2, songFrame: 0, at: 5000)
        timeline.forgetHeard(before: 6000)
        XCTAssertEqual(timeline.sent.first?.position, 5760, "the chunk heard at 6000 stays")
        XCTAssertEqual(timeline.segments.map(\.item), [2])
        XCTAssertEqual(timeline.heard(at: 6000).map { [$0.item, $0.songFrame] }, [2, 1000])
    }
}

/// Volumes as gains: the curve, and the order of each listener's Gain messages.
final class GainPolicyTests: XCTestCase {
    func testTheGainIsCubicInEachVolume() {
        XCTAssertEqual(GainPolicy.gain(forVolume: 100, muted: false, party: 100), 1)
        XCTAssertEqual(GainPolicy.gain(forVolume: 50, muted: false, party: 100), 0.125)
        XCTAssertEqual(GainPolicy.gain(forVolume: 50, muted: false, party: 50), 1.0 / 64)
        XCTAssertEqual(GainPolicy.gain(forVolume: 0, muted: false, party: 100), 0)
        XCTAssertEqual(GainPolicy.gain(forVolume: 100, muted: true, party: 100), 0)
        XCTAssertEqual(GainPolicy.fadeFrames(sampleRate: 48000), 240)
        XCTAssertEqual(GainPolicy.volumeRampFrames(sampleRate: 44100), 1323)
    }

    func testAListenersGainsNeverStartBeforeItsLastOne() {
        var policy = GainPolicy()
        XCTAssertEqual(policy.claimStart(10_000, for: "a"), 10_000)
        XCTAssertEqual(policy.claimStart(9_000, for: "a"), 10_000, "a later Gain may not start before an earlier one")
        XCTAssertEqual(policy.claimStart(9_000, for: "b"), 9_000, "each listener on its own")
        XCTAssertEqual(policy.claimStart(12_000, for: "a"), 12_000)
    }

    func testAJoiningListenerHearsSilenceWhilePaused() {
        var policy = GainPolicy(partyVolume: 50)
        policy.settings["a"] = .init(volume: 50, latencyOffsetMilliseconds: -20)
        policy.settings["b"] = .init(volume: 100, channel: .right)
        policy.settings["c"] = .init(volume: 100)
        let playing = policy.greeting(paused: false)
        XCTAssertEqual(playing.defaultGain, 0.125)
        XCTAssertEqual(playing.gains, ["a": 1.0 / 64, "b": 0.125, "c": 0.125])
        XCTAssertEqual(playing.remoteSettings, ["a": RemoteSettings(latencyOffsetMilliseconds: -20), "b": RemoteSettings(channel: .right)],
                       "only what the remote set")
        let paused = policy.greeting(paused: true)
        XCTAssertEqual(paused.defaultGain, 0)
        XCTAssertEqual(paused.gains, ["a": 0, "b": 0, "c": 0])
    }
}
