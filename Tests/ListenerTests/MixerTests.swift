import Foundation
import PartyCastTestSupport
import XCTest

/// `listener join --mixer` against a real mixer without a sound card: a private PulseAudio daemon
/// per test (a null sink), which libasound2-plugins' pulse plugin makes an ALSA device (`alsa:pulse`)
/// with a ctl of the same name whose "Master" is the sink's volume. pactl reads the sink's volume;
/// parec records the listener's own stream (`--monitor-stream`), as it reaches the sink.
final class MixerTests: XCTestCase {
    let listener = productPath("listener")
    let broadcaster = productPath("broadcaster")

    /// The volume goes to the sink (pactl reads the cube of 50 %, linearly over Master's raw range:
    /// it has no dB scale); the samples stay at full scale.
    func testHardwareSetsTheSinksVolumeAndLeavesTheSamplesAtFullScale() throws {
        let (sinkVolume, ratio) = try changeVolume(mixer: "hardware:Master")
        XCTAssertEqual(Double(sinkVolume), 0.125 * 65536, accuracy: 1, "the sink's volume, as pactl reads it")
        XCTAssertEqual(ratio, 1, accuracy: 0.01, "the stream's level after the change against before")
    }

    /// The samples scale by the cube of 50 %; the sink stays at 100 %.
    func testSoftwareScalesTheSamplesAndLeavesTheSink() throws {
        let (sinkVolume, ratio) = try changeVolume(mixer: "software")
        XCTAssertEqual(sinkVolume, 65536)
        XCTAssertEqual(ratio, 0.125, accuracy: 0.01)
    }

    /// Neither: full scale for an amplifier's own knob.
    func testNoneIgnoresTheVolume() throws {
        let (sinkVolume, ratio) = try changeVolume(mixer: "none")
        XCTAssertEqual(sinkVolume, 65536)
        XCTAssertEqual(ratio, 1, accuracy: 0.01)
    }

    func testAControlThatIsNotThereIsRefusedWithThoseThatAre() throws {
        let pulse = try PulseDaemon()
        defer { pulse.stop() }
        let joined = try runProcess(listener, ["join", "--host", "127.0.0.1:9", "--output", "alsa:pulse", "--mixer", "hardware:Treble"],
                                    timeout: 30, environment: pulse.environment)
        XCTAssertNotEqual(joined.status, 0)
        let lines = joined.stderr.split(separator: "\n").filter { $0.contains("Treble") }
        XCTAssertEqual(lines.count, 1, joined.stderr)
        XCTAssertTrue(lines.first?.hasSuffix("has no playback volume control 'Treble'; its controls: Master") == true, joined.stderr)
    }

    func testAMixerOtherThanSoftwareNeedsAnALSAOutput() throws {
        for mixer in ["hardware", "none"] {
            let joined = try runProcess(listener, ["join", "--host", "127.0.0.1:9", "--output", "null", "--mixer", mixer], timeout: 30)
            XCTAssertNotEqual(joined.status, 0)
            XCTAssertTrue(joined.stderr.contains("--mixer \(mixer) needs an alsa output"), joined.stderr)
        }
        let wrong = try runProcess(listener, ["join", "--output", "null", "--mixer", "loud"], timeout: 30)
        XCTAssertTrue(wrong.stderr.contains("--mixer takes software|hardware[:CONTROL]|none, not 'loud'"), wrong.stderr)
    }

