import Foundation
import PartyCastTestSupport
import XCTest

/// A listener that cannot reach its broadcaster says why in one plain line, not in NIO's words.
final class JoinErrorTests: XCTestCase {
    func testAnAddressWhereNothingListensIsRefusedInPlainWords() throws {
        let port = freePort()
        let joined = try runProcess(productPath("listener"), ["join", "--host", "127.0.0.1:\(port)", "--output", "null", "--once"], timeout: 30)
        XCTAssertNotEqual(joined.status, 0)
        XCTAssertTrue(joined.stderr.contains("cannot connect to 127.0.0.1:\(port): connection refused\n"), joined.stderr)
        XCTAssertFalse(joined.stderr.contains("errno"), joined.stderr)
        // The same over IPv6, its address in brackets as in a URL.
        let overIPv6 = try runProcess(productPath("listener"), ["join", "--host", "[::1]:\(port)", "--output", "null", "--once"], timeout: 30)
        XCTAssertTrue(overIPv6.stderr.contains("cannot connect to [::1]:\(port): connection refused\n"), overIPv6.stderr)
    }

    /// A simulated clock steeper than the clock sync follows is refused up front (at 800 ppm the
    /// listener played 3.4 ms off), the steepest it follows taken.
    func testASimulatedDriftBeyondWhatTheClockSyncFollowsIsRefused() throws {
        let port = freePort()
        func join(_ clock: String) throws -> ProcessResult {
            try runProcess(productPath("listener"), ["join", "--host", "127.0.0.1:\(port)", "--output", "null", "--once",
                                                     "--simulate-clock=\(clock)"], timeout: 30)
        }
        for steep in ["0,800", "-3,-500.5", "1,10000"] {
            let refused = try join(steep)
            XCTAssertEqual(refused.status, 64, steep)
            XCTAssertTrue(refused.stderr.contains("|drift| ≤ 500 ppm, the most clock sync follows"), refused.stderr)
            XCTAssertFalse(refused.stderr.contains("cannot connect"), "refused before connecting: \(refused.stderr)")
        }
        for steepest in ["0,500", "-3,-500"] {
            let taken = try join(steepest)
            XCTAssertTrue(taken.stderr.contains("cannot connect to 127.0.0.1:\(port): connection refused\n"), "\(steepest): \(taken.stderr)")
        }
    }
}
