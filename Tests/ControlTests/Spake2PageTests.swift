import Foundation
import Logging
@testable import PartyCastControl
import PartyCastTestSupport
import PartyCastWire
import XCTest

/// The page's SPAKE2 (Web/spake2.js), run by Debian's node over Debian's node-elliptic: RFC 9382's
/// vectors (`Spake2Tests.vectors`), then against the broadcaster's side, key to key.
final class Spake2PageTests: XCTestCase {
    struct Run: Encodable {
        var role: String
        var w: String?
        var key: String?
        var scalar: String
        var peerShare: String
        var identities: [String]?
        var aad: String?
    }

    struct Result: Decodable {
        var share: String
        var own: String?
        var expected: String?
        var refused: Bool?
    }

    private let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()

    private func runPage(_ runs: [Run]) throws -> [Result] {
        let page = here.appendingPathComponent("../../Sources/PartyCastControl/Web/spake2.js").standardized.path
        let script = here.appendingPathComponent("spake2_runs.js").path
        let input = String(decoding: try JSONEncoder().encode(runs), as: UTF8.self)
        let node = try runProcess("/usr/bin/node", [script, page, input], timeout: 30, environment: ["NODE_PATH": "/usr/share/nodejs"])
        XCTAssertEqual(node.status, 0, node.stderr)
        return try JSONDecoder().decode([Result].self, from: Data(node.stdout.utf8))
    }

    private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    func testThePageGivesTheRFC9382Vectors() throws {
        let runs = Spake2Tests.vectors.flatMap { vector in [
            Run(role: "a", w: vector.w, scalar: vector.x, peerShare: vector.pB, identities: [vector.a, vector.b], aad: ""),
            Run(role: "b", w: vector.w, scalar: vector.y, peerShare: vector.pA, identities: [vector.a, vector.b], aad: ""),
        ] }
        let results = try runPage(runs)
        XCTAssertEqual(results.count, runs.count)
        for (vector, pair) in zip(Spake2Tests.vectors, stride(from: 0, to: results.count, by: 2).map { (results[$0], results[$0 + 1]) }) {
            XCTAssertEqual(pair.0.share, vector.pA)
            XCTAssertEqual(pair.0.own, vector.cA)
            XCTAssertEqual(pair.0.expected, vector.cB)
            XCTAssertEqual(pair.1.share, vector.pB)
            XCTAssertEqual(pair.1.own, vector.cB)
        }
    }

    /// The page as the remote against the broadcaster's side: the same key (w from HKDF, the
    /// identities and AAD of both files) agrees both ways; another key does not; bad shares are refused.
    func testThePageAndTheBroadcasterAgreeOnTheKeyOnly() throws {
        let broadcaster = Spake2.Party(role: .b, key: PartyKey(secret: "correct horse battery"))
        let scalar = hex(P256.randomScalar())
        let offCurve = "04" + String(repeating: "ff", count: 128)
        // w·N: a point of the curve, but it leaves K the identity.
        let degenerate = try XCTUnwrap(P256.multiplyAdd(scalar: [UInt8](repeating: 0, count: 32),
                                                        other: Spake2.password(PartyKey(secret: "correct horse battery")), point: Spake2.n))
        let results = try runPage([
            Run(role: "a", key: "correct horse battery", scalar: scalar, peerShare: hex(broadcaster.share)),
            Run(role: "a", key: "correct horse battery!", scalar: scalar, peerShare: hex(broadcaster.share)),
            Run(role: "a", key: "correct horse battery", scalar: scalar, peerShare: offCurve),
            Run(role: "a", key: "correct horse battery", scalar: scalar, peerShare: hex(degenerate)),
            Run(role: "a", key: "correct horse battery", scalar: scalar, peerShare: hex(Spake2.n)),
        ])
        XCTAssertEqual(results.count, 5)
        let page = try XCTUnwrap(broadcaster.finish(peerShare: Spake2.bytes(hex: results[0].share)))
        XCTAssertTrue(page.verify(Spake2.bytes(hex: try XCTUnwrap(results[0].own))), "the broadcaster takes the page's proof")
        XCTAssertEqual(results[0].expected, hex(page.own), "the page takes the broadcaster's")
        let wrong = try XCTUnwrap(broadcaster.finish(peerShare: Spake2.bytes(hex: results[1].share)))
        XCTAssertFalse(wrong.verify(Spake2.bytes(hex: try XCTUnwrap(results[1].own))))
        XCTAssertNotEqual(results[1].expected, hex(wrong.own))
        XCTAssertEqual(results[2...].map(\.refused), [true, true, true])
    }

    /// What the broadcaster serves the page: every listed file of Debian's packages, each defined by
    /// its id; without them, one line that says what is missing (and the same line logged).
    func testTheServedModulesAreDebiansFilesOrOneLineSayingWhatIsMissing() throws {
        let script = String(decoding: NodeModules.script(logger: Logger(label: "node-modules-test")), as: UTF8.self)
        for id in NodeModules.modules {
            let file = try String(contentsOfFile: "\(NodeModules.root)/\(id).js", encoding: .utf8)
            XCTAssertTrue(script.contains("defineNodeModule(\"\(id)\", function (module, exports, require) {\n\(file)\n});"), id)
        }
        let missing = String(decoding: NodeModules.script(root: "/nonexistent", logger: Logger(label: "node-modules-test")), as: UTF8.self)
        XCTAssertEqual(missing, "// remote control: /nonexistent/elliptic/lib/elliptic/curves.js is missing: a private party's page cannot prove "
                       + "the key without Debian's node-elliptic package; `broadcaster ctl` still can\n")
    }
}
