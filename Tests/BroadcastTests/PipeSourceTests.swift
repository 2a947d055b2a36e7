import Foundation
import PartyCastTestSupport
import XCTest

/// Standard input and FIFOs as sources: raw PCM or any recognised format, for `listener play` and
/// for a party, where a stalling writer costs a gap, not a party that ends or runs late.
final class PipeSourceTests: XCTestCase {
    let listener = productPath("listener")
    let broadcaster = productPath("broadcaster")

    func shell(_ command: String, timeout: TimeInterval = 60) throws -> ProcessResult {
        let result = try runProcess("/bin/sh", ["-c", command], timeout: timeout)
        XCTAssertFalse(result.timedOut, command)
        return result
    }

    /// Raw 16-bit PCM on standard input plays as sox reads the same bytes: sample for sample.
    func testRawPCMOnStandardInputIsExact() throws {
        let directory = try temporaryDirectory()
        XCTAssertEqual(try shell("sox -n -r 44100 -c 2 -b 16 -e signed -t raw \(directory)/in.raw synth 3 pinknoise vol 0.5").status, 0)
        let played = try shell("\(listener) play - --pcm-format 44100:16:2 --quiet --output wav:\(directory)/out.wav < \(directory)/in.raw")
        XCTAssertEqual(played.status, 0, played.stderr)
        XCTAssertEqual(try shell("sox -r 44100 -c 2 -b 16 -e signed -t raw \(directory)/in.raw \(directory)/ref.wav").status, 0)
        let ours = try readAudio("\(directory)/out.wav"), reference = try readAudio("\(directory)/ref.wav")
        XCTAssertEqual(ours.sampleRate, 44100)
        XCTAssertEqual(ours.frames, reference.frames)
        XCTAssertTrue(ours.samples == reference.samples, "raw PCM changed on its way through")
    }

    /// An MP3 written into a FIFO is recognised by its bytes and decodes as mpg123 decodes the file.
    func testAnMP3ThroughAFIFOMatchesMPG123() throws {
        let directory = try temporaryDirectory()
        let mp3 = try fixture("vbr.mp3")
        XCTAssertEqual(mkfifo("\(directory)/fifo", 0o600), 0)
        let writer = try startProcess("/bin/sh", ["-c", "cat \(mp3) > \(directory)/fifo"])
        let played = try runProcess(listener, ["play", "pipe:\(directory)/fifo", "--quiet", "--output", "wav:\(directory)/out.wav"], timeout: 60)
        XCTAssertEqual(played.status, 0, played.stderr)
        XCTAssertEqual(writer.wait(timeout: 10).status, 0)
        let ours = try readAudio("\(directory)/out.wav"), reference = try mpg123Reference(mp3, in: directory)
        XCTAssertEqual(ours.sampleRate, reference.sampleRate)
        XCTAssertLessThanOrEqual(abs(ours.frames - reference.frames), 1152)
        XCTAssertGreaterThanOrEqual(snr(ours.samples[...], reference.samples[...]), 80)
    }

    /// A pipe that closes at once, and a FIFO path that is not there: one clear line each.
    func testAPipeThatClosesAtOnceGetsOneClearLine() throws {
        let closed = try shell("\(listener) play - --output null < /dev/null", timeout: 15)
        XCTAssertEqual(closed.status, 5, closed.stderr)
        XCTAssertEqual(closed.stderr.split(separator: "\n").count, 1, closed.stderr)
        XCTAssertTrue(closed.stderr.contains("empty"), closed.stderr)
        let missing = try runProcess(listener, ["play", "pipe:/nonexistent/fifo", "--output", "null"], timeout: 15)
        XCTAssertEqual(missing.status, 2, missing.stderr)
        XCTAssertTrue(missing.stderr.contains("mkfifo"), missing.stderr)
    }

    /// A party fed by a real-time writer that stalls for 2 s: the listener hears 3 s of tone, a
    /// gap as long as the stall, then the last 3 s — nothing lost, nothing played late twice, and
    /// the party goes on through the stall rather than ending.
    func testAStallingPipeIsAGapInTheParty() throws {
        let directory = try temporaryDirectory()
        XCTAssertEqual(mkfifo("\(directory)/fifo", 0o600), 0)
        let port = freePort()
        let server = try startProcess(broadcaster, ["share", "pipe:\(directory)/fifo", "--no-mdns", "--port", "\(port)",
                                                    "--codec", "pcm", "--pcm-format", "48000:16:2", "--start-in", "0.5"])
        defer { server.signal(SIGKILL) }
        XCTAssertTrue(server.waitForStderr("broadcasting", timeout: 30), server.stderr)
        let joined = try startProcess(listener, ["join", "--host", "127.0.0.1:\(port)", "--once", "--quiet", "--output", "wav:\(directory)/heard.wav"])
        defer { joined.signal(SIGKILL) }
        // A writer on its own clock: 20 ms blocks of a 440 Hz tone in real time, 3 s, a 2 s stall, 3 s.
        // The blocks are made before the first is written, so a busy machine delays no block.
        let writer = """
            import math, struct, sys, time
            out = open(sys.argv[1], "wb", buffering=0)
            blocks = [b"".join(struct.pack("<hh", v, v) for v in (int(12000 * math.sin(2 * math.pi * 440 * (n + i) / 48000)) for i in range(960)))
                      for n in range(0, 150 * 960, 960)]
            start = time.monotonic()
            for index, frames in enumerate(blocks + blocks):
                out.write(frames)
                stall = 2 if index + 1 >= len(blocks) else 0
                time.sleep(max(0, start + (index + 1) * 0.02 + stall - time.monotonic()))
            """
        let fed = try runProcess("python3", ["-c", writer, "\(directory)/fifo"], timeout: 30)
        XCTAssertEqual(fed.status, 0, fed.stderr)
        let served = server.wait(timeout: 30)
        XCTAssertEqual(served.status, 0, served.stderr)
        XCTAssertTrue(served.stderr.contains("1 stall(s)"), served.stderr)
        XCTAssertEqual(joined.wait(timeout: 30).status, 0)

        let heard = try readAudio("\(directory)/heard.wav")
        // Runs of sound and of silence, in 10 ms windows.
        let window = heard.sampleRate / 100 * heard.channels
        let loud = stride(from: 0, to: heard.samples.count - window, by: window).map { start in
            heard.samples[start..<start + window].reduce(0) { max($0, abs($1)) } > 0.05
        }
        var runs: [(loud: Bool, seconds: Double)] = []
        for value in loud {
            if runs.last?.loud == value { runs[runs.count - 1].seconds += 0.01 } else { runs.append((value, 0.01)) }
        }
        let sounds = runs.filter(\.loud).map(\.seconds)
        XCTAssertEqual(sounds.count, 2, "tone, gap, tone: \(runs)")
        guard sounds.count == 2, let first = runs.firstIndex(where: \.loud) else { return }
        let gap = runs[first + 1].seconds
        XCTAssertEqual(sounds[0], 3, accuracy: 0.05, "\(runs)")
        XCTAssertEqual(sounds[1], 3, accuracy: 0.05, "\(runs)")
        // The gap is the stall: the 0.2 s buffered before it play on into it, and refilling those
        // 0.2 s after it delays the rest by as much, no more.
        XCTAssertEqual(gap, 2, accuracy: 0.15, "\(runs)")
    }
}
