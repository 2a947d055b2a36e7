import Foundation
import PartyCastCore
import PartyCastDecoder
import PartyCastSources
import PartyCastTestSupport
import XCTest

/// Every decoder against Debian's reference decoder for its format, through the registry (so by
/// content), seekable and streaming, and on hostile input.
final class DecoderTests: XCTestCase {
    func decodeFile(_ path: String) throws -> (source: PCMSource, samples: [Float]) {
        try decode(try FileByteSource(path: path))
    }

    /// `tool arguments… OUT.wav` read back through sox.
    func reference(_ tool: String, _ arguments: [String], output: String) throws -> DecodedAudio {
        let result = try runProcess(tool, arguments, timeout: 120)
        XCTAssertEqual(result.status, 0, "\(tool) failed: \(result.stderr)")
        return try readAudio(output)
    }

    /// The reference decode of a fixture by its format's Debian decoder (sox itself for WAV).
    func referenceDecode(_ name: String) throws -> DecodedAudio {
        let path = try fixture(name)
        let out = try temporaryDirectory() + "/\(name).ref.wav"
        switch (name as NSString).pathExtension {
        case "flac": return try reference("flac", ["--silent", "-d", "-f", "-o", out, path], output: out)
        case "ogg": return try reference("oggdec", ["--quiet", "-o", out, path], output: out)
        // opusdec otherwise resamples to the encoder's input rate.
        case "opus": return try reference("opusdec", ["--quiet", "--rate", "48000", "--float", path, out], output: out)
        case "aac": return try reference("faad", ["-q", "-b", "4", "-o", out, path], output: out)
        default: return try readAudio(path)
        }
    }

    /// Runs `body` on a thread of its own and fails if it has not finished within `seconds`: a hang
    /// fails the test instead of stalling the run.
    func withinTimeout(_ seconds: TimeInterval, _ what: String, _ body: @escaping @Sendable () -> Void) {
        let done = expectation(description: what)
        Thread.detachNewThread {
            body()
            done.fulfill()
        }
        wait(for: [done], timeout: seconds)
    }

    // MARK: Against the reference decoders

    /// Same length, same rate and channels, ≥ 80 dB; bit-exact where the reference is the same
    /// library writing at least our precision (libFLAC, libfaad2 in float, sox for WAV).
    func assertMatchesReference(_ name: String, bitExact: Bool, file: StaticString = #filePath, line: UInt = #line) throws {
        let (source, decoded) = try decodeFile(try fixture(name))
        let reference = try referenceDecode(name)
        // sox clips what it reads to ±1 (an AAC decode overshoots on a few peaks); so must we to compare.
        let samples = decoded.map { min(max($0, -1), 1) }
        XCTAssertEqual(source.format, AudioFormat(sampleRate: reference.sampleRate, channels: reference.channels), name, file: file, line: line)
        XCTAssertEqual(samples.count, reference.samples.count, "\(name): length", file: file, line: line)
        let measured = snr(samples[...], reference.samples[...])
        print("\(name): \(samples.count / reference.channels) frames, SNR \(measured) dB against the reference")
        XCTAssertGreaterThanOrEqual(measured, 80, name, file: file, line: line)
        if bitExact { XCTAssertEqual(measured, .infinity, "\(name): not bit-exact", file: file, line: line) }
        if case .exact(let frames) = source.duration {
            XCTAssertEqual(frames, reference.frames, "\(name): duration", file: file, line: line)
        }
    }

    func testFLACIsBitExactAgainstFlac() throws {
        for name in ["tone.flac", "mono24.flac"] { try assertMatchesReference(name, bitExact: true) }
        XCTAssertEqual(try decodeFile(try fixture("tone.flac")).source.duration, .exact(frames: 20 * 44100))
    }

    /// A FLAC file behind an ID3v2 tag (some taggers write one) still decodes: libFLAC skips the tag.
    func testFLACBehindAnID3TagDecodes() throws {
        let tag: [UInt8] = Array("ID3".utf8) + [4, 0, 0, 0, 0, 0, 20] + [UInt8](repeating: 0, count: 20)
        let flac = [UInt8](try Data(contentsOf: URL(fileURLWithPath: try fixture("tone.flac"))))
        let tagged = try decode(MemoryByteSource(bytes: tag + flac, seed: 1))
        XCTAssertTrue(tagged.source is FLACSource)
        XCTAssertEqual(tagged.samples, try decodeFile(try fixture("tone.flac")).samples)
    }

