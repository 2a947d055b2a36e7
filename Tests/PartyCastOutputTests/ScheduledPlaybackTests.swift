import Foundation
import PartyCastClock
import PartyCastCore
import PartyCastOutput
import PartyCastRing
import XCTest

/// Party mode's scheduler on virtual time: a renderer asked for 10 ms periods at known heard-at
/// times must put each stream frame out when the schedule says, whatever the ring holds. The
/// stream is a 1 kHz sine on the left and its cosine on the right, so a frame's content tells
/// its position: one microsecond late is 0.0063 of amplitude off, well above the kernel's own error.
final class ScheduledPlaybackTests: XCTestCase {
    let rate = 48_000
    let period = 480
    let omega = 2 * Double.pi * 1000 / 48_000

    /// Runs a renderer for `seconds` of virtual time. `line(t)` is the schedule at local time t;
    /// `feed(frame, t)` says whether the producer has stream frame `frame` by time t (it is fed in order).
    /// Returns the left channel and, per output frame, the stream frame the schedule wanted there.
    /// With `scheduleFrom`, no schedule exists before that time (no clock answer yet).
    /// With `sleepsWhenFull`, the producer finding the ring (of at least `ringFrames`) full writes
    /// nothing more for a quarter of the ring's length, as the player's does. With
    /// `settlesBeforeSchedule`, the song is under way and the clock settling until `scheduleFrom`.
    func play(seconds: Double, period: Int = 480, firstFrame: Int = 0, latencyOffset: Int64 = 0, scheduleFrom: Int64 = 0,
              ringFrames: Int = 4 * 48_000, sleepsWhenFull: Bool = false, settlesBeforeSchedule: Bool = false,
              line: (Int64) -> PlaybackSchedule.Line,
              feed: (Int, Int64) -> Bool = { _, _ in true }) -> (left: [Float], right: [Float], due: [Double], fed: Int) {
        let ring = SPSCRing(minimumCapacity: ringFrames * 2)
        let quarterOfTheRing = Int64(ring.capacity / 4 / 2) * 1_000_000_000 / Int64(rate)
        var producerWakesAt: Int64 = 0
        let schedule = PlaybackSchedule()
        schedule.isSettling = settlesBeforeSchedule
        let renderer = Renderer(ring: ring, channels: 2, sync: Renderer.Sync(schedule: schedule, sampleRate: rate, latencyOffsetNanoseconds: latencyOffset))
        renderer.beginTimeline(atFrame: firstFrame)
        renderer.setMode(.run)
        var nextFrame = firstFrame
        var left: [Float] = [], right: [Float] = [], due: [Double] = []
        let buffer = UnsafeMutableBufferPointer<Float>.allocate(capacity: period * 2)
        defer { buffer.deallocate() }
        for k in 0..<Int(seconds * Double(rate) / Double(period)) {
            let heardAt = Int64(k) * Int64(period) * 1_000_000_000 / Int64(rate)
            let current = line(heardAt)
            if heardAt >= scheduleFrom {
                schedule.isSettling = false
                schedule.publish(current)
            }
            // The producer runs ahead of playback as a network would deliver.
            var frame = [Float](repeating: 0, count: 2)
            while heardAt >= producerWakesAt && ring.availableToWrite >= 2 && feed(nextFrame, heardAt) {
                frame[0] = Float(0.5 * sin(omega * Double(nextFrame)))
                frame[1] = Float(0.5 * cos(omega * Double(nextFrame)))
                _ = frame.withUnsafeBufferPointer { ring.write($0) }
                nextFrame += 1
            }
            if sleepsWhenFull && ring.availableToWrite < 2 && heardAt >= producerWakesAt { producerWakesAt = heardAt + quarterOfTheRing }
            _ = renderer.render(into: buffer, heardAt: heardAt)
            for i in 0..<period {
                left.append(buffer[2 * i])
                right.append(buffer[2 * i + 1])
                due.append(current.frame(at: heardAt + latencyOffset + Int64(i) * 1_000_000_000 / Int64(rate)))
            }
        }
        return (left, right, due, nextFrame)
    }

