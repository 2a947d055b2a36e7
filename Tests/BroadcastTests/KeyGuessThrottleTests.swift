@testable import PartyCastControlSeam
import XCTest

/// Online guesses at the party key: a few free per address, then one a second, counted when the
/// broadcaster answers (so parallel connections gain nothing), forgiven when the key is proved.
final class KeyGuessThrottleTests: XCTestCase {
    let second: UInt64 = 1_000_000_000

    func testAfterAFewGuessesAnAddressGetsOneASecond() {
        let throttle = KeyGuessThrottle()
        let start: UInt64 = 10 * second
        // Three at once (parallel connections, none confirmed yet), then the fourth must wait.
        for _ in 0..<KeyGuessThrottle.freeGuesses { XCTAssertTrue(throttle.answer("10.0.0.9", now: start).allowed) }
        XCTAssertEqual(throttle.failures("10.0.0.9"), 3)
        XCTAssertFalse(throttle.answer("10.0.0.9", now: start + second / 2).allowed)
        XCTAssertEqual(throttle.answer("10.0.0.9", now: start + second / 2 + 1).refused, 2)
        // A second after the last answer, one more; then again a second later, never sooner.
        XCTAssertTrue(throttle.answer("10.0.0.9", now: start + second).allowed)
        XCTAssertFalse(throttle.answer("10.0.0.9", now: start + 2 * second - 1).allowed)
        XCTAssertTrue(throttle.answer("10.0.0.9", now: start + 2 * second).allowed)
        // 100 guesses as fast as the throttle allows take at least 99 seconds.
        var now = start + 2 * second, answered = 0
        while answered < 100 {
            now += second / 10
            if throttle.answer("10.0.0.9", now: now).allowed { answered += 1 }
        }
        XCTAssertGreaterThanOrEqual(now - (start + 2 * second), 99 * second)
        // Another address is not held up, and proving the key forgives an address.
        XCTAssertTrue(throttle.answer("10.0.0.10", now: now).allowed)
        throttle.confirmed("10.0.0.9")
        XCTAssertTrue(throttle.answer("10.0.0.9", now: now).allowed)
        XCTAssertEqual(throttle.failures("10.0.0.9"), 1)
    }

    func testItRemembersABoundedNumberOfAddressesAndLogsAFewLines() {
        let throttle = KeyGuessThrottle()
        for i in 0..<(KeyGuessThrottle.maxAddresses + 10) { _ = throttle.answer("addr\(i)", now: UInt64(i + 1)) }
        XCTAssertEqual(throttle.failures("addr0"), 0, "the oldest is forgotten")
        XCTAssertEqual(throttle.failures("addr\(KeyGuessThrottle.maxAddresses + 9)"), 1)
        XCTAssertEqual((1...100_000).filter(KeyGuessThrottle.worthLogging).count, 17, "1, 2, 4 … 65536")
    }
}
