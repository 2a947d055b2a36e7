import Foundation
import PartyCastTestSupport
import XCTest

/// The reference Sendspin player, `sendspin daemon` (PyPI, pinned in scripts/test-requirements.txt),
/// playing to an ALSA device: alsa-lib's `file` plugin writing into a FIFO that `PacedCard` drains
/// in real time, as a sound card would. It dials a server (`--url`) or waits for one to dial it.
struct ReferencePlayer {
    let process: BackgroundProcess
    let card: PacedCard

    /// - Parameters:
    ///   - connection: `--url URL`, or `--port N` to wait for servers (and advertise over mDNS).
    ///   - namespace: the network namespace it runs in (`ip netns exec`), if not this one.
    init(in directory: String, connection: [String], namespace: String? = nil) throws {
        let sendspin = testDriver("sendspin")
        guard FileManager.default.isExecutableFile(atPath: sendspin) else { throw XCTSkip("no sendspin in the tests' venv: run `make deps`") }
        card = try PacedCard(fifo: directory + "/card.fifo")
        let config = directory + "/asound.conf"
        try #"pcm.partycast_card { type file; slave.pcm "null"; file "\#(directory)/card.fifo"; format "raw" }"#
            .write(toFile: config, atomically: true, encoding: .utf8)
        let arguments = ["daemon"] + connection + ["--name", "reference-player", "--audio-device", "partycast_card", "--audio-format", "pcm:48000:16:2",
                                                   "--hardware-volume", "false", "--disable-mpris", "--settings-dir", directory + "/sendspin"]
        // HOME too: sendspin keeps its settings and identity there, and alsa-lib reads ~/.asoundrc.
        // TMPDIR: the PulseAudio client that alsa-lib's plugins load makes its folder there.
        let environment = ["ALSA_CONFIG_PATH": "/usr/share/alsa/alsa.conf:" + config, "HOME": directory, "TMPDIR": directory]
        process = try namespace.map { try startProcess("/usr/sbin/ip", ["netns", "exec", $0, sendspin] + arguments, environment: environment) }
            ?? startProcess(sendspin, arguments, environment: environment)
    }

    /// Stops the player and its card, and checks what the card played against `song`: the song,
    /// at the party's volume.
    func assertPlayed(_ song: String, in directory: String, file: StaticString = #filePath, line: UInt = #line) throws {
        process.signal(SIGTERM)
        _ = process.wait(timeout: 30)
        let recording = card.stop()
        let reference = directory + "/reference.wav"
        try runProcess("sox", [song, "-r", "48000", "-e", "floating-point", "-b", "32", reference])
        let source = try readAudio(reference)
        let left = channel(0, of: source.samples, channels: source.channels)
        let windows = AlignedWindows(reference: left, recording: recording, windowFrames: 24_000)
        let heard = windows.filter { $0.correlation >= 0.95 }
        // The player joins before the song starts; its clock sync may still cut a little at the start.
        XCTAssertGreaterThanOrEqual(heard.count, windows.count * 3 / 4, "windows heard: \(windows.map { String(format: "%.2f", $0.correlation) })",
                                    file: file, line: line)
        guard !heard.isEmpty else { return }
        let median = (correlation: heard.map(\.correlation).sorted()[heard.count / 2], snr: heard.map(\.snr).sorted()[heard.count / 2],
                      gain: heard.map(\.gain).sorted()[heard.count / 2])
        print("Sendspin reference player: \(heard.count) of \(windows.count) windows heard, median correlation \(median.correlation), SNR \(median.snr) dB, gain \(median.gain)")
        XCTAssertGreaterThanOrEqual(median.correlation, 0.99, file: file, line: line)
        XCTAssertGreaterThanOrEqual(median.snr, 15, "the player plays the song itself, at the party's volume", file: file, line: line)
        XCTAssertEqual(median.gain, 1, accuracy: 0.1, "the party set the player's volume to 100", file: file, line: line)
    }
}

extension XCTestCase {
    /// A network namespace with only its own loopback, removed when the test ends: where a test
    /// runs what advertises itself over mDNS, which never goes out in the root namespace.
    func isolatedLoopback() throws -> String {
        let name = "pc-sendspin-\(getpid())"
        _ = try? runProcess("/usr/sbin/ip", ["netns", "del", name])  // a crashed run's leftover of this PID
        let added = try runProcess("/usr/sbin/ip", ["netns", "add", name])
        guard added.status == 0 else { throw XCTSkip("no network namespaces here: \(added.stderr)") }
        addTeardownBlock { _ = try? runProcess("/usr/sbin/ip", ["netns", "del", name]) }
        XCTAssertEqual(try runProcess("/usr/sbin/ip", ["netns", "exec", name, "ip", "link", "set", "lo", "up"]).status, 0)
        return name
    }
}

/// A sound card on a FIFO: from the first frame on, every 10 ms it takes 10 ms of 48 kHz stereo
/// int16 frames, or plays silence for what is not there yet (an underrun), never faster: the
/// player's clock sync needs a device that drains in real time. alsa-lib's `null` device, under
/// the `file` plugin, would take everything at once.
final class PacedCard: @unchecked Sendable {
    // @unchecked: `recorded` and `stopping` are touched under `lock` only; the rest is immutable.
    static let bytesPerTick = 48000 * 4 / 100
    private let fd: Int32
    private let lock = NSLock()
    private var recorded = Data()
    private var stopping = false
    private let finished = DispatchSemaphore(value: 0)

    init(fifo path: String) throws {
        guard mkfifo(path, 0o600) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        // Opened for writing too, so the player's opening and closing the device while it probes
        // it is no end of file; non-blocking, so an empty pipe is an underrun, not a wait.
        fd = open(path, O_RDWR | O_NONBLOCK)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        Thread.detachNewThread { [self] in run() }
    }

    private func run() {
        var tick = [UInt8](repeating: 0, count: Self.bytesPerTick)
        var start: Int64?
        var ticks: Int64 = 0
        while !lock.withLock({ stopping }) {
            let got = max(0, read(fd, &tick, tick.count))
            if start == nil && got == 0 {
                letTimePass(0.001)  // the card is not playing yet
                continue
            }
            if start == nil { start = monotonicNow() }
            for index in got..<tick.count { tick[index] = 0 }
            lock.withLock { recorded.append(contentsOf: tick) }
            ticks += 1
            let due = start! + ticks * 10_000_000
            let now = monotonicNow()
            if due > now { letTimePass(Double(due - now) / 1e9) }
        }
        close(fd)
        finished.signal()
    }

    /// Stops the card and returns its left channel.
    func stop() -> [Float] {
        lock.withLock { stopping = true }
        finished.wait()
        return lock.withLock {
            recorded.withUnsafeBytes { raw in stride(from: 0, to: raw.count / 2, by: 2).map { Float(raw.load(fromByteOffset: $0 * 2, as: Int16.self)) / 32768 } }
        }
    }
}
