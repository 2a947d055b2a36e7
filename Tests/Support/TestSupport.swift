import Foundation
import Synchronization
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

/// The folder of release builds that the tests timing the audio drive (`make test` sets
/// PARTYCAST_RELEASE_BIN): a debug build's event loop adds tens to hundreds of µs to timestamps.
/// Without it those tests skip, saying so.
public func releaseBuilds() throws -> String {
    guard let bin = ProcessInfo.processInfo.environment["PARTYCAST_RELEASE_BIN"] else {
        throw XCTSkip("needs release builds: run `make test` (or set PARTYCAST_RELEASE_BIN)")
    }
    return bin
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

/// A command running in the background; its output goes to files (no pipes to fill up).
public final class BackgroundProcess {
    public let process = Process()
    /// One directory for every process's output in this run (removed when the run has passed), so
    /// that a process no test waited for leaves nothing behind either.
    private static let outputDirectory = Result { try sharedTemporaryDirectory() }
    private let base: String
    /// Left when the process has exited (Foundation reaps it and calls the termination handler).
    private let running = DispatchGroup()

    init(_ executable: String, _ arguments: [String], environment: [String: String]?) throws {
        base = try Self.outputDirectory.get() + "/" + UUID().uuidString
        process.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : "/usr/bin/env")
        process.arguments = executable.hasPrefix("/") ? arguments : [executable] + arguments
        if let environment { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        for path in [base + ".out", base + ".err"] where !FileManager.default.createFile(atPath: path, contents: nil) {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
        }
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: base + ".out"))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: base + ".err"))
        process.standardInput = FileHandle.nullDevice
        running.enter()
        process.terminationHandler = { [running] _ in running.leave() }
        do { try process.run() } catch { running.leave(); throw error }
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }
    public var stderr: String { String(decoding: FileManager.default.contents(atPath: stderrPath) ?? Data(), as: UTF8.self) }
    /// What it has written to stdout so far.
    public var stdout: String { String(decoding: FileManager.default.contents(atPath: base + ".out") ?? Data(), as: UTF8.self) }
    /// The file its stderr goes to (removed once it has been waited for).
    public var stderrPath: String { base + ".err" }

    /// Waits until its stderr contains `text`; false if it exits or `timeout` passes first.
    public func waitForStderr(_ text: String, timeout: TimeInterval) -> Bool {
        waitUntil(timeout: timeout, every: 0.02) { !process.isRunning || stderr.contains(text) }
        return stderr.contains(text)
    }

    /// Sends a signal to this process only (by its PID).
    public func signal(_ number: Int32) { if process.isRunning { kill(pid, number) } }

    /// Waits for it to exit, killing it and its children (SIGKILL, by PID) if it outlives `timeout`:
    /// a wrapper such as /usr/bin/time would otherwise leave the command it runs behind.
    public func wait(timeout: TimeInterval) -> ProcessResult {
        // Exited but not yet announced (Foundation reaps it first, then calls the handler): not a time-out.
        let timedOut = running.wait(timeout: .now() + timeout) == .timedOut && process.isRunning
        if timedOut {
            for child in childProcesses(of: pid) { kill(child, SIGKILL) }
            kill(pid, SIGKILL)
        }
        process.waitUntilExit()
        defer { try? FileManager.default.removeItem(atPath: base + ".out"); try? FileManager.default.removeItem(atPath: base + ".err") }
        return ProcessResult(status: process.terminationStatus,
                             stdout: String(decoding: FileManager.default.contents(atPath: base + ".out") ?? Data(), as: UTF8.self),
                             stderr: stderr, timedOut: timedOut)
    }
}

/// The PIDs of `pid`'s direct children (Linux: /proc/PID/task/*/children).
public func childProcesses(of pid: Int32) -> [Int32] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    return tasks.flatMap { task in
        (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8))?.split(separator: " ").compactMap { Int32($0) } ?? []
    }
}

