import Foundation
import PartyCastTestSupport
import XCTest

/// The lines aiosendspin_reference.py prints for `arguments`: aiosendspin's own models and checks, run
/// in the tests' venv. Skips the test where the venv has no aiosendspin.
func aiosendspinReference(_ arguments: [String]) throws -> [String] {
    let python = testDriver("python")
    guard (try? runProcess(python, ["-c", "import aiosendspin"], timeout: 60))?.status == 0 else {
        throw XCTSkip("no aiosendspin in \(python): run `make deps`")
    }
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("aiosendspin_reference.py").path
    let result = try runProcess(python, [script] + arguments, timeout: 60)
    XCTAssertEqual(result.status, 0, result.stderr)
    return result.stdout.split(separator: "\n").map(String.init)
}
