import Foundation
import PartyCastTestSupport
import XCTest

/// scripts/lan/lan.sh for a test class with a LAN of its own (its own PC_LAN_PREFIX and state directory).
struct LANHarness {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../scripts/lan/lan.sh").standardized.path
    let environment: [String: String]

    init(prefix: String, state: String) {
        environment = [
            "PC_LAN_STATE": (NSTemporaryDirectory() as NSString).appendingPathComponent(state),
            "PC_LAN_PREFIX": prefix,
            "PC_LAN_LIFETIME": "300",  // the harness's watchdog takes the LAN down even if the test process dies
        ]
    }

    /// Brings up `hosts` hosts once the tools exist; skips where network namespaces can't be made.
    func up(hosts: Int, tools: [String], timeout: TimeInterval, file: StaticString = #filePath, line: UInt = #line) throws {
        for tool in tools where !FileManager.default.isExecutableFile(atPath: tool) {
            XCTFail("\(tool) is not built: swift build first", file: file, line: line)
            throw CocoaError(.fileNoSuchFile)
        }
        let up = try run(["up", "\(hosts)"], timeout: timeout)
        guard up.status == 0 else {
            if up.stderr.contains("cannot create network namespaces") { throw XCTSkip("no network namespaces here: \(up.stderr)") }
            XCTFail("lan.sh up \(hosts) failed (status \(up.status)\(up.timedOut ? ", timed out" : "")): \(up.stderr)", file: file, line: line)
            throw CocoaError(.executableLoad)
        }
    }

    func down(file: StaticString = #filePath, line: UInt = #line) throws {
        let down = try run(["down"], timeout: 60)
        XCTAssertEqual(down.status, 0, "lan.sh down: \(down.stderr)", file: file, line: line)
    }

    func run(_ arguments: [String], timeout: TimeInterval) throws -> ProcessResult {
        try runProcess(Self.script, arguments, timeout: timeout, environment: environment)
    }
}
