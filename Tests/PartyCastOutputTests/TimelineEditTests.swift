import PartyCastClock
import PartyCastCore
import PartyCastOutput
import PartyCastRing
import XCTest

/// Protocol 4's live timeline on the output thread, on virtual time: cuts at a withdrawn frame, the
/// gain curve, a latency offset changed while playing. Streams are made of samples that name their
/// frame (the original audio positive, its replacement negative), so a recording shows exactly
/// which frame of which version was heard.
final class TimelineEditTests: XCTestCase {
    static let rate = 48_000, period = 480

    /// A renderer with its ring, fed and played by the test itself (it is both threads, in turn).
    final class Rig {
        let ring = SPSCRing(minimumCapacity: 4 * TimelineEditTests.rate * 2)
        let schedule = PlaybackSchedule()
        let renderer: Renderer
        /// Per output frame: the left sample, and (party mode) the stream frame due there.
        var left: [Float] = [], due: [Double] = []
        private var periods = 0
        private let buffer = UnsafeMutableBufferPointer<Float>.allocate(capacity: TimelineEditTests.period * 2)

        /// Party mode with frame 0 due at `start` ns (on the frame grid: played bit for bit), or the
        /// plain path; with `scheduleLater`, party mode has no schedule until `publish(start:)`.
        init(scheduledFrom start: Int64?, scheduleLater: Bool = false, timelineStart: Int = 0, chime: Chime? = nil) {
            let sync = start.map { [schedule] _ in Renderer.Sync(schedule: schedule, sampleRate: TimelineEditTests.rate) }
            renderer = Renderer(ring: ring, channels: 2, sync: sync, chime: chime)
            if let start, !scheduleLater { publish(start: start) }
            renderer.beginTimeline(atFrame: timelineStart)
            renderer.setMode(.run)
        }

        func publish(start: Int64) {
            schedule.publish(PlaybackSchedule.Line(localReference: start, frameAtReference: 0, framesPerNanosecond: Double(TimelineEditTests.rate) / 1e9))
        }

        deinit { buffer.deallocate() }

        /// Writes stream frames `frames`, each sample `sign × (frame + 1)` (exact in Float up to 2²⁴).
        func write(_ frames: Range<Int>, sign: Float = 1) {
            let samples = frames.flatMap { [sign * Float($0 + 1), sign * Float($0 + 1)] }
            XCTAssertEqual(samples.withUnsafeBufferPointer { ring.write($0) }, samples.count, "the ring has room")
        }

        func render(periods count: Int) {
            for _ in 0..<count {
                let heardAt = Int64(periods) * Int64(TimelineEditTests.period) * 1_000_000_000 / Int64(TimelineEditTests.rate)
                _ = renderer.render(into: buffer, heardAt: renderer.isScheduled ? heardAt : nil)
                for i in 0..<TimelineEditTests.period { left.append(buffer[2 * i]) }
                periods += 1
            }
        }

        /// Requests a cut and renders until the output thread has answered it (one period).
        func cut(at frame: Int) {
            let ticket = renderer.requestCut(atFrame: frame)
            XCTAssertFalse(renderer.isCut(ticket))
            render(periods: 1)
            XCTAssertTrue(renderer.isCut(ticket), "a cut is answered within a period")
        }
    }

    /// What was heard, as (stream frame, version) per sample that carried audio: +1 original, −1
    /// replacement (for audio played bit for bit, no fade).
    func heard(_ left: [Float]) -> [(frame: Int, sign: Float)] {
        left.filter { $0 != 0 }.map { (Int($0.magnitude) - 1, $0 > 0 ? 1 : -1) }
    }

    /// The first output frame in `range` that is not stream frame `i − offset` of the original
    /// before `cutAt` and of the replacement from it, bit for bit; nil if there is none.
    func firstMismatch(_ left: [Float], _ range: Range<Int>, offset: Int, cutAt: Int) -> String? {
        for i in range {
            let frame = i - offset
            let expected = frame < cutAt ? Float(frame + 1) : -Float(frame + 1)
            if left[i] != expected { return "output frame \(i) (stream frame \(frame)): \(left[i]), expected \(expected)" }
        }
        return nil
    }

    /// Frame 0 due at output frame 4800 (100 ms): output frame i plays stream frame i − 4800.
    static let start: Int64 = 100_000_000
    static let offset = 4800
    /// The fade-in at the start (5 ms): frames before this are scaled.
    static let faded = offset + 240

    func testACutKeepsEarlierFramesBitExactAndTheReplacementFollowsExactly() {
        let rig = Rig(scheduledFrom: Self.start)
        let cutAt = 30_000
        rig.write(0..<40_000)
        rig.render(periods: 40)  // plays up to stream frame 14 400; the reader holds some input ahead
        rig.cut(at: cutAt)
        rig.write(cutAt..<60_000, sign: -1)
        rig.render(periods: 120)
        // Up to where the replacement runs out (less the kernel's reach).
        XCTAssertNil(firstMismatch(rig.left, Self.faded..<(Self.offset + 59_000), offset: Self.offset, cutAt: cutAt))
    }