    /// oggdec writes 16 bits: 80 dB, and within one step of 16-bit rounding of our floats.
    func testVorbisMatchesOggdec() throws {
        try assertMatchesReference("tone.ogg", bitExact: false)
        let ours = try decodeFile(try fixture("tone.ogg")).samples
        let reference = try referenceDecode("tone.ogg").samples
        let worst = zip(ours, reference).map { abs(($0 * 32768).rounded() - $1 * 32768) }.max() ?? .infinity
        XCTAssertLessThanOrEqual(worst, 1, "more than one 16-bit step from oggdec")
    }

    func testOpusMatchesOpusdec() throws {
        try assertMatchesReference("tone.opus", bitExact: false)
    }

    /// libfaad2 both sides, priming frame dropped alike; faad's float WAV goes through sox's 32-bit
    /// integers on the way back (≈ 147 dB), so it is not compared bit for bit.
    func testAACMatchesFaad() throws {
        for name in ["tone.aac", "nopns.aac", "mono22.aac", "id3.aac"] { try assertMatchesReference(name, bitExact: false) }
    }

    func testEveryWAVVariantMatchesSox() throws {
        for name in ["pcm8.wav", "pcm16.wav", "pcm24.wav", "float32.wav", "tagged.wav", "rf64.wav"] {
            try assertMatchesReference(name, bitExact: true)
        }
        // sox reads through 32-bit integers and rounds them to float its own way: 80 dB only.
        try assertMatchesReference("pcm32.wav", bitExact: false)
        try assertMatchesReference("float64.wav", bitExact: false)
        // A streaming writer's 0xFFFFFFFF: the data runs to the end of the file.
        let streamed = try decodeFile(try fixture("streamed.wav"))
        XCTAssertEqual(streamed.samples, try decodeFile(try fixture("pcm16.wav")).samples)
        XCTAssertEqual(streamed.source.duration, .estimated(frames: 20 * 44100))
    }

    // MARK: Sniffing

    /// The name says nothing: each file renamed to .mp3 or .bin decodes as what it is.
    func testFormatComesFromTheContentNotTheName() throws {
        let directory = try temporaryDirectory()
        let expected: [(String, PCMSource.Type)] = [
            ("tone.flac", FLACSource.self), ("tone.ogg", VorbisSource.self), ("tone.opus", OpusSource.self),
            ("tone.aac", AACSource.self), ("pcm16.wav", WAVSource.self), ("cbr.mp3", MP3Source.self),
        ]
        for (index, (name, type)) in expected.enumerated() {
            let renamed = "\(directory)/\(name).\(index % 2 == 0 ? "mp3" : "bin")"
            try FileManager.default.copyItem(atPath: try fixture(name), toPath: renamed)
            let (source, samples) = try decodeFile(renamed)
            XCTAssertTrue(Swift.type(of: source) == type, "\(name) opened as \(Swift.type(of: source))")
            XCTAssertEqual(samples, try decodeFile(try fixture(name)).samples, name)
        }
    }

    func testSniffersTakeNothingElse() throws {
        let decoders: [any SniffedDecoder.Type] = [FLACSource.self, VorbisSource.self, OpusSource.self, WAVSource.self, AACSource.self]
        for name in ["cbr.mp3", "vbr.mp3", "mpeg25.mp3", "random.mp3", "image.mp3", "page.html.mp3"] {
            let head = [UInt8](try Data(contentsOf: URL(fileURLWithPath: try fixture(name))).prefix(DecoderRegistry.headLength))
            for decoder in decoders { XCTAssertFalse(decoder.recognises(head[...]), "\(decoder.formatName) took \(name)") }
        }
        let opusHead = [UInt8](try Data(contentsOf: URL(fileURLWithPath: try fixture("tone.opus"))).prefix(4096))
        XCTAssertFalse(VorbisSource.recognises(opusHead[...]))
        XCTAssertTrue(OpusSource.recognises(opusHead[...]))
    }

    /// An HTML page (a wrong URL) is named as such, on one line, with a non-zero exit.
    func testAnHTMLPageIsNotAudio() throws {
        XCTAssertThrowsError(try decodeFile(try fixture("page.html.mp3"))) { error in
            XCTAssertEqual((error as? PartyCastError)?.code, .notAudio)
            XCTAssertTrue("\(error)".contains("HTML page"), "\(error)")
        }
        let out = try temporaryDirectory() + "/page.wav"
        let result = try runProcess(productPath("listener"), ["play", try fixture("page.html.mp3"), "--output", "wav:\(out)", "--quiet"], timeout: 60)
        XCTAssertFalse(result.timedOut)
        XCTAssertEqual(result.status, PartyCastError.Code.notAudio.exitStatus, result.stderr)
        let lines = result.stderr.split(separator: "\n")
        XCTAssertEqual(lines.count, 1, result.stderr)
        XCTAssertTrue(lines.first?.contains("HTML page") == true, result.stderr)
    }

