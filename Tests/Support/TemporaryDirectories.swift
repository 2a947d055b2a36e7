import Foundation
import Synchronization
import XCTest

/// A fresh directory for a test's files. It is removed when the test passes and kept, its path
/// printed, when the test fails, to look into.
public func temporaryDirectory() throws -> String {
    let path = NSTemporaryDirectory() + "partycast-test-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    TemporaryDirectories.shared.created(path)
    return path
}

/// A fresh directory for files several tests of a class share (built once, in a static): removed
/// when every test has run and all passed, kept when any failed.
public func sharedTemporaryDirectory() throws -> String {
    let path = NSTemporaryDirectory() + "partycast-test-shared-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    TemporaryDirectories.shared.createdShared(path)
    return path
}

/// Hears from XCTest how each test ended and removes or keeps the directories made during it.
final class TemporaryDirectories: NSObject, XCTestObservation, Sendable {
    static let shared: TemporaryDirectories = {
        let observer = TemporaryDirectories()
        XCTestObservationCenter.shared.addTestObserver(observer)
        return observer
    }()

    private let pending = Mutex<[String]>([])
    /// The shared directories, and how many tests of this run failed.
    private let wholeRun = Mutex<(paths: [String], failures: Int)>(([], 0))

    func created(_ path: String) {
        pending.withLock { $0.append(path) }
    }

    func createdShared(_ path: String) {
        wholeRun.withLock { $0.paths.append(path) }
    }

    func testCaseDidFinish(_ testCase: XCTestCase) {
        let paths = pending.withLock { paths in
            defer { paths = [] }
            return paths
        }
        let passed = testCase.testRun?.hasSucceeded ?? false
        if !passed { wholeRun.withLock { $0.failures += 1 } }
        Self.removeOrKeep(paths, passed: passed, name: testCase.name)
    }

    func testBundleDidFinish(_ testBundle: Bundle) {
        let (paths, failures) = wholeRun.withLock { ($0.paths, $0.failures) }
        Self.removeOrKeep(paths, passed: failures == 0, name: "a test of this run")
    }

    private static func removeOrKeep(_ paths: [String], passed: Bool, name: String) {
        for path in paths where FileManager.default.fileExists(atPath: path) {
            guard passed else {
                print("\(name) failed; its files are in \(path)")
                continue
            }
            do {
                try FileManager.default.removeItem(atPath: path)
            } catch {
                print("could not remove \(path): \(error)")
            }
        }
    }
}