    /// Stream frame 0 due at `start` ns, advancing `1 + drift` stream frames per output frame.
    func line(start: Int64, driftPPM: Double = 0) -> PlaybackSchedule.Line {
        PlaybackSchedule.Line(localReference: start, frameAtReference: 0, framesPerNanosecond: Double(rate) / 1e9 * (1 + driftPPM * 1e-6))
    }

    /// Largest difference between what was played and what the schedule wanted, over `range`
    /// (output frames), in both channels.
    func worstError(_ played: (left: [Float], right: [Float], due: [Double], fed: Int), _ range: Range<Int>) -> Double {
        var worst = 0.0
        for i in range {
            worst = max(worst, abs(Double(played.left[i]) - 0.5 * sin(omega * played.due[i])),
                        abs(Double(played.right[i]) - 0.5 * cos(omega * played.due[i])))
        }
        return worst
    }

    /// Microseconds of timing error that a content error of `error` amounts to at most.
    func microseconds(_ error: Double) -> Double { error / (0.5 * omega) / Double(rate) * 1e6 }

    func testFirstFrameLeavesAtItsPresentationTimeToTheSubSample() {
        // 123.4567 ms: not on a period, not on a frame.
        let start: Int64 = 123_456_700
        let played = play(seconds: 2, line: { _ in self.line(start: start) })
        let firstDue = Int((Double(start) * Double(rate) / 1e9).rounded(.up))
        XCTAssertEqual(played.left[..<firstDue].map { abs($0) }.max(), 0, "silence before the first frame is due")
        XCTAssertEqual(played.right[..<firstDue].map { abs($0) }.max(), 0)
        XCTAssertNotEqual(played.right[firstDue], 0, "audio from the first due frame on")
        // After the 5 ms fade-in, every frame is the one due.
        let error = worstError(played, (firstDue + 250)..<played.left.count)
        XCTAssertLessThan(microseconds(error), 1, "worst timing error \(microseconds(error)) µs")
    }

    func testAScheduleOnTheFrameGridPlaysTheStreamBitForBit() {
        let played = play(seconds: 1, line: { _ in self.line(start: 100_000_000) })
        // Frame 0 due at output frame 4800; after the fade-in the samples are the stream's own.
        for i in 5100..<played.left.count {
            XCTAssertEqual(played.left[i], Float(0.5 * sin(omega * Double(i - 4800))), "frame \(i)")
            if played.left[i] != Float(0.5 * sin(omega * Double(i - 4800))) { break }
        }
    }

    func testDriftingClocksAreFollowedBySmoothResampling() {
        for drift in [-150.0, 120.0] {
            let played = play(seconds: 20, line: { _ in self.line(start: 50_000_000, driftPPM: drift) })
            let error = worstError(played, 3000..<played.left.count)
            XCTAssertLessThan(microseconds(error), 1, "\(drift) ppm: worst \(microseconds(error)) µs")
        }
    }

    func testALateJoinerDropsWhatHasPassedAndStartsOnTime() {
        // Frame 24000 (0.5 s in) is due at the first period; the ring starts at frame 0.
        let played = play(seconds: 2, line: { _ in self.line(start: -500_000_000) })
        XCTAssertEqual(played.due[0], 24_000, accuracy: 1e-9)
        let error = worstError(played, 300..<played.left.count)
        XCTAssertLessThan(microseconds(error), 1)
    }

