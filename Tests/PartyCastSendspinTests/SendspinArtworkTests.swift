import Foundation
import PartyCastSendspin
import PartyCastTestSupport
import XCTest

/// The artwork role: pictures made by ffmpeg read for their format and size, a client's channels as
/// aiosendspin writes them, and our artwork messages checked and put together by aiosendspin's own
/// code (its client's checks of aiosendspin 10's announce-and-parts framing).
final class SendspinArtworkTests: XCTestCase {
    /// An image ffmpeg draws: `source` (a lavfi graph) into `name`, whose extension picks the format.
    func drawn(_ source: String, _ name: String, in directory: String) throws -> [UInt8] {
        let path = "\(directory)/\(name)"
        let made = try runProcess("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", source, "-frames:v", "1", path])
        XCTAssertEqual(made.status, 0, made.stderr)
        return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    func testPicturesAreReadForTheirFormatAndSize() throws {
        let directory = try temporaryDirectory()
        for (name, format) in [("red.png", "png"), ("red.jpg", "jpeg"), ("red.bmp", "bmp")] {
            let picture = try XCTUnwrap(SendspinPicture(try drawn("color=c=red:s=124x46", name, in: directory)), name)
            XCTAssertEqual([picture.format, "\(picture.width)x\(picture.height)"], [format, "124x46"], name)
        }
        // A busier JPEG: its frame header after larger tables.
        let busy = try XCTUnwrap(SendspinPicture(try drawn("testsrc=s=320x240", "busy.jpg", in: directory)))
        XCTAssertEqual([busy.width, busy.height], [320, 240])
        let png = try drawn("color=c=blue:s=64x64", "blue.png", in: directory)
        // Cut short, not a picture, or too large to send: none.
        XCTAssertNil(SendspinPicture(Array(png.prefix(20))))
        XCTAssertNil(SendspinPicture(Array(repeating: 0xFF, count: 1000)))
        XCTAssertNil(SendspinPicture([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x00]))
        XCTAssertNil(SendspinPicture(png + Array(repeating: 0, count: SendspinPicture.maxBytes)))
        XCTAssertNil(SendspinPicture(try drawn("color=c=red:s=8x8", "red.gif", in: directory)), "GIF is none of the spec's formats")
        // A header that says more than stream/start may (1…65535 pixels): IHDR's width, then BMP's height.
        XCTAssertNil(SendspinPicture(Array(png.prefix(16) + [0x00, 0x01, 0x00, 0x00] + png.dropFirst(20))))
        let bmp = try drawn("color=c=red:s=8x8", "small.bmp", in: directory)
        XCTAssertNotNil(SendspinPicture(bmp))
        XCTAssertNil(SendspinPicture(Array(bmp.prefix(22) + [0x00, 0x00, 0x01, 0x00] + bmp.dropFirst(26))))
    }

