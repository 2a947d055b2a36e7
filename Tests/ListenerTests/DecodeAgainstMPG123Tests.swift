import Foundation
import PartyCastTestSupport
import XCTest

/// `listener play F --output wav:OUT` against Debian's `mpg123 -w` decode of the same file.
final class DecodeAgainstMPG123Tests: XCTestCase {
    let listener = productPath("listener")

    func play(_ arguments: [String]) throws -> ProcessResult {
        let result = try runProcess(listener, ["play", "--quiet"] + arguments, timeout: 120)
        XCTAssertFalse(result.timedOut, "listener hung: \(arguments)")
        return result
    }

    func testEveryFixtureMatchesMPG123() throws {
        let directory = try temporaryDirectory()
        for name in ["cbr.mp3", "vbr.mp3", "mono22.mp3", "mpeg2.mp3", "mpeg25.mp3", "noxing.mp3", "id3v2.mp3", "truncated.mp3"] {
            let mp3 = try fixture(name)
            let out = "\(directory)/\(name).wav"
            let result = try play([mp3, "--output", "wav:\(out)"])
            XCTAssertEqual(result.status, 0, "\(name): \(result.stderr)")
            let ours = try readAudio(out)
            let reference = try mpg123Reference(mp3, in: directory)
            XCTAssertEqual(ours.sampleRate, reference.sampleRate, name)
            XCTAssertEqual(ours.channels, reference.channels, name)
            XCTAssertLessThanOrEqual(abs(ours.frames - reference.frames), 1152, "\(name): length \(ours.frames) vs \(reference.frames)")
            XCTAssertGreaterThan(reference.frames, 0)
            XCTAssertGreaterThanOrEqual(snr(ours.samples[...], reference.samples[...]), 80, name)
        }
    }

    /// `--start 12.5` lands on sample 12.5 × rate of mpg123's decode: a one-sample misalignment of
    /// this broadband audio would drop the SNR far below 80 dB, and the first 100 ms must be clean too.
    func testStartLandsOnTheExactSample() throws {
        let directory = try temporaryDirectory()
        for name in ["cbr.mp3", "vbr.mp3", "mpeg2.mp3"] {
            let mp3 = try fixture(name)
            let out = "\(directory)/\(name).start.wav"
            let result = try play([mp3, "--output", "wav:\(out)", "--start", "12.5"])
            XCTAssertEqual(result.status, 0, "\(name): \(result.stderr)")
            let ours = try readAudio(out)
            let reference = try mpg123Reference(mp3, in: directory)
            let offset = Int(12.5 * Double(reference.sampleRate)) * reference.channels
            XCTAssertEqual(ours.samples.count, reference.samples.count - offset, name)
            let tail = reference.samples[offset...]
            XCTAssertGreaterThanOrEqual(snr(ours.samples[...], tail), 80, name)
            let firstTenth = reference.sampleRate / 10 * reference.channels
            XCTAssertGreaterThanOrEqual(snr(ours.samples.prefix(firstTenth), tail.prefix(firstTenth)), 80, "\(name): glitch at the start")
        }
    }

