import Foundation
import PartyCastTestSupport
import XCTest

/// A server process for one test: started, waited for (its "listening" line), stopped by PID.
final class ServerProcess {
    let process: BackgroundProcess
    let port: Int

    /// Starts `executable` and waits for `ready` in its stderr; `port` parses the port from it
    /// when the server picks its own.
    init(_ executable: String, _ arguments: [String], ready: String, port: Int? = nil, timeout: TimeInterval = 10) throws {
        process = try startProcess(executable, arguments)
        guard process.waitForStderr(ready, timeout: timeout) else {
            let output = process.wait(timeout: 5)
            throw XCTSkip("\(executable) did not start: \(output.stderr)")
        }
        if let port {
            self.port = port
        } else {
            let line = process.stderr.split(separator: "\n").first { $0.hasPrefix(ready) } ?? ""
            self.port = Int(line.dropFirst(ready.count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
    }

    /// SIGTERM, then SIGKILL (by PID) if it outlives a few seconds.
    func stop() {
        process.signal(SIGTERM)
        _ = process.wait(timeout: 5)
    }
}

/// Tests/HTTPSourceTests/servers/fake_radio.py, serving `mp3` (and files from `directory`).
func startFakeRadio(mp3: String, directory: String, extra: [String] = []) throws -> ServerProcess {
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("servers/fake_radio.py").path
    return try ServerProcess("python3", [script, "--mp3", mp3, "--dir", directory, "--lifetime", "120"] + extra, ready: "listening on ")
}

/// The listener as a user runs it.
func listener(_ arguments: [String], timeout: TimeInterval = 30) throws -> (result: ProcessResult, seconds: Double) {
    let started = Date()
    let result = try runProcess(productPath("listener"), ["play", "--quiet"] + arguments, timeout: timeout)
    return (result, Date().timeIntervalSince(started))
}

