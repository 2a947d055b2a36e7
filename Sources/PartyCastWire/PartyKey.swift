import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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

    /// Whether both were derived from the same secret: the remote control's check of a presented key.
    /// Compares the derived keys (never the secrets) in constant time, as SymmetricKey's == does.
    public func matches(_ other: PartyKey) -> Bool {
        key == other.key
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

    /// The key that authenticates one connection's clock datagrams: bound to both nonces of its
    /// handshake, so no other connection (nor a replay of this one later) shares it.
    public func clockKey(listenerNonce: [UInt8], broadcasterNonce: [UInt8]) -> ClockDatagramKey {
        ClockDatagramKey(HKDF<SHA256>.deriveKey(inputKeyMaterial: key, salt: listenerNonce + broadcasterNonce,
                                                info: Array("v3 clock datagrams".utf8), outputByteCount: 32))
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

/// Signs and checks clock datagrams (see `ClockDatagram.mac` in Proto/partycast.proto).
public struct ClockDatagramKey: Sendable {
    public static let tagBytes = 16
    private let key: SymmetricKey

    init(_ key: SymmetricKey) { self.key = key }

    public func sign(_ datagram: inout PCClockDatagram) {
        datagram.mac = Data(tag(datagram).prefix(Self.tagBytes))
    }

    public func verify(_ datagram: PCClockDatagram) -> Bool {
        guard datagram.mac.count == Self.tagBytes else { return false }
        // Compared in constant time: a timing difference must not reveal how much of a forgery matched.
        let expected = tag(datagram).prefix(Self.tagBytes)
        return zip(expected, datagram.mac).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    private func tag(_ datagram: PCClockDatagram) -> HMAC<SHA256>.MAC {
        var bytes = [UInt8]()
        bytes.reserveCapacity(41)
        for field in [datagram.token, datagram.sequence, UInt64(bitPattern: datagram.t1),
                      UInt64(bitPattern: datagram.t2), UInt64(bitPattern: datagram.t3)] {
            withUnsafeBytes(of: field.bigEndian) { bytes.append(contentsOf: $0) }
        }
        bytes.append(datagram.answer ? 1 : 0)
        return HMAC<SHA256>.authenticationCode(for: bytes, using: key)
    }
}