    /// Junk in the middle is skipped and counted; what comes before and after it plays as in a clean decode.
    func testGarbageInTheMiddleIsSkippedAndTheRestPlays() throws {
        let directory = try temporaryDirectory()
        let out = "\(directory)/garbage.wav"
        let result = try play([try fixture("garbage.mp3"), "--output", "wav:\(out)"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("skipped"), result.stderr)
        let ours = try readAudio(out)
        let clean = try mpg123Reference(try fixture("cbr.mp3"), in: directory)
        // Up to the splice (a third of the file, ~6.6 s) it is the clean decode.
        let before = 6 * clean.sampleRate * clean.channels
        XCTAssertGreaterThanOrEqual(snr(ours.samples.prefix(before), clean.samples.prefix(before)), 80)
        // Whole frames are lost at the splice, so later audio sits m × 1152 samples earlier than in
        // the clean decode; a 4 s window well before the end must match for one small m.
        let window = 4 * clean.sampleRate * clean.channels
        let start = ours.samples.count - window - clean.sampleRate * clean.channels
        let best = (0...3).map { m -> Double in
            let shifted = start + m * 1152 * clean.channels
            guard shifted + window <= clean.samples.count else { return -.infinity }
            return snr(ours.samples[start..<(start + window)], clean.samples[shifted..<(shifted + window)])
        }.max() ?? -.infinity
        XCTAssertGreaterThanOrEqual(best, 80)
    }

    /// Bad input of every kind: one clear line on stderr, an exit status of 1…127, no hang.
    func testBadInputFailsWithOneClearLine() throws {
        let directory = try temporaryDirectory()
        let cases: [(String, String)] = [
            ("\(directory)/does-not-exist.mp3", "no such file"),
            (try fixture("directory.mp3"), "is a directory"),
            (try fixture("empty.mp3"), "empty"),
            (try fixture("random.mp3"), "match no format"),
            (try fixture("image.mp3"), "match no format"),
            (try fixture("id3huge.mp3"), "ID3v2 tag claims"),
        ]
        for (path, phrase) in cases {
            let result = try runProcess(listener, ["play", path, "--output", "null"], timeout: 30)
            XCTAssertFalse(result.timedOut, path)
            XCTAssertTrue((1...127).contains(result.status), "\(path): status \(result.status)")
            let lines = result.stderr.split(separator: "\n")
            XCTAssertEqual(lines.count, 1, "\(path): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains(phrase), "\(path): \(result.stderr)")
        }
    }

    /// `--rate` and `--channels` against sox converting mpg123's decode: exact lengths, and the
    /// same signal (the resamplers differ, so the bar for the rate change is lower).
    func testRateAndChannelConversionMatchSox() throws {
        let directory = try temporaryDirectory()
        let mp3 = try fixture("cbr.mp3")
        let reference = try mpg123Reference(mp3, in: directory)
        let referencePath = "\(directory)/cbr.mp3.mpg123.wav"
        for (flags, soxEffect, bar) in [(["--rate", "48000"], ["rate", "-v", "48000"], 60.0), (["--channels", "1"], ["channels", "1"], 80.0)] {
            let out = "\(directory)/converted.wav"
            let result = try play([mp3, "--output", "wav:\(out)"] + flags)
            XCTAssertEqual(result.status, 0, result.stderr)
            let sox = "\(directory)/sox.wav"
            XCTAssertEqual(try runProcess("sox", [referencePath, sox] + soxEffect).status, 0)
            let ours = try readAudio(out), theirs = try readAudio(sox)
            XCTAssertEqual(ours.sampleRate, theirs.sampleRate, "\(flags)")
            XCTAssertEqual(ours.channels, theirs.channels, "\(flags)")
            XCTAssertEqual(ours.frames, theirs.frames, "\(flags)")
            XCTAssertGreaterThanOrEqual(snr(ours.samples[...], theirs.samples[...]), bar, "\(flags)")
        }
        XCTAssertEqual(reference.frames, 882_000)
    }

    /// The tone generator against sox's own sine.
    func testToneMatchesSox() throws {
        let directory = try temporaryDirectory()
        let out = "\(directory)/tone.wav"
        let result = try play(["tone:1000:2", "--output", "wav:\(out)"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let ours = try readAudio(out)
        let reference = "\(directory)/sox.wav"
        XCTAssertEqual(try runProcess("sox", ["-n", "-r", "48000", "-c", "2", "-e", "floating-point", "-b", "32", reference, "synth", "2", "sine", "1000", "vol", "0.5"]).status, 0)
        let sox = try readAudio(reference)
        XCTAssertEqual(ours.frames, 96000)
        XCTAssertGreaterThanOrEqual(snr(ours.samples[...], sox.samples[...]), 80)
    }
}