public func startProcess(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> BackgroundProcess {
    try BackgroundProcess(executable, arguments, environment: environment)
}

/// Runs a command to completion, killing it (by its own PID) if it outlives `timeout`.
@discardableResult
public func runProcess(_ executable: String, _ arguments: [String], timeout: TimeInterval = 60, environment: [String: String]? = nil) throws -> ProcessResult {
    try startProcess(executable, arguments, environment: environment).wait(timeout: timeout)
}

/// Every port `freePort` has drawn in this process.
private let handedOutPorts = Mutex<Set<Int>>([])

/// A port on 127.0.0.1 free for TCP and UDP right now (a broadcaster takes both), drawn at random
/// below the kernel's ephemeral range: the connections other tests open at the same time take their
/// local ports from that range, so none of them can take this one before the program under test binds it.
public func freePort() -> Int {
    let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
    let firstEphemeral = range.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32768
    for _ in 0..<1000 {
        let port = Int.random(in: 10_000..<max(10_001, firstEphemeral))
        // Never the same port twice: one handed out may not be bound yet (a command line being built
        // names it) and would pass the check below again. Two draws coincide once in ~22,000.
        guard handedOutPorts.withLock({ $0.insert(port).inserted }) else { continue }
        guard let (tcp, _) = boundLoopbackSocket(port: port) else { continue }
        close(tcp)
        guard let (udp, _) = boundLoopbackSocket(port: port, type: SOCK_DGRAM) else { continue }
        close(udp)
        return port
    }
    return 0
}

/// A socket (TCP unless `type` says otherwise) bound to 127.0.0.1:`port` (0: a free one) and the port
/// it got; nil if it cannot bind.
public func boundLoopbackSocket(port: Int = 0, type: __socket_type = SOCK_STREAM) -> (fd: Int32, port: Int)? {
    let fd = socket(AF_INET, Int32(type.rawValue), 0)
    var address = loopbackAddress(port: port)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { close(fd); return nil }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// A TCP connection to 127.0.0.1:`port`, with a receive buffer of `receiveBufferBytes` (the
/// kernel's least at least) if given; nil when nobody accepts it.
public func connectToLoopback(port: Int, receiveBufferBytes: Int32? = nil) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    // Before connecting: the window scale is agreed in the handshake.
    if var bytes = receiveBufferBytes { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, socklen_t(MemoryLayout<Int32>.size)) }
    var address = loopbackAddress(port: port)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
    guard connected else { close(fd); return nil }
    return fd
}

private func loopbackAddress(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
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

/// sox's 1000 Hz sine at half scale, 48 kHz stereo Float32, `seconds` long: what `tone:1000` sounds like.
public func referenceTone(seconds: Int, in directory: String) throws -> [Float] {
    let path = (directory as NSString).appendingPathComponent("reference-tone-\(seconds)s.wav")
    let result = try runProcess("sox", ["-n", "-r", "48000", "-c", "2", "-e", "floating-point", "-b", "32", path,
                                        "synth", "\(seconds)", "sine", "1000", "vol", "0.5"])
    XCTAssertEqual(result.status, 0, "sox failed: \(result.stderr)")
    return try readAudio(path).samples
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

/// Writes interleaved Float32 samples as a Float32 WAV through sox, so that `readAudio` of it gives
/// them back exactly as it gives back any other WAV (sox rounds through 32-bit integers).
public func writeAudio(_ samples: [Float], sampleRate: Int, channels: Int, to path: String) throws {
    let raw = path + ".f32"
    try samples.withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: raw)) }
    defer { try? FileManager.default.removeItem(atPath: raw) }
    let result = try runProcess("sox", ["-t", "f32", "-r", "\(sampleRate)", "-c", "\(channels)", raw, "-e", "floating-point", "-b", "32", path])
    XCTAssertEqual(result.status, 0, result.stderr)
}

/// CLOCK_MONOTONIC in nanoseconds: the clock PartyCast's presentation times and clock exchanges use.
public func monotonicNow() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

/// `body` applied to each item, at most `limit` at a time, each on a thread of its own (the bodies
/// may block for seconds on processes and sockets); the results in the items' order.
public func concurrentMap<T: Sendable, R: Sendable>(_ items: [T], limit: Int, _ body: @escaping @Sendable (T) -> R) -> [R] {
    let results = ConcurrentResults<R>(count: items.count)
    let slots = DispatchSemaphore(value: limit)
    let group = DispatchGroup()
    for (index, item) in items.enumerated() {
        slots.wait()
        group.enter()
        Thread.detachNewThread {
            let value = body(item)
            results.lock.withLock { results.values[index] = value }
            slots.signal()
            group.leave()
        }
    }
    group.wait()
    return results.values.map { $0! }
}

private final class ConcurrentResults<R>: @unchecked Sendable {
    // @unchecked: `values` is only touched under `lock`.
    let lock = NSLock()
    var values: [R?]
    init(count: Int) { values = Array(repeating: nil, count: count) }
}
