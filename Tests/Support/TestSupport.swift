import Foundation
import XCTest

/// Where `make fixtures` put the MP3s (the Makefile sets PARTYCAST_FIXTURES for `make test`).
public func fixture(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
    let directory = ProcessInfo.processInfo.environment["PARTYCAST_FIXTURES"]
        ?? URL(fileURLWithPath: "\(file)").deletingLastPathComponent().appendingPathComponent("../../Fixtures/generated").path
    let path = (directory as NSString).appendingPathComponent(name)
    guard FileManager.default.fileExists(atPath: path) else {
        XCTFail("fixture \(path) missing: run `make fixtures` (or `make test`)", file: file, line: line)
        throw CocoaError(.fileNoSuchFile)
    }
    return path
}

/// The built executable, next to the test bundle.
public func productPath(_ name: String) -> String {
    let bundle = Bundle.main.bundleURL
    for candidate in [bundle.appendingPathComponent(name), bundle.deletingLastPathComponent().appendingPathComponent(name)] {
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate.path }
    }
    return URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../.build/debug/\(name)").standardized.path
}

public struct ProcessResult {
    public var status: Int32
    public var stdout: String
    public var stderr: String
    public var timedOut: Bool
}

/// Runs a command to completion, killing it (by its own PID) if it outlives `timeout`.
@discardableResult
public func runProcess(_ executable: String, _ arguments: [String], timeout: TimeInterval = 60, environment: [String: String]? = nil) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : "/usr/bin/env")
    process.arguments = executable.hasPrefix("/") ? arguments : [executable] + arguments
    if let environment { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    // Output goes to files, not pipes: no reader threads, no deadlock on a full pipe.
    let base = NSTemporaryDirectory() + "partycast-run-" + UUID().uuidString
    FileManager.default.createFile(atPath: base + ".out", contents: nil)
    FileManager.default.createFile(atPath: base + ".err", contents: nil)
    defer { try? FileManager.default.removeItem(atPath: base + ".out"); try? FileManager.default.removeItem(atPath: base + ".err") }
    process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: base + ".out"))
    process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: base + ".err"))
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let deadline = Date().addingTimeInterval(timeout)
    var timedOut = false
    while process.isRunning {
        if Date() > deadline { kill(process.processIdentifier, SIGKILL); timedOut = true; break }
        usleep(10_000)
    }
    process.waitUntilExit()
    let outData = FileManager.default.contents(atPath: base + ".out") ?? Data()
    let errData = FileManager.default.contents(atPath: base + ".err") ?? Data()
    return ProcessResult(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                         stderr: String(decoding: errData, as: UTF8.self), timedOut: timedOut)
}

public func temporaryDirectory() throws -> String {
    let path = NSTemporaryDirectory() + "partycast-test-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// Audio read back through sox (a reader we did not write): interleaved Float32.
public struct DecodedAudio {
    public var sampleRate: Int
    public var channels: Int
    public var samples: [Float]
    public var frames: Int { samples.count / channels }
}

public func readAudio(_ path: String) throws -> DecodedAudio {
    func soxi(_ flag: String) throws -> Int {
        Int(try runProcess("soxi", [flag, path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }
    let rate = try soxi("-r"), channels = try soxi("-c")
    let raw = path + ".f32"
    let result = try runProcess("sox", [path, "-t", "f32", raw])
    XCTAssertEqual(result.status, 0, result.stderr)
    let data = try Data(contentsOf: URL(fileURLWithPath: raw))
    try? FileManager.default.removeItem(atPath: raw)
    let samples = data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    return DecodedAudio(sampleRate: rate, channels: channels, samples: samples)
}

/// Debian's mpg123 decode of an MP3 to Float32 WAV: the reference for our decoder.
public func mpg123Reference(_ mp3: String, in directory: String) throws -> DecodedAudio {
    let out = (directory as NSString).appendingPathComponent((mp3 as NSString).lastPathComponent + ".mpg123.wav")
    let result = try runProcess("mpg123", ["-q", "-e", "f32", "-w", out, mp3])
    XCTAssertEqual(result.status, 0, "mpg123 failed: \(result.stderr)")
    return try readAudio(out)
}

/// Signal-to-noise ratio in dB of `actual` against `reference`, sample by sample over their overlap.
public func snr(_ actual: ArraySlice<Float>, _ reference: ArraySlice<Float>) -> Double {
    let n = min(actual.count, reference.count)
    var signal = 0.0, noise = 0.0
    for i in 0..<n {
        let r = Double(reference[reference.startIndex + i])
        let d = Double(actual[actual.startIndex + i]) - r
        signal += r * r
        noise += d * d
    }
    if noise == 0 { return .infinity }
    return 10 * log10(signal / noise)
}
