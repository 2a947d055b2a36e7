import Foundation
import XCTest

/// Debian's chromium and chromium-driver, Selenium from PyPI: installed when missing, if this
/// machine may (root, with the registries reachable); otherwise the test is skipped.
public func ensureHeadlessBrowser() throws {
    func present() -> Bool {
        let driver = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"].contains { FileManager.default.isExecutableFile(atPath: $0) }
        let selenium = (try? runProcess("python3", ["-c", "import selenium"], timeout: 60))?.status == 0
        return driver && selenium
    }
    if present() { return }
    if getuid() == 0 {
        _ = try? runProcess("apt-get", ["install", "-y", "--no-install-recommends", "chromium", "chromium-driver"], timeout: 600,
                            environment: ["DEBIAN_FRONTEND": "noninteractive"])
    }
    _ = try? runProcess("python3", ["-m", "pip", "install", "--quiet", "selenium"], timeout: 300)
    guard present() else { throw XCTSkip("headless Chromium with chromedriver and Selenium are not installed and could not be installed") }
}