    func testASmallStepOfTheClockEstimateIsSlidAwayWithoutAClick() {
        // At 2 s the estimate moves 2 ms: too small for a resync, so the ratio bends for a while.
        let played = play(seconds: 12, line: { t in self.line(start: 50_000_000 + (t >= 2_000_000_000 ? 2_000_000 : 0)) })
        let stepAt = 200 * period
        // No click: consecutive samples never differ more than the sine itself allows (ω × amplitude).
        var largestJump: Float = 0
        for i in (stepAt - 1000)..<played.left.count { largestJump = max(largestJump, abs(played.left[i] - played.left[i - 1])) }
        XCTAssertLessThan(Double(largestJump), 0.5 * omega * 1.01)
        // Converged again a few time constants later.
        let late = worstError(played, (stepAt + 8 * rate)..<played.left.count)
        XCTAssertLessThan(microseconds(late), 1, "after sliding: \(microseconds(late)) µs")
        let meanwhile = worstError(played, (stepAt + rate / 2)..<(stepAt + rate))
        XCTAssertGreaterThan(microseconds(meanwhile), 50, "still sliding half a second later, not jumping")
    }

    func testAStallIsFixedByAHardResyncNotAnOffset() {
        // The producer stops delivering from frame 96000 to 1.5 s later, then catches up at once:
        // an underrun. Afterwards playback is on the schedule again, not 1.5 s behind it.
        let start: Int64 = 20_000_000
        let played = play(seconds: 6, line: { _ in self.line(start: start) }, feed: { frame, t in
            frame < 96_000 || t >= 3_500_000_000
        })
        let resumed = 350 * period
        let error = worstError(played, (resumed + 600)..<played.left.count)
        XCTAssertLessThan(microseconds(error), 1, "after the stall: \(microseconds(error)) µs")
    }

    func testAJumpOfTheScheduleResyncsWithAFade() {
        // At 2 s the schedule jumps 50 ms ahead (a stream restart, a clock jump).
        let played = play(seconds: 5, line: { t in self.line(start: 50_000_000 - (t >= 2_000_000_000 ? 50_000_000 : 0)) })
        let jumpAt = 200 * period
        let error = worstError(played, (jumpAt + 2 * period + 300)..<played.left.count)
        XCTAssertLessThan(microseconds(error), 1)
        var largestJump: Float = 0
        for i in (jumpAt - 100)..<(jumpAt + 3 * period) { largestJump = max(largestJump, abs(played.left[i] - played.left[i - 1])) }
        // A 5 ms (240-frame) fade adds at most amplitude / 240 per sample to the sine's own slope.
        XCTAssertLessThan(Double(largestJump), 0.5 * (omega + 1.0 / 240) * 1.01, "faded, no click")
    }

    func testLatencyOffsetPlaysThatMuchEarlier() {
        let played = play(seconds: 2, latencyOffset: 7_000_000, line: { _ in self.line(start: 100_000_000) })
        // Frame 0 leaves the device 7 ms before its presentation time.
        let firstDue = Int((93_000_000.0 * Double(rate) / 1e9).rounded(.up))
        XCTAssertEqual(played.right[firstDue - 1], 0)
        XCTAssertNotEqual(played.right[firstDue], 0)
        XCTAssertLessThan(microseconds(worstError(played, (firstDue + 300)..<played.left.count)), 1)
    }

    /// No clock answer for 5 s while the producer keeps delivering: the full ring lets its oldest
    /// audio go rather than the producer stalling, and once a schedule exists every frame plays at
    /// its time, so the frames let go kept the ring's place on the timeline. (Periods of 470 frames,
    /// so what was let go is no whole number of the sine's 48-frame cycles: a misplaced ring shows.)
    func testARingThatFillsBeforeAnyScheduleKeepsFlowingAndItsPlace() {
        let played = play(seconds: 7, period: 470, scheduleFrom: 5_000_000_000, line: { _ in self.line(start: -1_000_000_000) })
        XCTAssertGreaterThan(played.fed, 6 * rate, "the producer never waited for long on a full ring")
        XCTAssertTrue(played.left[0..<(5 * rate)].allSatisfy { $0 == 0 }, "silence while there is no schedule")
        let settled = Int(5.1 * Double(rate))
        XCTAssertLessThan(microseconds(worstError(played, settled..<played.left.count)), 1, "in step once the schedule came")
    }

