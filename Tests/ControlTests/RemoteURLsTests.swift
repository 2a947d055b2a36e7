import PartyCastControl
import PartyCastTestSupport
import XCTest

/// The URLs `broadcaster share` prints for the remote page.
final class RemoteURLsTests: XCTestCase {
    func testTheLANAddressesComeFirstThenTheMDNSName() {
        XCTAssertEqual(RemoteURLs.urls(port: 7361, bind: "0.0.0.0", hostName: "vm", addresses: ["192.168.1.20", "10.0.0.5"]),
                       ["http://192.168.1.20:7361/", "http://10.0.0.5:7361/", "http://vm.local:7361/"])
        XCTAssertEqual(RemoteURLs.urls(port: 7361, bind: "0.0.0.0", hostName: "pi.example.org", addresses: []), ["http://pi.local:7361/"])
        XCTAssertEqual(RemoteURLs.urls(port: 7361, bind: "127.0.0.1", hostName: "vm", addresses: ["192.168.1.20"]), ["http://127.0.0.1:7361/"],
                       "bound to one address, the page is there alone")
        XCTAssertEqual(RemoteURLs.urls(port: 80, bind: "fd00::1", hostName: "vm", addresses: []), ["http://[fd00::1]:80/"])
    }

    /// iproute2's list of this machine's IPv4 addresses is the reference.
    func testTheLANAddressesAreThoseIpShows() throws {
        let shown = try runProcess("/usr/sbin/ip", ["-4", "-o", "addr", "show"], timeout: 10)
        XCTAssertEqual(shown.status, 0, shown.stderr)
        let expected = shown.stdout.split(separator: "\n").compactMap { line -> String? in
            let fields = line.split(separator: " ")
            guard let inet = fields.firstIndex(of: "inet"), inet + 1 < fields.count else { return nil }
            let address = String(fields[inet + 1].split(separator: "/")[0])
            return address.hasPrefix("127.") ? nil : address
        }
        XCTAssertEqual(Set(try RemoteURLs.lanAddresses()), Set(expected))
    }
}
