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
}
