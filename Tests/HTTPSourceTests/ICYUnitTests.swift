import NIOCore
import NIOEmbedded
import NIOHTTP1
import PartyCastHTTP
import XCTest

/// The pure parts: the ICY demuxer, titles and their decoding, playlists; and why NIO's decoder
/// alone is not enough for SHOUTcast.
final class ICYUnitTests: XCTestCase {
    /// The reason PartyCastHTTP puts a shim before NIO's HTTPResponseDecoder.
    func testNIOResponseDecoderRefusesICYWithoutTheShim() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(HTTPResponseDecoder()))
        // The decoder pairs responses with requests, so one must go out first.
        try channel.pipeline.syncOperations.addHandler(HTTPRequestEncoder(), position: .first)
        try channel.writeOutbound(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/")))
        XCTAssertThrowsError(try channel.writeInbound(ByteBuffer(string: "ICY 200 OK\r\nicy-metaint: 16\r\n\r\n")))
        _ = try? channel.finish()

        let http = EmbeddedChannel(handler: ByteToMessageHandler(HTTPResponseDecoder()))
        try http.pipeline.syncOperations.addHandler(HTTPRequestEncoder(), position: .first)
        try http.writeOutbound(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/")))
        try http.writeInbound(ByteBuffer(string: "HTTP/1.0 200 OK\r\nicy-metaint: 16\r\n\r\n"))
        guard case .head(let head) = try http.readInbound(as: HTTPClientResponsePart.self) else { return XCTFail("no head") }
        XCTAssertEqual(head.headers.first(name: "icy-metaint"), "16")
        _ = try? http.finish()
    }

    /// However the body is split, the same audio and blocks come out; a block is what its length
    /// byte says (× 16), no more.
    func testDemuxerIsIndependentOfHowTheStreamIsSplit() {
        let audio = (0..<1000).map { UInt8($0 % 251) }
        let title = Array("StreamTitle='A';".utf8)  // 16 bytes: one unit
        var stream: [UInt8] = []
        for chunk in stride(from: 0, to: audio.count, by: 100) {
            stream += audio[chunk..<chunk + 100]
            stream += chunk == 200 ? [1] + title : [0]
        }
        for piece in [1, 7, 100, 101, 5000] {
            var demuxer = ICYDemuxer(interval: 100)
            var out: [UInt8] = []
            var blocks: [[UInt8]] = []
            for start in stride(from: 0, to: stream.count, by: piece) {
                blocks += demuxer.split(Array(stream[start..<min(start + piece, stream.count)]), audio: &out)
            }
            XCTAssertEqual(out, audio, "pieces of \(piece)")
            XCTAssertEqual(blocks, [title], "pieces of \(piece)")
        }
    }

    func testStreamTitles() {
        func title(_ bytes: [UInt8]) -> String? { ICYMetadata.streamTitle(bytes + [0, 0, 0]) }
        XCTAssertEqual(title(Array("StreamTitle='Artist - Song';".utf8)), "Artist - Song")
        XCTAssertEqual(title(Array("StreamTitle='Rock 'n' Roll';StreamUrl='http://x/';".utf8)), "Rock 'n' Roll")
        XCTAssertEqual(title(Array("StreamTitle='It';s';".utf8)), "It';s")
        XCTAssertEqual(title(Array("StreamTitle='';".utf8)), "")
        XCTAssertEqual(title([0x53, 0x74] + Array("reamTitle='Caf".utf8) + [0xE9] + Array("';".utf8)), "Café")
        XCTAssertEqual(title(Array("StreamTitle='Ünï ♫';".utf8)), "Ünï ♫")
        XCTAssertNil(title(Array("StreamTitle='never closed".utf8)))
        XCTAssertNil(title((0..<64).map { UInt8($0 * 37 % 256) }))
    }
}
