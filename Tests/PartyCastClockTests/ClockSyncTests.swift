@testable import PartyCastClock
import PartyCastCore
import PartyCastSources
import Synchronization
import XCTest

/// When the clock sync first lets the player place audio: not on one exchange across a link that
/// holds packets for milliseconds, whose estimate can be that far off.
final class ClockSyncTests: XCTestCase {
    /// The broadcaster's clock is the listener's plus θ; each exchange is held `up` and `down`.
    static let theta: Int64 = 3_000_000_000

    func exchange(at t1: Int64, up: Int64, down: Int64) -> ClockSample {
        ClockSample(t1: t1, t2: t1 + Self.theta + up, t3: t1 + Self.theta + up, t4: t1 + up + down)
    }

    func frameNow(_ sync: ClockSync, at local: Int64) -> Double? {
        sync.schedule.line(orElse: nil)?.frame(at: local)
    }

    /// A broadcast that starts `startsIn` after the listener joins it.
    static let startsIn: Int64 = 10_000_000_000

    /// A sync just connected, and when: the stream's frame 0 sits at θ + then + `startsIn` on the
    /// broadcaster's clock (joined before the song starts; a negative `startsIn` joins it late), 48
    /// frames a millisecond.
    func connectedSync(startsIn: Int64 = startsIn) -> (ClockSync, Int64) {
        let sync = ClockSync(clock: .system)
        sync.connected()
        let start = sync.clock.now()
        sync.setTiming(.init(originNanoseconds: Self.theta + start + startsIn, sampleRate: 48000))
        return (sync, start)
    }

    func testAStartWaitsForAnExchangeThatPinsTheClockTo3ms() throws {
        let (sync, start) = connectedSync()
        // The estimator files exchanges in 100 ms bins of the local clock: both of the first two
        // fall in one, whatever the moment the test starts at.
        let bin = start + DelayEnvelope.binWidth - start % DelayEnvelope.binWidth
        // Held 20 ms up and 6 ms down: θ read 7 ms high, within 13 ms for all one exchange can tell.
        sync.record(exchange(at: bin + 1_000_000, up: 20_000_000, down: 6_000_000))
        XCTAssertNil(frameNow(sync, at: bin), "placed on one exchange that took 26 ms there and back")

        // A quick exchange 30 ms later (before the estimator has a bound, which wants exchanges in two
        // of its bins) brings half the least round trip to 1.5 ms: published, within that.
        sync.record(exchange(at: bin + 30_000_000, up: 2_000_000, down: 1_000_000))
        XCTAssertNil(sync.errorBound)
        let frame = try XCTUnwrap(frameNow(sync, at: bin + 40_000_000))
        XCTAssertEqual(frame, Double(bin + 40_000_000 - start - Self.startsIn) * 48e-6, accuracy: 1.5 * 48 + 1)

        // Once published, a thin moment does not withhold the line.
        sync.record(exchange(at: bin + 250_000_000, up: 20_000_000, down: 1_000_000))
        XCTAssertNotNil(frameNow(sync, at: bin + 280_000_000))
    }

    func testAPoorLinkStartsAWhileAfterItsFirstAnswer() throws {
        let (sync, start) = connectedSync()
        // Every exchange held 8 and 9 ms: the bound never comes under 3 ms.
        var t1 = start
        for _ in 0..<6 {
            sync.record(exchange(at: t1, up: 8_000_000, down: 9_000_000))
            XCTAssertNil(frameNow(sync, at: t1))
            t1 += 50_000_000
        }
        // The first answer arrived at start + 17 ms; one arriving `startingWait` after it is published.
        sync.record(exchange(at: start + ClockSync.startingWait, up: 8_000_000, down: 9_000_000))
        XCTAssertGreaterThan(try XCTUnwrap(sync.errorBound), ClockSync.startingBound)
        XCTAssertNotNil(frameNow(sync, at: start + ClockSync.startingWait + 100_000_000))
    }

    func testAReconnectionKeepsTheLineItHadUntilTheNewEvidenceIsAsGood() throws {
        let (sync, start) = connectedSync()
        sync.record(exchange(at: start + 1_000_000, up: 100_000, down: 100_000))
        sync.record(exchange(at: start + 150_000_000, up: 100_000, down: 100_000))
        let before = try XCTUnwrap(sync.schedule.line(orElse: nil))

        sync.connected()
        let again = sync.clock.now()
        sync.record(exchange(at: again, up: 20_000_000, down: 1_000_000))
        XCTAssertEqual(sync.schedule.line(orElse: nil), before, "one exchange 9.5 ms off does not replace a line good to 100 µs")
        sync.record(exchange(at: again + 150_000_000, up: 500_000, down: 400_000))
        XCTAssertNotEqual(sync.schedule.line(orElse: nil), before)
    }

