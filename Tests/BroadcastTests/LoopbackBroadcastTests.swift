import Foundation
import PartyCastTestSupport
import XCTest

/// Broadcaster and listeners as separate processes on 127.0.0.1 (no mDNS: --host).
final class LoopbackBroadcastTests: XCTestCase {
    let broadcaster = productPath("broadcaster")
    let listener = productPath("listener")

    func share(_ arguments: [String], port: Int) throws -> BackgroundProcess {
        try startProcess(broadcaster, ["share", "--no-mdns", "--port", "\(port)"] + arguments)
    }

    func join(port: Int, output: String, extra: [String] = ["--once"]) throws -> BackgroundProcess {
        try startProcess(listener, ["join", "--host", "127.0.0.1:\(port)", "--output", output, "--quiet"] + extra)
    }

    /// Waits (bounded) until the broadcaster accepts connections.
    func waitForPort(_ port: Int) {
        for _ in 0..<100 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            } == 0
            close(fd)
            if connected { return }
            usleep(50_000)
        }
        XCTFail("broadcaster never listened on \(port)")
    }

    /// Listeners that join before the start get the whole song from its first sample: Opus
    /// against mpg123's decode (resampled to 48 kHz by sox) ≥ 10 dB, PCM ≥ 50 dB.
    func testListenersGetTheWholeSongFromTheFirstSample() throws {
        let directory = try temporaryDirectory()
        let mp3 = try fixture("cbr.mp3")
        let reference = try mpg123Reference(mp3, in: directory)
        let referencePath = "\(directory)/cbr.mp3.mpg123.wav"
        XCTAssertEqual(try runProcess("sox", [referencePath, "\(directory)/ref48.wav", "rate", "-v", "48000"]).status, 0)
        let reference48 = try readAudio("\(directory)/ref48.wav")
        for (codec, bar, expected) in [("opus", 10.0, reference48), ("pcm", 50.0, reference)] {
            let port = freePort()
            let server = try share([mp3, "--codec", codec, "--start-in", "3"], port: port)
            waitForPort(port)
            let listeners = try (1...2).map { try join(port: port, output: "wav:\(directory)/\(codec)\($0).wav") }
            for (i, l) in listeners.enumerated() {
                let result = l.wait(timeout: 60)
                XCTAssertEqual(result.status, 0, "\(codec) listener \(i): \(result.stderr)")
            }
            let served = server.wait(timeout: 30)
            XCTAssertEqual(served.status, 0, served.stderr)
            XCTAssertTrue(served.stderr.contains("2 listener(s) joined"), served.stderr)
            for i in 1...2 {
                let ours = try readAudio("\(directory)/\(codec)\(i).wav")
                XCTAssertEqual(ours.sampleRate, expected.sampleRate, codec)
                XCTAssertEqual(ours.frames, expected.frames, "\(codec): the whole song, no more, no less")
                XCTAssertGreaterThanOrEqual(snr(ours.samples[...], expected.samples[...]), bar, codec)
            }
        }
    }

    /// Hostile peers while a listener plays: a 4 GiB length prefix, random bytes, a connection that
    /// says nothing, 200 connect/close cycles. They are closed and logged; the listener gets
    /// every sample, and the broadcaster serves to the end.
    func testHostilePeersHarmNoOne() throws {
        let directory = try temporaryDirectory()
        let port = freePort()
        let server = try share(["tone:1000:9", "--codec", "pcm", "--start-in", "1"], port: port)
        waitForPort(port)
        let good = try join(port: port, output: "wav:\(directory)/good.wav")
        func connection(_ send: [UInt8]) -> Int32 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if !send.isEmpty { _ = send.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
            return fd
        }
        let huge = connection([0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3])
        var rng = SystemRandomNumberGenerator()
        let random = connection((0..<4096).map { _ in UInt8.random(in: 0...255, using: &rng) })
        let silent = connection([])
        for _ in 0..<200 { close(connection([])) }
        sleep(7)  // past the 5 s handshake timeout
        var probe = pollfd(fd: silent, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&probe, 1, 1000), 1, "the silent connection was closed")
        var byte: UInt8 = 0
        XCTAssertEqual(read(silent, &byte, 1), 0, "closed by the broadcaster (EOF)")
        [huge, random, silent].forEach { close($0) }

        let played = good.wait(timeout: 60)
        let served = server.wait(timeout: 30)
        XCTAssertEqual(played.status, 0, played.stderr + "\nbroadcaster:\n" + served.stderr)
        XCTAssertEqual(served.status, 0, served.stderr)
        XCTAssertTrue(served.stderr.contains("sent bad data"), served.stderr)
        XCTAssertTrue(served.stderr.contains("sent no Hello within 5 s"), served.stderr)
        let audio = try readAudio("\(directory)/good.wav")
        XCTAssertEqual(audio.frames, 9 * 48000)
        let sox = "\(directory)/sox.wav"
        _ = try runProcess("sox", ["-n", "-r", "48000", "-c", "2", "-e", "floating-point", "-b", "32", sox, "synth", "9", "sine", "1000", "vol", "0.5"])
        XCTAssertGreaterThanOrEqual(snr(audio.samples[...], try readAudio(sox).samples[...]), 50)
    }

    /// A listener that joins 3 s into a broadcast starts at the live position: what it plays is
    /// the rest of the broadcast, within half a second.
    func testLateJoinerStartsAtTheLiveEdge() throws {
        let directory = try temporaryDirectory()
        let port = freePort()
        let started = Date()
        let server = try share(["tone:500:8", "--start-in", "0"], port: port)
        waitForPort(port)
        sleep(3)
        let joinedAt = Date().timeIntervalSince(started)
        let late = try join(port: port, output: "wav:\(directory)/late.wav")
        XCTAssertEqual(late.wait(timeout: 30).status, 0)
        _ = server.wait(timeout: 30)
        let heard = Double(try readAudio("\(directory)/late.wav").frames) / 48000
        // The broadcast's clock started after process start-up, so the remaining time is at least this much.
        let remaining = 8 - joinedAt
        // A late joiner is also sent what is still ahead of its time: up to the broadcaster's 1 s --buffer.
        XCTAssertGreaterThan(heard, remaining - 0.5, "heard \(heard) s of the \(remaining) s left")
        XCTAssertLessThan(heard, remaining + 1.5, "heard \(heard) s of the \(remaining) s left: started behind the live edge")
    }

    /// A listener without --once survives its broadcaster going away and a new one starting on the
    /// same port: it reconnects and plays the new broadcast.
    func testListenerSurvivesABroadcasterRestart() throws {
        let directory = try temporaryDirectory()
        let port = freePort()
        let first = try share(["tone:300:3", "--codec", "pcm", "--start-in", "1"], port: port)
        waitForPort(port)
        let listening = try join(port: port, output: "wav:\(directory)/both.wav", extra: [])
        XCTAssertEqual(first.wait(timeout: 30).status, 0)
        XCTAssertTrue(listening.isRunning, "the listener quit when its broadcaster ended")
        let second = try share(["tone:600:3", "--codec", "pcm", "--start-in", "1"], port: port)
        XCTAssertEqual(second.wait(timeout: 30).status, 0)
        sleep(1)
        XCTAssertTrue(listening.isRunning)
        listening.signal(SIGTERM)
        let result = listening.wait(timeout: 10)
        XCTAssertEqual(result.status, 0, result.stderr)
        let audio = try readAudio("\(directory)/both.wav")
        XCTAssertEqual(audio.frames, 6 * 48000, "both broadcasts, whole")
        // Zero crossings of the left channel in each half: 300 Hz then 600 Hz.
        func hertz(_ range: Range<Int>) -> Double {
            let left = stride(from: range.lowerBound, to: range.upperBound, by: 1).map { audio.samples[$0 * 2] }
            let crossings = zip(left, left.dropFirst()).filter { ($0 < 0) != ($1 < 0) }.count
            return Double(crossings) / 2 / (Double(range.count) / 48000)
        }
        XCTAssertEqual(hertz(48000..<96000), 300, accuracy: 5)
        XCTAssertEqual(hertz(192_000..<240_000), 600, accuracy: 5)
    }
}