    // MARK: Seeking

    /// `listener play --start 12.5` lands on sample 12.5 × rate of the reference decode: the SNR
    /// there is ≥ 80 dB and a sample early or late falls far below it (this audio is broadband).
    func testStartLandsOnTheExactSample() throws {
        let directory = try temporaryDirectory()
        for name in ["tone.flac", "tone.ogg", "tone.opus", "pcm24.wav", "nopns.aac"] {
            let out = "\(directory)/\(name).start.wav"
            let result = try runProcess(productPath("listener"), ["play", try fixture(name), "--output", "wav:\(out)", "--quiet", "--start", "12.5"], timeout: 120)
            XCTAssertEqual(result.status, 0, "\(name): \(result.stderr)")
            let ours = try readAudio(out)
            let reference = try referenceDecode(name)
            let offset = Int(12.5 * Double(reference.sampleRate)) * reference.channels
            XCTAssertEqual(ours.samples.count, reference.samples.count - offset, "\(name): length after the seek")
            let aligned = snr(ours.samples[...], reference.samples[offset...])
            let early = snr(ours.samples[...], reference.samples[(offset - reference.channels)...])
            let late = snr(ours.samples[...], reference.samples[(offset + reference.channels)...])
            print("\(name): --start 12.5 SNR \(aligned) dB at the sample, \(early) dB one early, \(late) dB one late")
            XCTAssertGreaterThanOrEqual(aligned, 80, name)
            XCTAssertLessThan(max(early, late), aligned - 20, "\(name): not sample-exact")
            let firstTenth = reference.sampleRate / 10 * reference.channels
            XCTAssertGreaterThanOrEqual(snr(ours.samples.prefix(firstTenth), reference.samples[offset...].prefix(firstTenth)), 80, "\(name): glitch after the seek")
        }
    }

    /// Seeks back and forth on one source: each lands where a straight decode has that sample.
    func testRepeatedSeeksAgreeWithTheStraightDecode() throws {
        for name in ["tone.flac", "tone.ogg", "pcm16.wav", "nopns.aac"] {
            let whole = try decodeFile(try fixture(name))
            let channels = whole.source.format!.channels
            let source = try DecoderRegistry.open(try FileByteSource(path: try fixture(name)))
            try source.prepare()
            for target in [600_000, 1234, 441_000, 0, 777_777] {
                try source.seek(toFrame: target)
                var samples: [Float] = []
                while samples.count < 4096 * channels, try source.produce(into: &samples) {}
                let expected = whole.samples[(target * channels)...].prefix(samples.count)
                XCTAssertEqual(snr(samples[...], expected), .infinity, "\(name): seek to \(target)")
            }
            try source.seek(toFrame: 100_000_000)
            var none: [Float] = []
            XCTAssertFalse(try source.produce(into: &none), "\(name): past the end")
        }
    }

    // MARK: Tags

    func testTagsWrittenByTheReferenceEncodersAreRead() throws {
        let expected = TrackTags(title: "Fixture Title", artist: "Fixture Artist", album: "Fixture Album")
        for name in ["tone.flac", "tone.ogg", "tone.opus", "tagged.wav", "id3.aac"] {
            let source = try DecoderRegistry.open(try FileByteSource(path: try fixture(name)))
            try source.prepare()
            XCTAssertEqual(source.tags, expected, name)
        }
    }

    // MARK: Streaming

