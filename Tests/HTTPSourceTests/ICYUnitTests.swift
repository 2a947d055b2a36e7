import PartyCastHTTP
import XCTest

/// The pure parts: the ICY demuxer, titles and their decoding, playlists.
final class ICYUnitTests: XCTestCase {
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
