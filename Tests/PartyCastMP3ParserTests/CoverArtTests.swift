import PartyCastCore
import PartyCastDecoder
import PartyCastMP3Parser
import PartyCastSources
import PartyCastTestSupport
import XCTest

/// ID3v2 pictures (APIC, PIC): what LAME writes, and tags built here to be awkward or hostile.
final class CoverArtTests: XCTestCase {
    /// id3v2.mp3 is LAME's `--ti cover.png`; image.mp3 is that same PNG (see scripts/make-fixtures.sh).
    func testTheCoverLAMEWroteComesOutByteForByte() throws {
        let png = try Array(Data(contentsOf: URL(fileURLWithPath: fixture("image.mp3"))))
        let source = try MP3Source(bytes: FileByteSource(path: fixture("id3v2.mp3")))
        try source.prepare()
        XCTAssertEqual(source.cover?.mimeType, "image/png")
        XCTAssertEqual(source.cover?.bytes, png)
        XCTAssertEqual(source.tags.title, "Fixture Title")

        let untagged = try MP3Source(bytes: FileByteSource(path: fixture("cbr.mp3")))
        try untagged.prepare()
        XCTAssertNil(untagged.cover)
    }

    func testUTF16DescriptionAndTheFrontCoverWins() throws {
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3]
        let back = apic(encoding: 0, mime: "image/png", type: 4, description: Array("back\0".utf8), data: png)
        // UTF-16 with BOM: "éĀ" has a zero pair at an odd offset; only the aligned one ends it.
        let front = apic(encoding: 1, mime: "image/jpg", type: 3, description: [0xFF, 0xFE, 0xE9, 0x00, 0x00, 0x01, 0, 0], data: jpeg)
        let cover = parse(tag(version: 3, frames: [back, front]))
        XCTAssertEqual(cover, CoverArt(mimeType: "image/jpeg", pictureType: 3, bytes: jpeg))
    }

    func testID3v22PictureFrame() throws {
        var body: [UInt8] = [0] + Array("PNG".utf8) + [3] + Array("cover\0".utf8) + png
        let frame = Array("PIC".utf8) + [0, 0, UInt8(body.count)] + body
        XCTAssertEqual(parse(tag(version: 2, frames: [frame]))?.bytes, png)
        body.removeLast(png.count)  // no picture bytes at all
        XCTAssertNil(parse(tag(version: 2, frames: [Array("PIC".utf8) + [0, 0, UInt8(body.count)] + body])))
    }

    /// A claimed type that is not a MIME type (or would inject a header) is not passed on.
    func testUnknownBytesKeepOnlyASafeClaimedType() {
        let data: [UInt8] = [1, 2, 3, 4]
        XCTAssertEqual(parse(tag(version: 3, frames: [apic(encoding: 0, mime: "image/x-icon", type: 3, description: [0], data: data)]))?.mimeType,
                       "image/x-icon")
        XCTAssertEqual(parse(tag(version: 3, frames: [apic(encoding: 0, mime: "text/html\r\nX: y", type: 3, description: [0], data: data)]))?.mimeType,
                       "application/octet-stream")
        XCTAssertEqual(parse(tag(version: 3, frames: [apic(encoding: 0, mime: "-->", type: 3, description: [0], data: data)]))?.mimeType,
                       "application/octet-stream")
    }

    func testHostilePictureFramesAreSkippedAndTheAudioStillPlays() throws {
        let unterminated = Array("APIC".utf8) + [0, 0, 0, 12, 0, 0] + [0] + Array("image/png".utf8) + [3, 7]
        var compressed = apic(encoding: 0, mime: "image/png", type: 3, description: [0], data: png)
        compressed[9] = 0x80  // v2.3 compression: the body is not the picture as stored
        var oversized = Array("APIC".utf8) + [0, 0x40, 0, 1, 0, 0]  // 4 MiB + 1 byte claimed, within the tag
        oversized += [UInt8](repeating: 0, count: (4 << 20) + 1)
        for frames in [[unterminated], [compressed], [oversized]] {
            let bytes = tag(version: 3, frames: frames) + (try mp3Frames())
            var parser = MP3Parser()
            parser.push(bytes)
            parser.finish()
            var audio = 0
            while let event = try parser.next() { if case .frame = event { audio += 1 } }
            XCTAssertNil(parser.cover)
            XCTAssertGreaterThan(audio, 10)
        }
    }

    /// A tag cut short inside a picture is the same error as one cut short anywhere else.
    func testTruncatedPictureIsATruncatedTag() {
        let frame = apic(encoding: 0, mime: "image/png", type: 3, description: [0], data: png)
        var parser = MP3Parser()
        parser.push(tag(version: 3, frames: [frame]).dropLast(64 + 5))  // the padding and the picture's end
        parser.finish()
        XCTAssertThrowsError(try { while try parser.next() != nil {} }())
    }

    // MARK: - Building tags

    private let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13]

    private func apic(encoding: UInt8, mime: String, type: UInt8, description: [UInt8], data: [UInt8]) -> [UInt8] {
        let body = [encoding] + Array(mime.utf8) + [0, type] + description + data
        return Array("APIC".utf8) + bigEndian(body.count) + [0, 0] + body
    }

    private func bigEndian(_ n: Int) -> [UInt8] { [UInt8(n >> 24 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] }

    private func tag(version: UInt8, frames: [[UInt8]]) -> [UInt8] {
        let body = frames.flatMap { $0 } + [UInt8](repeating: 0, count: 64)
        let size = body.count
        let synchsafe = [UInt8(size >> 21 & 0x7F), UInt8(size >> 14 & 0x7F), UInt8(size >> 7 & 0x7F), UInt8(size & 0x7F)]
        return Array("ID3".utf8) + [version, 0, 0] + synchsafe + body
    }

    private func mp3Frames() throws -> [UInt8] {
        try Array(Data(contentsOf: URL(fileURLWithPath: fixture("cbr.mp3"))))
    }

    private func parse(_ bytes: [UInt8]) -> CoverArt? {
        var parser = MP3Parser()
        parser.push(bytes)
        parser.finish()
        while (try? parser.next()) != nil {}
        return parser.cover
    }
}
