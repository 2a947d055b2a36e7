import Foundation
import PartyCastCore
import XCTest

/// Addresses as people type them for --host, --mpd and Sendspin URLs, read as Foundation's URL
/// parser reads the same authority, where it reads one.
final class HostAndPortTests: XCTestCase {
    func testAddressesReadAsFoundationsURLParserReadsThem() throws {
        for text in ["10.0.0.2:9000", "speaker.local", "speaker.local:1", "[::1]:8930", "[fd00::1]", "[fd00::2]:8928", "127.0.0.1:65535"] {
            let parsed = try HostAndPort(parsing: text[...], defaultPort: 7360)
            let reference = try XCTUnwrap(URLComponents(string: "ws://\(text)/"), text)
            XCTAssertEqual(parsed.host, try XCTUnwrap(reference.host).trimmingCharacters(in: CharacterSet(charactersIn: "[]")), text)
            XCTAssertEqual(parsed.port, reference.port ?? 7360, text)
            XCTAssertEqual(URLComponents(string: "ws://\(parsed)/")?.port, parsed.port, "\(text) written back as \(parsed)")
        }
    }

    /// Without brackets an IPv6 address is all host: its last group could not be told from a port.
    func testABareIPv6AddressIsAllHost() throws {
        let parsed = try HostAndPort(parsing: "fd00::1:7360", defaultPort: 6600)
        XCTAssertEqual([parsed.host, "\(parsed.port)", "\(parsed)"], ["fd00::1:7360", "6600", "[fd00::1:7360]:6600"])
        XCTAssertEqual(parsed.authority(omittingPort: 6600), "[fd00::1:7360]")
        XCTAssertEqual(HostAndPort(host: "vm.local", port: 80).authority(omittingPort: 80), "vm.local")
    }

    func testMalformedAddressesAreRefusedSayingWhy() {
        let refused = ["": "no host", ":7360": "no host", "[]:7360": "no host", "host:": "the port must be 1…65535",
                       "host:0": "the port must be 1…65535", "host:65536": "the port must be 1…65535", "host:x": "the port must be 1…65535",
                       "[::1]x": "a port follows ]", "[::1": "no ] after the IPv6 address", "ho\0st": "no host"]
        for (text, reason) in refused {
            XCTAssertThrowsError(try HostAndPort(parsing: text[...], defaultPort: 7360), text.debugDescription) { error in
                XCTAssertTrue((error as? PartyCastError)?.message.contains(reason) == true, "\(text.debugDescription): \(error)")
            }
        }
    }
}