    /// When a listener that joined `startsIn` before the song (negative: after it started) on `link`
    /// is first placed, from its first exchange, its line's greatest error over the 5 s after (µs),
    /// and each change of its clock's settling its observer heard, with when (from the first exchange).
    func firstPlacement(on link: JitteryLink, startsIn: Int64) -> (placedAt: Int64, error: Double, settling: [(settled: Bool, at: Int64)])? {
        var link = link
        let sync = ClockSync(clock: .system)
        sync.connected()
        let settling = Mutex<[(settled: Bool, at: Int64)]>([])
        let delivering = Mutex<Int64>(0)
        sync.observeSettling { settled in settling.withLock { $0.append((settled, delivering.withLock { $0 })) } }
        // The link's clocks are the test's; the sync takes exchanges from its connection on.
        let shift = sync.clock.now() - joinTime
        let origin = link.remote(atLocal: joinTime) + startsIn
        sync.setTiming(.init(originNanoseconds: origin, sampleRate: 48000))
        var estimator = ClockEstimator(), placedAt: Int64?, error = 0.0
        link.run(&estimator, duration: ClockSync.settlingWait + 6 * second, deliver: { estimator, sample in
            estimator.add(sample)
            delivering.withLock { $0 = sample.t4 - joinTime }
            sync.record(ClockSample(t1: sample.t1 + shift, t2: sample.t2, t3: sample.t3, t4: sample.t4 + shift))
        }, probe: { local, _, link in
            guard let line = sync.schedule.line(orElse: nil) else { return }
            if placedAt == nil { placedAt = local - joinTime }
            guard let placedAt, local - joinTime <= placedAt + 5 * second else { return }
            let truth = Double(link.remote(atLocal: local) - origin) * 48e-6
            error = max(error, abs(line.frame(at: local + shift) - truth) / 48e-3)
        })
        XCTAssertEqual(settling.withLock { $0.last?.settled }, sync.isSettled, "the last change heard is the clock's state")
        return placedAt.map { ($0, error, settling.withLock { $0 }) }
    }

    /// A listener that joins a song already playing waits until its clock has settled: on a quiet
    /// link at once, as one that joins before the song; where order is kept and packets are held up
    /// to 20 ms, until the drift is pinned (few exchanges meet an empty queue, the bound stays wide),
    /// and then its line is closer than one placed on the first evidence.
    func testALateJoinerWaitsForItsClockToSettle() throws {
        for seed: UInt64 in 1...4 {
            let quiet = JitteryLink(offset: 2 * second, driftPPM: 80, upJitter: 20 * microsecond, downJitter: 20 * microsecond,
                                    random: SplitMix64(seed: seed))
            let late = try XCTUnwrap(firstPlacement(on: quiet, startsIn: -60 * second))
            let early = try XCTUnwrap(firstPlacement(on: quiet, startsIn: 10 * second))
            print("seed \(seed), quiet: placed at \(late.placedAt / millisecond) ms late, \(early.placedAt / millisecond) ms early")
            XCTAssertEqual(late.placedAt, early.placedAt, "seed \(seed): a late joiner on a quiet link waits")
            XCTAssertEqual(late.settling.first?.settled, true, "seed \(seed): a quiet link's clock settles on its first estimate")

            let orderKept = JitteryLink(offset: 2 * second, driftPPM: seed % 2 == 0 ? 80 : -60, upJitter: 20 * millisecond,
                                        downJitter: 20 * millisecond, random: SplitMix64(seed: seed), keepsOrder: true,
                                        background: (up: 100 * millisecond, down: 50 * millisecond))
            let settled = try XCTUnwrap(firstPlacement(on: orderKept, startsIn: -60 * second))
            let first = try XCTUnwrap(firstPlacement(on: orderKept, startsIn: 10 * second))
            print("seed \(seed), order kept: a late joiner placed at \(settled.placedAt / millisecond) ms, off by up to \(Int(settled.error)) µs "
                  + "over 5 s; one placed at \(first.placedAt / millisecond) ms, \(Int(first.error)) µs")
            XCTAssertLessThanOrEqual(first.placedAt, ClockSync.startingWait + 100 * millisecond)
            XCTAssertGreaterThan(settled.placedAt, first.placedAt + second, "seed \(seed)")
            XCTAssertLessThanOrEqual(settled.placedAt, ClockSync.settlingWait + 100 * millisecond, "seed \(seed)")
            XCTAssertLessThan(settled.error, first.error, "seed \(seed)")
            // The broadcaster hears of it as it changes, from the first estimate on: unsettled, and
            // settled with the exchange that let the late joiner in (unless the wait ran out first).
            XCTAssertEqual(settled.settling.first?.settled, false, "seed \(seed)")
            XCTAssertFalse(zip(settled.settling, settled.settling.dropFirst()).contains { $0.settled == $1.settled }, "seed \(seed): only changes")
            let settledAt = try XCTUnwrap(settled.settling.first { $0.settled }?.at, "seed \(seed)")
            if settledAt < ClockSync.settlingWait { XCTAssertEqual(settled.placedAt, settledAt, accuracy: 10 * millisecond, "seed \(seed)") }
        }
    }
}