    /// A listener joining a song a minute in waits 6 s for its clock to settle, while the
    /// connection brings audio in chunks of 1152 frames a second ahead of their time and the
    /// producer sleeps on the full ring (1.37 s, `listener join`'s) as the player's does. Once
    /// placed it plays on without a gap: what the ring let go meanwhile kept the producer abreast of
    /// the connection, not a period a sleep behind it.
    func testALateJoinerPlacedAfterALongWaitPlaysWithoutAGap() throws {
        let start: Int64 = -60_000_000_000
        let lead = Int64(rate), chunk = 1152
        let played = play(seconds: 10, firstFrame: 60 * rate, scheduleFrom: 6_000_000_000, ringFrames: rate,
                          sleepsWhenFull: true, settlesBeforeSchedule: true, line: { _ in self.line(start: start) },
                          feed: { frame, t in Int64(frame / chunk * chunk + chunk) <= (t - start) * Int64(self.rate) / 1_000_000_000 + lead })
        let first = try XCTUnwrap(played.left.firstIndex { $0 != 0 })
        XCTAssertLessThan(first, 6 * rate + 2 * period, "placed when the schedule came")
        var longestSilence = 0, silence = 0
        for sample in played.left[first...] {
            silence = sample == 0 ? silence + 1 : 0
            longestSilence = max(longestSilence, silence)
        }
        XCTAssertLessThan(longestSilence, 2, "a gap of \(longestSilence) frames after the first sound")
        XCTAssertLessThan(microseconds(worstError(played, (first + 300)..<played.left.count)), 1)
    }

    /// A listener that joins 0.5 s before the song, its clock placed only after 0.4 s, while the
    /// connection brings audio 1.2 s ahead of its time (a longer --buffer) into a ring of 1.37 s:
    /// the ring, three quarters full but never full, lets nothing go (the clock is not settling: the
    /// song has not started), and the song plays from its first frame at its time.
    func testARingThatNeverFillsBeforeTheScheduleKeepsTheSongsStart() throws {
        let start: Int64 = 500_000_000
        let lead: Int64 = 1_200_000_000
        let played = play(seconds: 2, scheduleFrom: 400_000_000, ringFrames: rate, sleepsWhenFull: true,
                          line: { _ in self.line(start: start) },
                          feed: { frame, t in Int64(frame) <= (t - start + lead) * Int64(self.rate) / 1_000_000_000 })
        let first = try XCTUnwrap(played.left.firstIndex { $0 != 0 })
        XCTAssertEqual(played.due[first], 0, accuracy: 1, "the song's first frame plays first")
        XCTAssertLessThan(microseconds(worstError(played, (first + 300)..<played.left.count)), 1, "in step after the fade-in")
    }

    /// A broadcast sends 2 s of song at once, 1.5 s ahead of its time, and the clock is placed only
    /// after 0.3 s (a reconnection's gap): the full ring lets go a period at most, not audio at the
    /// stream's pace, since what it holds will be heard in time.
    func testABurstAheadOfItsTimeKeepsItsStartUntilTheScheduleComes() throws {
        let played = play(seconds: 3, scheduleFrom: 300_000_000, ringFrames: rate, sleepsWhenFull: true,
                          line: { _ in self.line(start: 1_500_000_000) },
                          feed: { frame, _ in frame < 2 * self.rate })
        let first = try XCTUnwrap(played.left.firstIndex { $0 != 0 })
        XCTAssertLessThanOrEqual(played.due[first], Double(2 * period), "the song came in \(Int(played.due[first])) frames late")
        XCTAssertLessThan(microseconds(worstError(played, (first + 300)..<played.left.count)), 1, "in step after the fade-in")
    }
}