    func testACutOfFramesAlreadyTakenFromTheRingDropsThemFromTheReadersInput() {
        let rig = Rig(scheduledFrom: Self.start)
        rig.write(0..<20_000)
        rig.render(periods: 20)  // stream frame 4800 next; the reader's input reaches 8000 frames ahead
        // Past the period that answers the cut, as a broadcaster's withdraw comes ahead of its frame.
        let cutAt = 4800 + 1000
        rig.cut(at: cutAt)
        rig.write(cutAt..<30_000, sign: -1)
        rig.render(periods: 40)
        XCTAssertFalse(heard(rig.left).contains { $0.frame >= cutAt && $0.sign > 0 }, "a withdrawn frame was heard")
        XCTAssertNil(firstMismatch(rig.left, Self.faded..<rig.left.count, offset: Self.offset, cutAt: cutAt))
    }

    func testACutBehindPlaybackDropsEverythingAndLateReplacementFramesNeverPlayOutOfPlace() {
        let rig = Rig(scheduledFrom: Self.start)
        rig.write(0..<20_000)
        rig.render(periods: 30)  // stream frame 9600 next
        rig.cut(at: 5000)
        // Only from here is the reader past the cut: the replacement's frames before it are late.
        rig.write(5000..<30_000, sign: -1)
        rig.render(periods: 40)
        // From the cut on, nothing of the original (positive samples) is heard.
        XCTAssertNil(rig.left[(30 * Self.period)...].firstIndex { $0 > 0 }, "a withdrawn frame was heard")
        // Once it plays again, each frame plays at its time (after a fade-in, as after any realignment).
        XCTAssertNil(firstMismatch(rig.left, (rig.left.count - 20 * Self.period)..<rig.left.count, offset: Self.offset, cutAt: 5000))
    }

    func testACutIsAnsweredWhileHeld() {
        let rig = Rig(scheduledFrom: nil)
        let party = Rig(scheduledFrom: Self.start)
        party.renderer.setMode(.hold)
        rig.renderer.setMode(.hold)
        for r in [rig, party] {
            r.write(0..<1000)
            r.cut(at: 500)
            r.write(500..<2000, sign: -1)
            r.renderer.setMode(.run)
        }
        rig.render(periods: 10)
        // After the period held while the cut was answered.
        XCTAssertNil(firstMismatch(rig.left, Self.period..<(Self.period + 2000), offset: Self.period, cutAt: 500), "the plain path")
        party.render(periods: 20)
        XCTAssertNil(firstMismatch(party.left, Self.faded..<(Self.offset + 1900), offset: Self.offset, cutAt: 500), "party mode")
    }

    func testACutBeforeAnyScheduleKeepsTheRingsPlaceOnTheTimeline() {
        // Party mode, no schedule yet, the timeline starting at frame 960: the cut is placed by stream frame.
        let rig = Rig(scheduledFrom: Self.start, scheduleLater: true, timelineStart: 960)
        rig.write(960..<3000)
        rig.cut(at: 2000)
        rig.write(2000..<9000, sign: -1)
        // Frame 960 due at output frame 4800, as frame 0 is elsewhere.
        rig.publish(start: Self.start - 20_000_000)
        rig.render(periods: 20)
        XCTAssertTrue(rig.left[..<Self.offset].allSatisfy { $0 == 0 })
        XCTAssertNil(firstMismatch(rig.left, Self.faded..<rig.left.count, offset: Self.offset - 960, cutAt: 2000))
    }

    func testAFloodOfCutsNeverBlocksAndOnlyTheEarliestCounts() {
        let rig = Rig(scheduledFrom: nil)
        rig.write(0..<10_000)
        var ticket = 0
        for frame in stride(from: 9000, through: 3000, by: -1) { ticket = rig.renderer.requestCut(atFrame: frame) }
        rig.render(periods: 1)
        XCTAssertTrue(rig.renderer.isCut(ticket))
        rig.write(3000..<4000, sign: -1)
        rig.render(periods: 10)
        XCTAssertEqual(heard(rig.left).map(\.frame), Array(0..<4000))
        XCTAssertEqual(heard(rig.left).filter { $0.sign < 0 }.first?.frame, 3000)
    }

    // MARK: Gain

