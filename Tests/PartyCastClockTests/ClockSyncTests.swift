@testable import PartyCastClock
import PartyCastCore
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

    /// A sync just connected, and when: the stream's frame 0 sits at θ + then on the broadcaster's
    /// clock, 48 frames a millisecond.
    func connectedSync() -> (ClockSync, Int64) {
        let sync = ClockSync(clock: .system)
        sync.connected()
        let start = sync.clock.now()
        sync.setTiming(.init(originNanoseconds: Self.theta + start, sampleRate: 48000))
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
        XCTAssertEqual(frame, Double(bin + 40_000_000 - start) * 48e-6, accuracy: 1.5 * 48 + 1)

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
}
