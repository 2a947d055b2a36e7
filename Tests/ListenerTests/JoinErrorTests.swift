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
    }
}