    /// Through a source that cannot seek and hands out random-sized pieces: the same samples as the
    /// file decode, no length claimed, no seeking offered.
    func testNonSeekableStreamsDecodeAsTheFileDoes() throws {
        for name in ["tone.flac", "tone.ogg", "tone.opus", "tone.aac", "pcm24.wav", "id3.aac"] {
            let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: try fixture(name))))
            let file = try decodeFile(try fixture(name))
            let streamed = try decode(MemoryByteSource(bytes: data, seed: 42, maxPiece: 3000, seekable: false))
            XCTAssertFalse(streamed.source.isSeekable, name)
            XCTAssertEqual(streamed.samples.count, file.samples.count, "\(name): length")
            XCTAssertEqual(snr(streamed.samples[...], file.samples[...]), .infinity, name)
            XCTAssertThrowsError(try streamed.source.seek(toFrame: 0), name)
        }
    }

    /// A live AAC stream joined mid-frame (a reconnect): the partial frame is skipped and counted,
    /// and what follows is the file's own audio, aligned to its end. (The registry sniffs ADTS at
    /// the stream's first byte only, so the decoder is opened directly here.)
    func testADTSJoinedMidFrameResyncs() throws {
        let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: try fixture("nopns.aac"))))
        let file = try decodeFile(try fixture("nopns.aac")).samples
        let joined = try decode(AACSource(bytes: MemoryByteSource(bytes: Array(data[100_001...]), seed: 3, maxPiece: 2000, seekable: false)))
        XCTAssertGreaterThan(joined.source.skippedBytes, 0)
        XCTAssertLessThan(joined.source.skippedBytes, 8192, "more than one frame skipped")
        XCTAssertFalse(joined.samples.isEmpty)
        let measured = snr(joined.samples[...], file.suffix(joined.samples.count))
        print("nopns.aac joined at byte 100001: skipped \(joined.source.skippedBytes) bytes, SNR \(measured) dB against the file's tail")
        XCTAssertGreaterThanOrEqual(measured, 60)
    }

    // MARK: Hostile input

    /// A truncated file ends cleanly, with the first part as in the whole file.
    func testTruncatedFilesEndCleanly() throws {
        for name in ["tone.flac", "tone.ogg", "tone.opus", "tone.aac", "pcm16.wav"] {
            let whole = try decodeFile(try fixture(name)).samples
            let cut = try decodeFile(try fixture("truncated-\(name)")).samples
            XCTAssertGreaterThan(cut.count, whole.count / 3, name)
            XCTAssertLessThan(cut.count, whole.count * 2 / 3, name)
            XCTAssertGreaterThanOrEqual(snr(cut[...], whole[...]), 80, name)
        }
    }

    /// 5000 bytes of junk (with fake sync words) spliced mid-frame: skipped and counted, with at
    /// most the damaged frame lost besides; audio before and after plays as in the clean file.
    func testGarbageInsideADTSIsSkipped() throws {
        let clean = try decodeFile(try fixture("nopns.aac")).samples
        let (source, dirty) = try decodeFile(try fixture("garbage.aac"))
        XCTAssertGreaterThanOrEqual(source.skippedBytes, 5000)
        XCTAssertLessThan(source.skippedBytes, 5000 + 2 * 8192)
        let lost = clean.count - dirty.count
        XCTAssertTrue(lost >= 0 && lost <= 2 * 2048 * 2, "lost \(lost) samples")
        let before = 30 * 2048
        XCTAssertEqual(snr(dirty.prefix(before), clean.prefix(before)), .infinity, "before the junk")
        let after = 60 * 2048
        XCTAssertGreaterThanOrEqual(snr(dirty.suffix(after), clean.suffix(after)), 60, "after the junk")
    }

    /// Random bytes after a valid start, and headers claiming absurd sizes: a `PartyCastError` or a
    /// clean end, never a crash, and within a time limit.
    func testHostileStreamsEndOrFailCleanly() throws {
        let names = ["random-after-magic.flac", "random-after-magic.ogg", "random-after-magic.opus", "random-after-magic.wav",
                     "random-after-magic.aac", "absurd.flac", "absurd.opus", "absurd.wav", "absurd-list.wav"]
        for name in names {
            let path = try fixture(name)
            let outcome = Outcome()
            for seekable in [true, false] {
                let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
                withinTimeout(30, name) {
                    do {
                        let decoded = try decode(MemoryByteSource(bytes: data, seed: 5, seekable: seekable))
                        outcome.record("\(name): ended after \(decoded.samples.count) samples")
                    } catch let error as PartyCastError {
                        outcome.record("\(name): \(error)")
                    } catch {
                        outcome.record("\(name): unexpected \(error)")
                    }
                }
            }
            for line in outcome.lines {
                print(line)
                XCTAssertFalse(line.contains("unexpected"), line)
            }
        }
    }
}

/// A whole decode through the registry, as the player opens files.
private func decode(_ bytes: ByteSource) throws -> (source: PCMSource, samples: [Float]) {
    try decode(try DecoderRegistry.open(bytes))
}

private func decode(_ source: PCMSource) throws -> (source: PCMSource, samples: [Float]) {
    try source.prepare()
    var samples: [Float] = []
    while try source.produce(into: &samples) {}
    return (source, samples)
}

/// What a decode on another thread came to, read back once it has finished.
private final class Outcome: @unchecked Sendable {
    // @unchecked: written by the decoding thread before the expectation it fulfils is waited on.
    private(set) var lines: [String] = []
    func record(_ line: String) { lines.append(line) }
}