    /// aiosendspin's artwork client: its (deprecated) hello channels and its client/state channels.
    func testOurSessionTakesAiosendspinsArtworkChannels() throws {
        let lines = try aiosendspinReference(["artwork-client"])
        XCTAssertEqual(lines.count, 2)
        var session = SendspinServerSession(serverID: "party-1", serverName: "Party", transport: .plain, encodable: [.pcm])
        _ = session.receiveText(Array(lines[0].utf8), receivedAt: 10)
        let peer = try XCTUnwrap(session.peer)
        XCTAssertEqual(peer.activeRoles, ["artwork@v1"])
        XCTAssertEqual(peer.artworkChannels, [SendspinArtworkChannel(source: "album", format: "jpeg", width: 300, height: 200)])
        XCTAssertEqual(session.receiveText(Array(lines[1].utf8), receivedAt: 20), [.artworkChannels([
            SendspinArtworkChannel(source: "album", format: "png", width: 800, height: 800), SendspinArtworkChannel(source: "none"),
        ])])
        // The spec's own spelling of the size, and channels out of range (counted, not taken).
        let spec = #"{"type":"client/state","payload":{"artwork":{"channels":[{"source":"artist","format":"bmp","media_width":64,"media_height":48}]}}}"#
        XCTAssertEqual(session.receiveText(Array(spec.utf8), receivedAt: 30),
                       [.artworkChannels([SendspinArtworkChannel(source: "artist", format: "bmp", width: 64, height: 48)])])
        for bad in [#"{"channels":[]}"#, #"{"channels":[{"source":"album","format":"gif","width":1,"height":1}]}"#,
                    #"{"channels":[{"source":"album","format":"png","width":0,"height":1}]}"#,
                    #"{"channels":[{"source":"none"},{"source":"none"},{"source":"none"},{"source":"none"},{"source":"none"}]}"#] {
            XCTAssertEqual(session.receiveText(Array(#"{"type":"client/state","payload":{"artwork":\#(bad)}}"#.utf8), receivedAt: 40), [], bad)
        }
        XCTAssertEqual(session.badMessages, 4)
        // The spec's stream/request-format changes one declared channel, in the spec's spelling.
        let request = #"{"type":"stream/request-format","payload":{"artwork":{"channel":0,"source":"album","media_width":320}}}"#
        XCTAssertEqual(session.receiveText(Array(request.utf8), receivedAt: 50),
                       [.artworkChannels([SendspinArtworkChannel(source: "album", format: "bmp", width: 320, height: 48)])])
        for bad in [#"{"channel":1,"source":"album"}"#, #"{"channel":0,"format":"webp"}"#, #"{"channel":-1}"#] {
            XCTAssertEqual(session.receiveText(Array(#"{"type":"stream/request-format","payload":{"artwork":\#(bad)}}"#.utf8), receivedAt: 60), [], bad)
        }
        XCTAssertEqual(session.badMessages, 7)
        XCTAssertEqual(session.artworkChannels, [SendspinArtworkChannel(source: "album", format: "bmp", width: 320, height: 48)])
    }

    /// Our stream/start for artwork and our announce-and-parts framing (an image over three Noise
    /// messages' worth, and a clear) as aiosendspin 10's client reads them; the spec's one message.
    func testAiosendspinPutsOurArtworkMessagesTogether() throws {
        let directory = try temporaryDirectory()
        let noise = try drawn("nullsrc=s=400x300,geq=random(1)*255:128:128", "noise.png", in: directory)
        XCTAssertGreaterThan(noise.count, 2 * SendspinFrame.maxArtworkMessageBytes, "an image that needs three parts")
        let picture = try XCTUnwrap(SendspinPicture(noise))
        let start = SendspinServerMessage.artworkStart([picture.channel(source: "album"), SendspinArtworkChannel(source: "artist", format: "jpeg", width: 10, height: 10)])
        let shown = SendspinFrame.artwork(channel: 0, timestamp: 5_000_000, image: noise, framing: .announced)
        let cleared = SendspinFrame.artwork(channel: 1, timestamp: 6_000_000, image: [], framing: .announced)
        XCTAssertEqual(shown.count, 4)
        XCTAssertTrue((shown + cleared).allSatisfy { $0.count <= SendspinFrame.maxArtworkMessageBytes })
        let lines = try ([["text": String(decoding: start.encoded(transmittedAt: 7), as: UTF8.self)]]
            + (shown + cleared).map { ["binary": $0.map { String(format: "%02x", $0) }.joined()] })
            .map { String(decoding: try JSONSerialization.data(withJSONObject: $0), as: UTF8.self) }
        let file = "\(directory)/ours.jsonl"
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let read = try aiosendspinReference(["artwork", file]).map { try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        XCTAssertEqual(read.count, 3, "\(read)")
        XCTAssertEqual(read.first?["class"] as? String, "StreamStartMessage")
        let channels = ((read.first?["read"] as? [String: Any])?["payload"] as? [String: Any]).flatMap { ($0["artwork"] as? [String: Any])?["channels"] as? [[String: Any]] }
        XCTAssertEqual(channels?.first?["format"] as? String, "png")
        XCTAssertEqual(channels?.first?["width"] as? Int, 400)
        XCTAssertEqual(channels?.first?["height"] as? Int, 300)
        XCTAssertEqual(channels?.last?["source"] as? String, "artist")
        let digest = try runProcess("sha256sum", ["\(directory)/noise.png"]).stdout.prefix(64)
        XCTAssertEqual(read[1]["channel"] as? Int, 0)
        XCTAssertEqual(read[1]["timestamp"] as? Int, 5_000_000)
        XCTAssertEqual(read[1]["bytes"] as? Int, noise.count)
        XCTAssertEqual(read[1]["sha256"] as? String, String(digest))
        XCTAssertEqual(read[2]["channel"] as? Int, 1)
        XCTAssertEqual(read[2]["bytes"] as? Int, 0, "a clear")

        // The spec's: type, big-endian timestamp, the image.
        let spec = SendspinFrame.artwork(channel: 2, timestamp: 0x0102_0304_0506_0708, image: [0xAA, 0xBB], framing: .spec)
        XCTAssertEqual(spec, [[10, 1, 2, 3, 4, 5, 6, 7, 8, 0xAA, 0xBB]])
        let parsed = try XCTUnwrap(SendspinFrame(spec[0][...], audioHeader: .spec))
        XCTAssertEqual(parsed.kind, .artwork(channel: 2))
        XCTAssertEqual(parsed.timestamp, 0x0102_0304_0506_0708)
        XCTAssertEqual(Array(parsed.payload), [0xAA, 0xBB])
    }
}
