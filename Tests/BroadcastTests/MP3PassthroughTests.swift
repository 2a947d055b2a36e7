import Foundation
import PartyCastTestSupport
import XCTest

/// `--codec mp3`: the files' own frames on the wire, decoded by each listener with libmpg123.
extension LoopbackBroadcastTests {
    /// Every listener's output is, to the bit, Debian's mpg123 decode of each MP3 one after the
    /// other: gapless, not a sample lost or added where the songs meet (LAME's delay and padding are
    /// trimmed on the listener as mpg123 trims them). A FLAC and an MP3 of another rate cannot
    /// travel as they are: each is skipped with its line, and the rest plays.
    func testPassedThroughMP3sAreMpg123sDecodeGapless() throws {
        let directory = try temporaryDirectory()
        let first = try encodeMP3("first", in: directory, rate: 44100, channels: 2, synth: ["synth", "4", "pinknoise", "gain", "-n", "-3"], lame: ["-V", "2"])
        let second = try encodeMP3("second", in: directory, rate: 44100, channels: 2, synth: ["synth", "3", "sine", "440", "gain", "-n", "-6"], lame: ["-b", "128"])
        let otherRate = try encodeMP3("other-rate", in: directory, rate: 22050, channels: 1, synth: ["synth", "1", "sine", "300"], lame: ["-b", "64"])
        let flac = try fixture("tone.flac")
        let expected = try mpg123Reference(first, in: directory).samples + mpg123Reference(second, in: directory).samples

        let served = try shareToTwoRecordingListeners([first, flac, otherRate, second, "--codec", "mp3", "--start-in", "3"], recordings: "\(directory)/heard")
        XCTAssertTrue(served.stderr.contains("skipping tone.flac: it is FLAC, and --codec mp3 sends MP3 files only"), served.stderr)
        XCTAssertTrue(served.stderr.contains("skipping other-rate.mp3: it is 22050 Hz, mono, the broadcast 44100 Hz, stereo"), served.stderr)
        for i in 1...2 {
            let heard = try readAudio("\(directory)/heard\(i).wav")
            XCTAssertEqual(heard.sampleRate, 44100)
            XCTAssertEqual(heard.frames, expected.count / 2, "listener \(i): both songs whole, no more, no less")
            let firstDifference = heard.samples.indices.first { $0 >= expected.count || heard.samples[$0] != expected[$0] }
            XCTAssertNil(firstDifference, "listener \(i) differs from mpg123 from frame \(firstDifference.map { $0 / 2 } ?? 0) on (SNR \(snr(heard.samples[...], expected[...])) dB)")
        }
    }

