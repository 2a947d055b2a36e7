import Foundation
import PartyCastCore
import PartyCastDecoder
import PartyCastMP3Parser
import PartyCastSources
import PartyCastTestSupport
import XCTest

final class MP3ParserTests: XCTestCase {
    struct Outcome: Equatable, CustomStringConvertible {
        var description: String {
            "\(events.count) events, \(skipped) bytes skipped, error: \(error.map(String.init(describing:)) ?? "none")"
        }

        var events: [MP3Event] = []
        var skipped: Int64 = 0
        var error: PartyCastError?
    }

    /// Parses everything `source` delivers, in the pieces it delivers them.
    func parse(_ source: ByteSource) -> Outcome {
        var parser = MP3Parser()
        var outcome = Outcome()
        do {
            while true {
                let chunk = try source.read(maxBytes: 1 << 16)
                if chunk.isEmpty { parser.finish() } else { parser.push(chunk) }
                while let event = try parser.next() { outcome.events.append(event) }
                if chunk.isEmpty { break }
            }
        } catch {
            outcome.error = error
        }
        outcome.skipped = parser.skippedBytes
        return outcome
    }

    func bytes(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: try fixture(name))))
    }

    func frames(_ outcome: Outcome) -> [MP3Frame] {
        outcome.events.compactMap { if case .frame(let f) = $0 { f } else { nil } }
    }

    /// The same events however the bytes are split: whole, one byte at a time, and random pieces.
    func testSameEventsForAnySplit() throws {
        for name in ["cbr.mp3", "vbr.mp3", "mono22.mp3", "mpeg25.mp3", "id3v2.mp3", "garbage.mp3", "truncated.mp3", "random.mp3", "id3huge.mp3", "image.mp3"] {
            let data = try bytes(name)
            let whole = parse(MemoryByteSource(bytes: data, seed: 0, maxPiece: data.count + 1))
            XCTAssertEqual(parse(MemoryByteSource(bytes: data, seed: 0, maxPiece: 1)), whole, "\(name): byte by byte")
            for seed in UInt64(1)...12 {
                let pieces = [2, 7, 100, 1500, 5000][Int(seed) % 5]
                XCTAssertEqual(parse(MemoryByteSource(bytes: data, seed: seed, maxPiece: pieces)), whole, "\(name): seed \(seed)")
            }
        }
    }

    /// Frame count, tags and gapless figures as LAME wrote them, and the header frame kept apart.
    func testXingInfoAndTagsAsTheEncoderWroteThem() throws {
        let vbr = parse(MemoryByteSource(bytes: try bytes("vbr.mp3"), seed: 3))
        guard case .streamInfo(let info, _)? = vbr.events.first else { return XCTFail("no Xing header first") }
        XCTAssertEqual(info.kind, .xing)
        XCTAssertEqual(info.frameCount, frames(vbr).count)
        XCTAssertEqual(info.tableOfContents?.count, 100)
        XCTAssertEqual(info.encoderDelay, 576)  // LAME 3.100's delay
        XCTAssertNotNil(info.encoderPadding)
        XCTAssertEqual(vbr.skipped, 0)

        let cbr = parse(MemoryByteSource(bytes: try bytes("cbr.mp3"), seed: 4))
        guard case .streamInfo(let cbrInfo, _)? = cbr.events.first else { return XCTFail("no Info header first") }
        XCTAssertEqual(cbrInfo.kind, .info)
        XCTAssertEqual(Set(frames(cbr).map(\.header.bitrateKbps)), [128])

        let tagged = parse(MemoryByteSource(bytes: try bytes("id3v2.mp3"), seed: 5))
        XCTAssertEqual(tagged.events.first, .tags(TrackTags(title: "Fixture Title", artist: "Fixture Artist", album: "Fixture Album")))
        XCTAssertEqual(tagged.skipped, 0, "the picture, the padding and the ID3v1 tag are not garbage")
        XCTAssertEqual(Set(frames(tagged).map(\.header.version)), [.mpeg2])

        let mpeg25 = frames(parse(MemoryByteSource(bytes: try bytes("mpeg25.mp3"), seed: 6)))
        XCTAssertEqual(Set(mpeg25.map(\.header.version)), [.mpeg25])
        XCTAssertEqual(Set(mpeg25.map(\.header.sampleRate)), [11025])
    }

    /// Junk with fake sync words in the middle: every frame that comes out is a real frame of the
    /// clean file, the junk is counted, and at most two frames are lost: the one the splice cut,
    /// and the one before it when the junk hides the header that would confirm where it ends.
    func testResyncAfterGarbageCountsSkippedBytes() throws {
        let clean = frames(parse(MemoryByteSource(bytes: try bytes("cbr.mp3"), seed: 7)))
        let dirty = parse(MemoryByteSource(bytes: try bytes("garbage.mp3"), seed: 8))
        let cleanFrames = Set(clean.map(\.bytes))
        XCTAssertTrue(frames(dirty).allSatisfy { cleanFrames.contains($0.bytes) })
        XCTAssertGreaterThanOrEqual(frames(dirty).count, clean.count - 2)
        XCTAssertGreaterThanOrEqual(dirty.skipped, 3000)
        XCTAssertLessThan(dirty.skipped, 3000 + 2 * 420)
    }

    func testNotAudioIsAnError() throws {
        for name in ["random.mp3", "image.mp3", "empty.mp3", "id3huge.mp3"] {
            let outcome = parse(MemoryByteSource(bytes: try bytes(name), seed: 9))
            XCTAssertEqual(outcome.error?.code, .notAudio, name)
            XCTAssertTrue(frames(outcome).isEmpty, name)
        }
    }

    /// A stream with no Xing header and no way to scan ahead: the duration is an estimate from the
    /// average frame size so far, and it converges on the true length as the stream plays.
    func testDurationEstimateConvergesForAStream() throws {
        var data = try bytes("vbr.mp3")
        let all = parse(MemoryByteSource(bytes: data, seed: 0, maxPiece: data.count + 1))
        guard case .streamInfo(let info, let header)? = all.events.first, let first = frames(all).first else { return XCTFail() }
        data.removeSubrange(0..<Int(first.offset))  // drop the Xing frame: the length is unknown now
        let trueFrames = info.frameCount! * header.samplesPerFrame
        let source = try MP3Source(bytes: MemoryByteSource(bytes: data, seed: 1, seekable: false))
        try source.prepare()
        var errors: [Double] = []
        var buffer: [Float] = []
        var produced = 0
        while try source.produce(into: &buffer) {
            guard case .estimated(let estimate) = source.duration else { return XCTFail("not an estimate: \(source.duration)") }
            produced += 1
            if produced % 100 == 0 { errors.append(abs(Double(estimate - trueFrames)) / Double(trueFrames)) }
            buffer.removeAll(keepingCapacity: true)
        }
        XCTAssertGreaterThan(errors.count, 5)
        XCTAssertLessThan(errors.last!, 0.01, "final estimate within 1 %: \(errors)")
        XCTAssertLessThanOrEqual(errors.last!, errors.first!)
    }

    /// Seeking lands on the exact sample: the samples after a seek equal the same samples of a
    /// decode from the start, for targets at, inside and across frame boundaries.
    func testSeekMatchesAFullDecode() throws {
        for name in ["vbr.mp3", "mono22.mp3", "mpeg2.mp3"] {
            let full = try MP3Source(bytes: FileByteSource(path: try fixture(name)))
            try full.prepare()
            var reference: [Float] = []
            while try full.produce(into: &reference) {}
            let channels = full.format!.channels
            for target in [0, 1, 575, 1152, 1153, 50_000, full.duration.frames! - 10] {
                let source = try MP3Source(bytes: FileByteSource(path: try fixture(name)))
                try source.prepare()
                try source.seek(toFrame: target)
                var samples: [Float] = []
                while samples.count < 4096 * channels, try source.produce(into: &samples) {}
                let expected = reference[(target * channels)...].prefix(samples.count)
                XCTAssertEqual(samples.prefix(expected.count).elementsEqual(expected), true, "\(name) at \(target)")
            }
        }
    }
}
