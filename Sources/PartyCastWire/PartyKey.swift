import Crypto

/// A private party's shared secret and the handshake that proves it, both ways, without sending it.
///
/// Each side proves it holds the key by an HMAC over both sides' fresh random nonces, tagged with its
/// role, so a proof is good for one connection only: a captured handshake replayed to either side
/// meets a new nonce and fails, and no two handshakes share key-derived bytes. The broadcaster proves
/// first, so a listener never answers an impostor's challenge. The key itself never leaves the host.
public struct PartyKey: Sendable {
    public static let nonceBytes = 32
    private let key: SymmetricKey

    /// Derives the MAC key from the passphrase with HKDF, so the passphrase never keys HMAC directly.
    public init(secret: String) {
        key = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: Array(secret.utf8)),
                                     salt: Array("PartyCast party key".utf8), info: Array("v2 handshake".utf8),
                                     outputByteCount: 32)
    }

    /// 32 bytes from the system's cryptographic random source.
    public static func freshNonce() -> [UInt8] {
        SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
    }

    public func broadcasterProof(listenerNonce: [UInt8], broadcasterNonce: [UInt8]) -> [UInt8] {
        mac("partycast broadcaster", listenerNonce, broadcasterNonce)
    }

    public func listenerProof(listenerNonce: [UInt8], broadcasterNonce: [UInt8]) -> [UInt8] {
        mac("partycast listener", broadcasterNonce, listenerNonce)
    }

    /// Whether `proof` is the broadcaster's for these nonces (constant-time comparison).
    public func verifyBroadcaster(_ proof: some Collection<UInt8>, listenerNonce: [UInt8], broadcasterNonce: [UInt8]) -> Bool {
        verify(proof, "partycast broadcaster", listenerNonce, broadcasterNonce)
    }

    public func verifyListener(_ proof: some Collection<UInt8>, listenerNonce: [UInt8], broadcasterNonce: [UInt8]) -> Bool {
        verify(proof, "partycast listener", broadcasterNonce, listenerNonce)
    }

    private func mac(_ role: String, _ first: [UInt8], _ second: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Array(role.utf8) + first + second, using: key))
    }

    private func verify(_ proof: some Collection<UInt8>, _ role: String, _ first: [UInt8], _ second: [UInt8]) -> Bool {
        // Nonces of any other length never come from a PartyCast peer; refusing them keeps a replayed
        // or truncated field from being MACed at all.
        guard first.count == Self.nonceBytes, second.count == Self.nonceBytes else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(Array(proof), authenticating: Array(role.utf8) + first + second, using: key)
    }
}