    /// A pause, its resume and a seek: each starts a fresh decoder a few frames before the one it
    /// names, so after the command's 5 ms fade the output is mpg123's decode again, to the bit, from
    /// exactly the frame named (the pause's cut, the seek's 8.5 s).
    func testPassedThroughMP3StaysExactAcrossAPauseAndASeek() throws {
        let directory = try temporaryDirectory()
        let song = try encodeMP3("song", in: directory, rate: 44100, channels: 2, synth: ["synth", "12", "pinknoise", "gain", "-n", "-3"], lame: ["-V", "2"])
        let reference = try mpg123Reference(song, in: directory)
        let (port, controlPort) = (freePort(), freePort())
        let server = try share([song, "--codec", "mp3", "--control-port", "\(controlPort)", "--start-in", "2"], port: port)
        defer { server.signal(SIGKILL) }
        XCTAssertTrue(waitForPort(port), "nothing listened on \(port)")
        let player = try join(port: port, output: "wav:\(directory)/heard.wav")
        defer { player.signal(SIGKILL) }
        XCTAssertTrue(server.waitForStderr("joined", timeout: 20), server.stderr)
        func ctl(_ arguments: String...) {
            let result = try? runProcess(broadcaster, ["ctl", "--url", "http://127.0.0.1:\(controlPort)"] + arguments, timeout: 20)
            XCTAssertEqual(result?.status, 0, "ctl \(arguments): \(result?.stderr ?? "did not run")")
        }
        // Times of a user's hands on the remote, not waits for events.
        letTimePass(4)
        ctl("pause")
        letTimePass(0.5)
        ctl("resume")
        letTimePass(1)
        ctl("seek", "8.5")
        XCTAssertEqual(player.wait(timeout: 40).status, 0, player.stderr)
        let served = server.wait(timeout: 10)
        XCTAssertEqual(served.status, 0, served.stderr)
        guard let cut = served.stderr.firstMatch(of: /paused.* \(timeline frame (\d+)\)/).flatMap({ Int($0.1) }) else {
            return XCTFail("no pause in the log: \(served.stderr)")
        }

        let heard = try readAudio("\(directory)/heard.wav")
        let runs = ExactRuns(of: heard.samples, in: reference.samples)
        // The song from its start, again from the pause's cut, and from the seek's target.
        XCTAssertEqual(runs.runs.count, 3, "\(runs.runs)")
        // The wav output writes chunks as they come, so a pause's withdraw comes too late for it: the
        // runs overlap, and only where each starts is judged. The song starts at timeline frame 0, so
        // the cut is the song frame the pause stopped on. A run starts on the frame named, or 5 ms
        // (220 frames) later where the output's fade in reaches it.
        let fade = 220
        let starts = runs.runs.map(\.referenceStart)
        guard starts.count == 3 else { return }
        XCTAssertEqual(starts[0], 0)
        XCTAssertTrue([cut, cut + fade].contains { abs(starts[1] - $0) <= 1 }, "the resume starts where the pause cut, frame \(cut) (\(runs.runs))")
        let target = Int(8.5 * 44100)
        XCTAssertTrue([target, target + fade].contains { abs(starts[2] - $0) <= 1 }, "the seek lands on 8.5 s, frame \(target) (\(runs.runs))")
        // All the rest is the pause's silence or the fades around the commands.
        var covered = [Bool](repeating: false, count: heard.frames)
        for run in runs.runs { for frame in run.start..<(run.start + run.length) { covered[frame] = true } }
        let inexact = (0..<heard.frames).filter { !covered[$0] && (heard.samples[2 * $0] != 0 || heard.samples[2 * $0 + 1] != 0) }
        print("passthrough across a pause and a seek: \(runs.runs); \(inexact.count) frames neither exact nor silent")
        XCTAssertLessThan(inexact.count, 3 * 2 * fade, "\(runs.runs)")
        XCTAssertEqual(runs.runs.last.map { $0.referenceStart + $0.length }, reference.frames, "the last run plays the song to its end")
    }

    /// Synthesises with sox and encodes with Debian's lame.
    func encodeMP3(_ name: String, in directory: String, rate: Int, channels: Int, synth: [String], lame: [String]) throws -> String {
        let wav = "\(directory)/\(name).wav", mp3 = "\(directory)/\(name).mp3"
        XCTAssertEqual(try runProcess("sox", ["-R", "-n", "-r", "\(rate)", "-c", "\(channels)", wav] + synth).status, 0)
        XCTAssertEqual(try runProcess("lame", ["--quiet"] + lame + [wav, mp3]).status, 0)
        return mp3
    }
}

/// The stretches of a stereo recording that are, bit for bit, stretches of a reference (broadband
/// noise: one frame's two samples pin down where in the reference it is).
struct ExactRuns {
    struct Run: CustomStringConvertible {
        var start: Int
        var referenceStart: Int
        var length: Int
        var description: String { "\(length) frames from \(start), reference \(referenceStart)" }
    }

    private(set) var runs: [Run] = []

    /// Runs of at least `minimum` frames, in the recording's order.
    init(of recording: [Float], in reference: [Float], minimum: Int = 1024) {
        func key(_ samples: [Float], _ frame: Int) -> UInt64 {
            UInt64(samples[2 * frame].bitPattern) << 32 | UInt64(samples[2 * frame + 1].bitPattern)
        }
        var whereIs: [UInt64: [Int]] = [:]
        for frame in 0..<reference.count / 2 { whereIs[key(reference, frame), default: []].append(frame) }
        let frames = recording.count / 2
        var frame = 0
        while frame < frames {
            // The longest exact stretch starting here.
            var best: Run?
            for candidate in whereIs[key(recording, frame)] ?? [] {
                var length = 0
                while frame + length < frames, candidate + length < reference.count / 2,
                      recording[2 * (frame + length)] == reference[2 * (candidate + length)],
                      recording[2 * (frame + length) + 1] == reference[2 * (candidate + length) + 1] {
                    length += 1
                }
                if length > best?.length ?? 0 { best = Run(start: frame, referenceStart: candidate, length: length) }
            }
            if let best, best.length >= minimum {
                runs.append(best)
                frame += best.length
            } else {
                frame += 1
            }
        }
    }
}