    /// A tone shared to one listener on `alsa:pulse`; its volume set to 50 % through `ctl` while
    /// parec records its stream (StreamRecorder). Returns the sink's volume then (pactl's raw value, 65536 is 100 %)
    /// and the stream's level in its last half second against the half second before the command.
    private func changeVolume(mixer: String) throws -> (sinkVolume: Int, ratio: Double) {
        let pulse = try PulseDaemon()
        defer { pulse.stop() }
        let directory = try temporaryDirectory()
        let (port, controlPort) = (freePort(), freePort())
        let server = try startProcess(broadcaster, ["share", "tone:440", "--codec", "pcm", "--no-mdns", "--port", "\(port)",
                                                    "--control-port", "\(controlPort)", "--start-in", "1"])
        defer { server.signal(SIGKILL); _ = server.wait(timeout: 10) }
        XCTAssertTrue(server.waitForStderr("remote control", timeout: 30), server.stderr)
        let speaker = try startProcess(listener, ["join", "--host", "127.0.0.1:\(port)", "--output", "alsa:pulse", "--mixer", mixer,
                                                  "--listener-name", "box", "--quiet"], environment: pulse.environment)
        defer { speaker.signal(SIGKILL); _ = speaker.wait(timeout: 10) }
        let recorder = try StreamRecorder(pulse: pulse, directory: directory)
        defer { recorder.stop() }
        guard eventually(timeout: 30, { ((try? recorder.follow()) ?? 0) > 0 ? true : nil }) != nil else {
            throw PulseFailure("no stream reached the sink: \(speaker.stderr)")
        }
        let second = 48000 * 2 * 4
        /// The level of the last half second recorded, once it is steady: the same (within 1 %) as that
        /// of the half second before it, and not silence (not the start, no underrun in it). Only what
        /// came after `mark` counts: a stream recorded since is all after it.
        func steadyLevel(after mark: StreamRecorder.Mark) -> Double? {
            guard let end = try? recorder.follow() else { return nil }
            let start = recorder.mark.stream == mark.stream ? mark.bytes : 0
            guard end >= start + second, let last = try? level(recorder.path, from: end - second / 2, bytes: second / 2),
                  let previous = try? level(recorder.path, from: end - second, bytes: second / 2), last > 0.01 else { return nil }
            return abs(last / previous - 1) < 0.01 ? last : nil
        }
        guard let before = eventually(timeout: 30, { steadyLevel(after: StreamRecorder.Mark(stream: recorder.mark.stream, bytes: second)) }) else {
            throw PulseFailure("no steady sound in the stream: \(speaker.stderr)\(recorder.subscriptionEnded)")
        }
        let ctl = try runProcess(broadcaster, ["ctl", "--url", "http://127.0.0.1:\(controlPort)", "volume", "box", "50"], timeout: 30)
        XCTAssertEqual(ctl.status, 0, ctl.stderr)
        // The change is heard within the broadcast's lead (1 s) and the device's latency: 2 s on, it is.
        let changedAt = recorder.mark
        guard let after = eventually(timeout: 30, { steadyLevel(after: StreamRecorder.Mark(stream: changedAt.stream, bytes: changedAt.bytes + second)) }) else {
            throw PulseFailure("no steady sound after the change: \(speaker.stderr)\(recorder.subscriptionEnded)")
        }
        let sink = try pulse.run("pactl", ["get-sink-volume", "party"])
        guard let volume = sink.firstMatch(of: #/front-left: (\d+) /#).flatMap({ Int($0.output.1) }) else { throw PulseFailure("pactl said: \(sink)") }
        print("--mixer \(mixer): sink volume \(volume) (\(sink.split(separator: "\n").first ?? "")), stream level \(before) → \(after),"
              + " streams recorded \(recorder.mark.stream)")
        return (volume, after / before)
    }

    /// The peak of `bytes` of float samples from byte `offset` of `path`: the tone's amplitude, which
    /// a stray underrun's gap in the window does not change.
    private func level(_ path: String, from offset: Int, bytes: Int) throws -> Double {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let start = max(0, offset) / 4 * 4
        let samples = data[start..<min(data.count, start + bytes)].withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        return samples.reduce(0) { max($0, Double(abs($1))) }
    }
}

/// parec on the listener's stream into a file of its own, followed anew when the stream is: ALSA's
/// pulse plugin makes a new stream each time the device is prepared again (after an underrun), and
/// the old stream's parec then records nothing more. New streams are learnt from `pactl subscribe`,
/// so following costs a file read, not a pactl process a poll.
private final class StreamRecorder {
    /// Which stream (the recorder's count, from 1) and how many bytes of it.
    struct Mark { var stream: Int; var bytes: Int }

    private let pulse: PulseDaemon
    private let directory: String
    private let events: BackgroundProcess
    private var sinkInput: String?
    private var parec: BackgroundProcess?
    private var streams = 0

