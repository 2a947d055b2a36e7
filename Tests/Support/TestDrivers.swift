import Foundation
import XCTest

/// A program of the tests' Python environment, which `make deps` makes (.venv, pinned PyPI packages:
/// Selenium, Schemathesis): PARTYCAST_VENV's, else the repository's .venv.
public func testDriver(_ program: String) -> String {
    let venv = ProcessInfo.processInfo.environment["PARTYCAST_VENV"]
        ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../.venv").standardized.path
    return "\(venv)/bin/\(program)"
}

/// Skips unless `make deps` installed Debian's chromium and chromium-driver and Selenium in the
/// tests' Python environment. Nothing is installed while a test runs.
public func ensureHeadlessBrowser() throws {
    let driver = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"].contains { FileManager.default.isExecutableFile(atPath: $0) }
    guard driver else { throw XCTSkip("no chromedriver: run `make deps` (Debian's chromium and chromium-driver)") }
    guard (try? runProcess(testDriver("python"), ["-c", "import selenium"], timeout: 60))?.status == 0 else {
        throw XCTSkip("no Selenium in \(testDriver("python")): run `make deps`")
    }
}
