@testable import PartyCastControl
import PartyCastWire
import XCTest

/// The control port's SPAKE2 against RFC 9382's own test vectors (Appendix B, SPAKE2-P256-SHA256-HKDF-HMAC:
/// https://www.rfc-editor.org/rfc/rfc9382#appendix-B), which use empty AAD and the identities named
/// in each; then the failures a party must see.
final class Spake2Tests: XCTestCase {
    struct Vector {
        var a, b, w, x, y, pA, pB, cA, cB: String
    }

    /// RFC 9382, Appendix B (the text: draft-irtf-cfrg-spake2-26, Appendix B, is the same).
    static let vectors = [
        Vector(a: "server", b: "client",
               w: "2ee57912099d31560b3a44b1184b9b4866e904c49d12ac5042c97dca461b1a5f",
               x: "43dd0fd7215bdcb482879fca3220c6a968e66d70b1356cac18bb26c84a78d729",
               y: "dcb60106f276b02606d8ef0a328c02e4b629f84f89786af5befb0bc75b6e66be",
               pA: "04a56fa807caaa53a4d28dbb9853b9815c61a411118a6fe516a8798434751470f9010153ac33d0d5f2047ffdb1a3e42c9b4e6be662766e1eeb4116988ede5f912c",
               pB: "0406557e482bd03097ad0cbaa5df82115460d951e3451962f1eaf4367a420676d09857ccbc522686c83d1852abfa8ed6e4a1155cf8f1543ceca528afb591a1e0b7",
               cA: "58ad4aa88e0b60d5061eb6b5dd93e80d9c4f00d127c65b3b35b1b5281fee38f0",
               cB: "d3e2e547f1ae04f2dbdbf0fc4b79f8ecff2dff314b5d32fe9fcef2fb26dc459b"),
        Vector(a: "", b: "client",
               w: "0548d8729f730589e579b0475a582c1608138ddf7054b73b5381c7e883e2efae",
               x: "403abbe3b1b4b9ba17e3032849759d723939a27a27b9d921c500edde18ed654b",
               y: "903023b6598908936ea7c929bd761af6039577a9c3f9581064187c3049d87065",
               pA: "04a897b769e681c62ac1c2357319a3d363f610839c4477720d24cbe32f5fd85f44fb92ba966578c1b712be6962498834078262caa5b441ecfa9d4a9485720e918a",
               pB: "04e0f816fd1c35e22065d5556215c097e799390d16661c386e0ecc84593974a61b881a8c82327687d0501862970c64565560cb5671f696048050ca66ca5f8cc7fc",
               cA: "47d29e6666af1b7dd450d571233085d7a9866e4d49d2645e2df975489521232b",
               cB: "3313c5cefc361d27fb16847a91c2a73b766ffa90a4839122a9b70a2f6bd1d6df"),
        Vector(a: "server", b: "",
               w: "626e0cdc7b14c9db3e52a0b1b3a768c98e37852d5db30febe0497b14eae8c254",
               x: "07adb3db6bc623d3399726bfdbfd3d15a58ea776ab8a308b00392621291f9633",
               y: "b6a4fc8dbb629d4ba51d6f91ed1532cf87adec98f25dd153a75accafafedec16",
               pA: "04f88fb71c99bfffaea370966b7eb99cd4be0ff1a7d335caac4211c4afd855e2e15a873b298503ad8ba1d9cbb9a392d2ba309b48bfd7879aefd0f2cea6009763b0",
               pB: "040c269d6be017dccb15182ac6bfcd9e2a14de019dd587eaf4bdfd353f031101e7cca177f8eb362a6e83e7d5e729c0732e1b528879c086f39ba0f31a9661bd34db",
               cA: "bc9f9bbe99f26d0b2260e6456e05a86196a3307ec6663a18bf6ac825736533b2",
               cB: "c2370e1bf813b086dff0d834e74425a06e6390f48f5411900276dcccc5a297ec"),
        Vector(a: "", b: "",
               w: "7bf46c454b4c1b25799527d896508afd5fc62ef4ec59db1efb49113063d70cca",
               x: "8cef65df64bb2d0f83540c53632de911b5b24b3eab6cc74a97609fd659e95473",
               y: "d7a66f64074a84652d8d623a92e20c9675c61cb5b4f6a0063e4648a2fdc02d53",
               pA: "04a65b367a3f613cf9f0654b1b28a1e3a8a40387956c8ba6063e8658563890f46ca1ef6a676598889fc28de2950ab8120b79a5ef1ea4c9f44bc98f585634b46d66",
               pB: "04589f13218822710d98d8b2123a079041052d9941b9cf88c6617ddb2fcc0494662eea8ba6b64692dc318250030c6af045cb738bc81ba35b043c3dcb46adf6f58d",
               cA: "dfb4db8d48ae5a675963ea5e6c19d98d4ea028d8e898dad96ea19a80ade95dca",
               cB: "d0f0609d1613138d354f7e95f19fb556bf52d751947241e8c7118df5ef0ae175"),
    ]

