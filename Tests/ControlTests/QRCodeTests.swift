import Foundation
import PartyCastControl
import PartyCastTestSupport
import XCTest

/// The remote's QR code against the qrencode program's own drawing of the same URL.
final class QRCodeTests: XCTestCase {
    func testTheCodeIsWhatQrencodeDraws() throws {
        let qrencode = "/usr/bin/qrencode"
        guard FileManager.default.isExecutableFile(atPath: qrencode) else { throw XCTSkip("no \(qrencode): run `make deps`") }
        for url in ["http://192.168.1.20:7361/", "http://a-rather-long-host-name-for-a-speaker.local:65535/"] {
            let drawn = try runProcess(qrencode, ["-t", "UTF8", "-l", "L", url], timeout: 10)
            XCTAssertEqual(drawn.status, 0, drawn.stderr)
            XCTAssertEqual(try QRCode.lines(encoding: url).map { $0 + "\n" }.joined(), drawn.stdout, url)
        }
    }
}