    func testGainCurveRampsLinearlyAndANewMessageStartsFromWhereItStands() {
        var curve = GainCurve()
        XCTAssertEqual(curve.value(at: 123), 1, "no message: full gain")
        curve.set(0, atFrame: 1000, rampFrames: 100)
        XCTAssertEqual(curve.value(at: 999), 1)
        XCTAssertEqual(curve.value(at: 1000), 1)
        XCTAssertEqual(curve.value(at: 1050), 0.5, accuracy: 1e-6)
        XCTAssertEqual(curve.value(at: 1100), 0)
        XCTAssertEqual(curve.value(at: 5000), 0)
        // Halfway down, a new target: the rest of the old ramp is replaced, from where it stands.
        curve.set(0.8, atFrame: 1050, rampFrames: 300)
        XCTAssertEqual(curve.value(at: 1049), 0.51, accuracy: 1e-6, "before it, unchanged")
        XCTAssertEqual(curve.value(at: 1050), 0.5, accuracy: 1e-6)
        XCTAssertEqual(curve.value(at: 1200), 0.65, accuracy: 1e-6)
        XCTAssertEqual(curve.value(at: 1350), 0.8, accuracy: 1e-6)
        // A step (no ramp) takes effect at its frame.
        curve.set(0.25, atFrame: 2000, rampFrames: 0)
        XCTAssertEqual(curve.value(at: 1999), 0.8, accuracy: 1e-6)
        XCTAssertEqual(curve.value(at: 2000), 0.25)
        // Played frames are forgotten without changing what is still to play.
        curve.forget(before: 1200)
        XCTAssertEqual(curve.value(at: 1200), 0.65, accuracy: 1e-6)
        XCTAssertEqual(curve.value(at: 1999), 0.8, accuracy: 1e-6)
    }

    func testAFloodOfGainsStaysBounded() {
        var curve = GainCurve()
        for k in 0..<100_000 { curve.set(Float(k % 7) / 7, atFrame: k * 10, rampFrames: 480_000) }
        XCTAssertLessThanOrEqual(curve.points.count, GainCurve.capacity)
        XCTAssertTrue((0..<1000).allSatisfy { (0...1).contains(curve.value(at: 990_000 + $0 * 7)) })
        // Backwards and huge positions are taken as they come: no trap.
        curve.set(1, atFrame: 0, rampFrames: 0)
        curve.set(0.5, atFrame: 1 << 48, rampFrames: 480_000)
        XCTAssertEqual(curve.value(at: 1 << 47), 1)
    }

    /// A fade to 0 ending at a cut and back up from 0 after it, on a constant signal, in both paths:
    /// every step between neighbouring frames is at most the ramp's slope.
    func testGainRampsAreLinearPerFrameWithNoStepBeyondTheSlope() {
        for scheduled in [false, true] {
            let rig = Rig(scheduledFrom: scheduled ? Self.start : nil)
            var curve = GainCurve()
            curve.set(0, atFrame: 20_000 - 240, rampFrames: 240)
            curve.set(1, atFrame: 26_000, rampFrames: 240)
            curve.set(0.5, atFrame: 30_000, rampFrames: 4800)
            rig.renderer.gains.publish(curve)
            let constant = [Float](repeating: 0.5, count: 40_000 * 2)
            _ = constant.withUnsafeBufferPointer { rig.ring.write($0) }
            rig.render(periods: 95)
            let first = scheduled ? Self.faded : 0
            let frameOffset = scheduled ? Self.offset : 0
            var largestStep: Float = 0
            for i in (first + 1)..<(frameOffset + 39_000) { largestStep = max(largestStep, abs(rig.left[i] - rig.left[i - 1])) }
            XCTAssertLessThanOrEqual(largestStep, 0.5 / 240 * 1.0001, scheduled ? "party mode" : "plain path")
            XCTAssertEqual(rig.left[frameOffset + 19_000], 0.5)
            XCTAssertEqual(rig.left[frameOffset + 20_000 - 120], 0.25, accuracy: 1e-6)
            XCTAssertTrue(rig.left[(frameOffset + 20_000)..<(frameOffset + 26_000)].allSatisfy { $0 == 0 }, "silent between the ramps")
            XCTAssertEqual(rig.left[frameOffset + 28_000], 0.5)
            XCTAssertEqual(rig.left[frameOffset + 32_400], 0.375, accuracy: 1e-6)
            XCTAssertEqual(rig.left[frameOffset + 36_000], 0.25)
        }
    }

    // MARK: Latency offset

    func testALatencyOffsetChangedWhilePlayingIsTakenUp() {
        let rig = Rig(scheduledFrom: Self.start)
        rig.write(0..<100_000)
        rig.render(periods: 50)
        // 20 ms earlier from now on: more than a slide can take, so it fades and realigns.
        rig.renderer.setLatencyOffset(nanoseconds: 20_000_000)
        rig.render(periods: 100)
        let shift = 20 * Self.rate / 1000
        let settled = rig.left.count - 40 * Self.period
        XCTAssertNil(firstMismatch(rig.left, settled..<rig.left.count, offset: Self.offset - shift, cutAt: .max))
        XCTAssertNil(firstMismatch(rig.left, Self.faded..<(50 * Self.period), offset: Self.offset, cutAt: .max), "before the change")
    }
}
