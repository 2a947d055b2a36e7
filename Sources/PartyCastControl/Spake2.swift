import CLibCrypto
import PartyCastWire

/// SPAKE2 (RFC 9382) in its SPAKE2-P256-SHA256-HKDF-HMAC suite: how a remote (role A; `ctl` or the
/// page) proves the party key to the broadcaster (role B) on the control port, and B proves it back:
///
///     remote → POST /api/session { sessionID, share pA }
///     broadcaster → { share pB, confirmation cB }       (pA has committed the remote to one guess)
///     remote → POST /api/session/confirm { sessionID, confirmation cA }    (only once cB verified)
///     broadcaster → { token }
///
/// pA = x·G + w·M and pB = y·G + w·N are random points to anyone without the key's w: a recorded run
/// tests no guess offline (that needs x or y), and a run with either side tests one guess, online,
/// which the address's throttle prices. The page runs the same protocol (Web/spake2.js).
public enum Spake2 {
    public enum Role: Sendable { case a, b }

    /// The suite's fixed points for P-256 (RFC 9382, section 6), compressed SEC1.
    static let m = bytes(hex: "02886e2f97ace46e55ba9dd7242579f2993b64e16ef3dcab95afd497333d8fa12f")
    static let n = bytes(hex: "03d8bbd6c639c62937b04d997f38c3770719c629d7014d49a24b4f98baa1292b49")
    /// The identities and the AAD: fixed, known to both sides, never sent. Naming the roles keeps a
    /// share from being reflected back as the other role's; the AAD binds the run to this use.
    static let remoteIdentity = Array("partycast remote".utf8)
    static let broadcasterIdentity = Array("partycast broadcaster".utf8)
    static let associatedData = Array("PartyCast remote control".utf8)
    /// w's info for HKDF: the key is a passphrase the party's guests type, not a stored verifier, so
    /// no memory-hard function: every guess costs a run with the broadcaster instead.
    static let passwordInfo = Array("PartyCast remote control SPAKE2 w".utf8)

    /// w = HKDF-SHA256(key, 48 bytes) mod the group's order: 128 bits over the order's 256, so the
    /// reduction leaves no bias worth a guess.
    static func password(_ key: PartyKey) -> [UInt8] {
        P256.reduce(P256.hkdf(key.password, info: passwordInfo, count: 48))
    }

    /// One side of one run: its secret scalar and the share it sends.
    public struct Party: Sendable {
        public let role: Role
        public let share: [UInt8]
        private let scalar: [UInt8]
        private let password: [UInt8]

        public init(role: Role, key: PartyKey) {
            self.init(role: role, password: Spake2.password(key), scalar: P256.randomScalar())
        }

        init(role: Role, password: [UInt8], scalar: [UInt8]) {
            self.role = role
            self.password = password
            self.scalar = scalar
            // M and N are valid points, so this fails only if libcrypto does; an empty share is refused by the peer.
            share = P256.multiplyAdd(scalar: scalar, other: password, point: role == .a ? Spake2.m : Spake2.n) ?? []
        }

        /// The run's confirmations from the peer's share, or nil when that share is no point of the
        /// curve, the identity, or leaves K the identity (RFC 9382's aborts).
        public func finish(peerShare: [UInt8]) -> Confirmations? {
            finish(peerShare: peerShare, identities: (Spake2.remoteIdentity, Spake2.broadcasterIdentity), associatedData: Spake2.associatedData)
        }

        func finish(peerShare: [UInt8], identities: ([UInt8], [UInt8]), associatedData: [UInt8]) -> Confirmations? {
            guard peerShare.count == P256.pointBytes, peerShare.first == 4,
                  let k = P256.unmaskMultiply(scalar: scalar, peer: peerShare, other: password, point: role == .a ? Spake2.n : Spake2.m)
            else { return nil }
            let (shareA, shareB) = role == .a ? (share, peerShare) : (peerShare, share)
            // TT: each part after its length, 8 bytes little-endian.
            let transcript = [identities.0, identities.1, shareA, shareB, k, password].flatMap { part in
                withUnsafeBytes(of: UInt64(part.count).littleEndian, Array.init) + part
            }
            // Ke ‖ Ka = Hash(TT); KcA ‖ KcB = KDF(Ka, "ConfirmationKeys" ‖ AAD); cX = MAC(KcX, TT).
            // Ke, the session key, has no use here: the token is what the run earns.
            let ka = Array(P256.sha256(transcript).suffix(16))
            let confirmationKeys = P256.hkdf(ka, info: Array("ConfirmationKeys".utf8) + associatedData, count: 32)
            let a = P256.hmac(key: Array(confirmationKeys.prefix(16)), transcript)
            let b = P256.hmac(key: Array(confirmationKeys.suffix(16)), transcript)
            return role == .a ? Confirmations(own: a, expected: b) : Confirmations(own: b, expected: a)
        }
    }

    public struct Confirmations: Sendable {
        /// What this side sends.
        public let own: [UInt8]
        /// What the peer must send back.
        let expected: [UInt8]

        /// Whether the peer's confirmation is the expected one, compared in constant time.
        public func verify(_ peer: [UInt8]) -> Bool {
            peer.count == expected.count && CRYPTO_memcmp(peer, expected, expected.count) == 0
        }
    }

    static func bytes(hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex, let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex), let byte = UInt8(hex[index..<next], radix: 16) {
            bytes.append(byte)
            index = next
        }
        return bytes
    }
}