    private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    func testRFC9382VectorsGiveTheSharesAndConfirmations() throws {
        for vector in Self.vectors {
            let w = Spake2.bytes(hex: vector.w)
            let a = Spake2.Party(role: .a, password: w, scalar: Spake2.bytes(hex: vector.x))
            let b = Spake2.Party(role: .b, password: w, scalar: Spake2.bytes(hex: vector.y))
            XCTAssertEqual(hex(a.share), vector.pA, "pA, A='\(vector.a)' B='\(vector.b)'")
            XCTAssertEqual(hex(b.share), vector.pB, "pB, A='\(vector.a)' B='\(vector.b)'")
            let identities = (Array(vector.a.utf8), Array(vector.b.utf8))
            let ofA = try XCTUnwrap(a.finish(peerShare: b.share, identities: identities, associatedData: []))
            let ofB = try XCTUnwrap(b.finish(peerShare: a.share, identities: identities, associatedData: []))
            XCTAssertEqual(hex(ofA.own), vector.cA)
            XCTAssertEqual(hex(ofB.own), vector.cB)
            XCTAssertTrue(ofA.verify(ofB.own))
            XCTAssertTrue(ofB.verify(ofA.own))
        }
    }

    func testTheSameKeyAgreesAndAnotherDoesNot() throws {
        let key = PartyKey(secret: "correct horse battery")
        let remote = Spake2.Party(role: .a, key: key), broadcaster = Spake2.Party(role: .b, key: key)
        let ofRemote = try XCTUnwrap(remote.finish(peerShare: broadcaster.share))
        let ofBroadcaster = try XCTUnwrap(broadcaster.finish(peerShare: remote.share))
        XCTAssertTrue(ofRemote.verify(ofBroadcaster.own))
        XCTAssertTrue(ofBroadcaster.verify(ofRemote.own))

        let impostor = Spake2.Party(role: .b, key: PartyKey(secret: "correct horse battery!"))
        let againstImpostor = try XCTUnwrap(remote.finish(peerShare: impostor.share))
        let ofImpostor = try XCTUnwrap(impostor.finish(peerShare: remote.share))
        XCTAssertFalse(againstImpostor.verify(ofImpostor.own), "the remote must not accept a broadcaster without the key")
        XCTAssertFalse(ofImpostor.verify(againstImpostor.own))
        // A share reflected back as the other role's proves nothing either.
        let reflected = try XCTUnwrap(remote.finish(peerShare: remote.share))
        XCTAssertFalse(ofBroadcaster.verify(reflected.own))
    }

    func testSharesThatAreNoUsablePointAreRefused() {
        let w = Spake2.password(PartyKey(secret: "correct horse battery"))
        let remote = Spake2.Party(role: .a, password: w, scalar: P256.randomScalar())
        // w·N: a point of the curve, but pB − w·N is the identity, so K would be too.
        let degenerate = P256.multiplyAdd(scalar: [UInt8](repeating: 0, count: 32), other: w, point: Spake2.n)
        XCTAssertEqual(degenerate?.count, P256.pointBytes)
        let offCurve = [4] + [UInt8](repeating: 0xff, count: 64)
        for share in [[], [0], offCurve, [UInt8](repeating: 0, count: 65), Spake2.n, degenerate ?? []] {
            XCTAssertNil(remote.finish(peerShare: share), "share \(hex(share)) was taken")
        }
    }
}