    init(pulse: PulseDaemon, directory: String) throws {
        self.pulse = pulse
        self.directory = directory
        // Line-buffered, or its events would wait in stdio's buffer for a file's worth of them.
        events = try startProcess("/usr/bin/stdbuf", ["-oL", "/usr/bin/pactl", "subscribe"], environment: pulse.environment)
    }

    var path: String { "\(directory)/stream\(streams).raw" }
    /// Why a new stream would go unseen: the subscription ended (empty while it runs).
    var subscriptionEnded: String { events.isRunning ? "" : "; pactl subscribe ended: \(events.stderr)" }
    var mark: Mark { Mark(stream: streams, bytes: recorded) }
    private var recorded: Int { ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0 }

    /// The bytes recorded of the newest stream, whose recording starts here when it is new. Until
    /// the first stream, pactl lists the sink inputs (the subscription may have begun after it).
    func follow() throws -> Int {
        let newest: Substring?
        if sinkInput == nil {
            newest = try pulse.run("pactl", ["list", "short", "sink-inputs"]).split(separator: "\n").last?.split(separator: "\t").first
        } else {
            newest = events.stdout.matches(of: #/Event 'new' on sink-input #(\d+)/#).last?.output.1
        }
        if let newest, String(newest) != sinkInput {
            stopRecording()
            sinkInput = String(newest)
            streams += 1
            parec = try startProcess("/usr/bin/parec", ["--monitor-stream=\(newest)", "--format=float32le", "--rate=48000", "--channels=2",
                                                       "--raw", "--latency-msec=20", "--file-format=raw", path], environment: pulse.environment)
        }
        return recorded
    }

    func stop() {
        stopRecording()
        events.signal(SIGKILL)
        _ = events.wait(timeout: 10)
    }

    private func stopRecording() {
        parec?.signal(SIGKILL)
        _ = parec?.wait(timeout: 10)
        parec = nil
    }
}

/// A PulseAudio daemon of the test's own (its runtime folder and cookie in a scratch folder), with a
/// null sink named "party"; stopped by its PID.
private final class PulseDaemon {
    let environment: [String: String]
    private let daemon: BackgroundProcess

    init() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/pulseaudio"), FileManager.default.isExecutableFile(atPath: "/usr/bin/pactl") else {
            throw XCTSkip("no pulseaudio and pulseaudio-utils: run `make deps`")
        }
        let home = try temporaryDirectory()
        environment = ["HOME": home, "TMPDIR": home, "XDG_RUNTIME_DIR": home, "PULSE_RUNTIME_PATH": "\(home)/pulse", "PULSE_SERVER": "unix:\(home)/pulse/native"]
        // Under a shell that waits for it: pulseaudio closes every descriptor it inherits, the one
        // Foundation's Process watches to learn that a child ended among them, and Foundation would
        // then wait for it alone and hear of no other child's end.
        daemon = try startProcess("/bin/sh", ["-c", "/usr/bin/pulseaudio \"$@\"; exit $?", "pulseaudio",
                                              "-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no", "--log-target=stderr",
                                              "-L", "module-null-sink sink_name=party rate=48000", "-L", "module-native-protocol-unix"],
                                  environment: environment)
        guard waitUntil(timeout: 30, every: 0.05, { (try? run("pactl", ["info"])) != nil }) else {
            stop()
            throw PulseFailure("the PulseAudio daemon did not start: \(daemon.stderr)")
        }
    }

    /// A PulseAudio tool's output; throws when it fails.
    func run(_ tool: String, _ arguments: [String]) throws -> String {
        let result = try runProcess("/usr/bin/\(tool)", arguments, timeout: 10, environment: environment)
        guard result.status == 0 else { throw PulseFailure("\(tool) \(arguments.joined(separator: " ")): \(result.stderr)") }
        return result.stdout
    }

    /// Ends the daemon (the shell's child, by its PID); the shell then exits.
    func stop() {
        for pid in childProcesses(of: daemon.pid) { kill(pid, SIGTERM) }
        _ = daemon.wait(timeout: 10)
    }
}

private struct PulseFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
