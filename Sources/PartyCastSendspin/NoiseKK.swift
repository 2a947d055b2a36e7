#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import PartyCastWire

/// The Noise suites aiosendspin 10 offers for `Noise_KKpsk2_<suite>` (its `NoiseCipherSuite`).
public enum NoiseSuite: String, Sendable, CaseIterable {
    case chachaPoly = "25519_ChaChaPoly_SHA256"
    case aesGCM = "25519_AESGCM_SHA256"

    /// The suites this machine accepts: AESGCM only where libsodium has AES-256-GCM (AES-NI on
    /// x86; not on a Raspberry Pi, whose players then use ChaChaPoly).
    public static var available: [NoiseSuite] { NoiseCrypto.aesGCMAvailable ? allCases : [.chachaPoly] }
}

public struct NoiseError: Error, Equatable, Sendable {
    public let reason: String
    init(_ reason: String) { self.reason = reason }
}

/// One direction's cipher (Noise §5.1): a key and a counter nonce, AEAD with the suite's cipher.
struct NoiseCipher: Sendable {
    let suite: NoiseSuite
    var key: [UInt8]?
    var nonce: UInt64 = 0

    /// ChaChaPoly's nonce is 32 zero bits and the counter little-endian; AES-GCM's big-endian.
    private func nonceBytes() -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 4)
        switch suite {
        case .chachaPoly: withUnsafeBytes(of: nonce.littleEndian) { bytes.append(contentsOf: $0) }
        case .aesGCM: withUnsafeBytes(of: nonce.bigEndian) { bytes.append(contentsOf: $0) }
        }
        return bytes
    }

    mutating func encrypt(_ plaintext: [UInt8], ad: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let key else { return plaintext }
        guard nonce < UInt64.max else { throw NoiseError("nonce exhausted") }
        defer { nonce += 1 }
        return try NoiseCrypto.seal(suite, key: key, nonce: nonceBytes(), plaintext, ad: ad)
    }

    mutating func decrypt(_ ciphertext: some Collection<UInt8>, ad: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let key else { return Array(ciphertext) }
        guard nonce < UInt64.max else { throw NoiseError("nonce exhausted") }
        guard ciphertext.count >= NoiseCrypto.tagBytes else { throw NoiseError("a message shorter than its tag") }
        guard let plaintext = NoiseCrypto.open(suite, key: key, nonce: nonceBytes(), Array(ciphertext), ad: ad) else {
            throw NoiseError("a message failed authentication")
        }
        nonce += 1  // only after success: a forged message must not desynchronise the nonces
        return plaintext
    }
}

/// Noise's SymmetricState (§5.2) over libsodium's SHA-256 and HMAC-SHA-256.
struct NoiseSymmetric: Sendable {
    var cipher: NoiseCipher
    var chainingKey: [UInt8]
    var hash: [UInt8]

    init(protocolName: String, suite: NoiseSuite) {
        let name = Array(protocolName.utf8)
        hash = name.count <= 32 ? name + [UInt8](repeating: 0, count: 32 - name.count) : NoiseCrypto.sha256(name)
        chainingKey = hash
        cipher = NoiseCipher(suite: suite)
    }

    /// Noise's HKDF (§4.3): HMAC-SHA256 extract, then up to three chained outputs.
    static func hkdf(_ chainingKey: [UInt8], _ input: [UInt8], outputs: Int) -> [[UInt8]] {
        let temp = SecretKey(chainingKey).hmacSHA256(input)
        var results: [[UInt8]] = []
        var previous: [UInt8] = []
        for index in 1...outputs {
            previous = SecretKey(temp).hmacSHA256(previous + [UInt8(index)])
            results.append(previous)
        }
        return results
    }

    mutating func mixHash(_ data: some Sequence<UInt8>) {
        hash = NoiseCrypto.sha256(hash + Array(data))
    }

    mutating func mixKey(_ input: [UInt8]) {
        let out = Self.hkdf(chainingKey, input, outputs: 2)
        chainingKey = out[0]
        cipher = NoiseCipher(suite: cipher.suite, key: out[1])
    }

    mutating func mixKeyAndHash(_ input: [UInt8]) {
        let out = Self.hkdf(chainingKey, input, outputs: 3)
        chainingKey = out[0]
        mixHash(out[1])
        cipher = NoiseCipher(suite: cipher.suite, key: out[2])
    }

    mutating func encryptAndHash(_ plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        let ciphertext = try cipher.encrypt(plaintext, ad: hash)
        mixHash(ciphertext)
        return ciphertext
    }

    mutating func decryptAndHash(_ ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        let plaintext = try cipher.decrypt(ciphertext, ad: hash)
        mixHash(ciphertext)
        return plaintext
    }

    func split() -> (NoiseCipher, NoiseCipher) {
        let out = Self.hkdf(chainingKey, [], outputs: 2)
        return (NoiseCipher(suite: cipher.suite, key: out[0]), NoiseCipher(suite: cipher.suite, key: out[1]))
    }
}

/// Both directions' ciphers once a handshake is through.
public struct NoiseTransport: Sendable {
    var sending: NoiseCipher
    var receiving: NoiseCipher

    public mutating func seal(_ plaintext: [UInt8]) throws(NoiseError) -> [UInt8] { try sending.encrypt(plaintext, ad: []) }
    public mutating func open(_ ciphertext: some Collection<UInt8>) throws(NoiseError) -> [UInt8] { try receiving.decrypt(ciphertext, ad: []) }
}

/// The initiator of `Noise_KKpsk2_25519_<suite>` (both statics known beforehand; the PSK mixed in at
/// message 2): what a Sendspin server runs. `-> e, es, ss` then `<- e, ee, se, psk`.
public struct NoiseKKInitiator: Sendable {
    private var symmetric: NoiseSymmetric
    private let staticKey: X25519KeyPair
    private let ephemeral: X25519KeyPair
    private let remoteStatic: [UInt8]
    private let psk: [UInt8]

    /// `remoteStatic`: the peer's 32-byte public key (a bad one fails message 1's key agreement).
    public init(suite: NoiseSuite, staticKey: X25519KeyPair, remoteStatic: [UInt8],
                prologue: [UInt8], psk: [UInt8], ephemeral: X25519KeyPair = .init()) {
        symmetric = NoiseSymmetric(protocolName: "Noise_KKpsk2_" + suite.rawValue, suite: suite)
        self.staticKey = staticKey
        self.ephemeral = ephemeral
        self.remoteStatic = remoteStatic
        self.psk = psk
        symmetric.mixHash(prologue)
        symmetric.mixHash(staticKey.publicKey)
        symmetric.mixHash(remoteStatic)
    }

    /// Message 1 carrying `payload`.
    public mutating func writeMessage1(payload: [UInt8]) throws(NoiseError) -> [UInt8] {
        let e = ephemeral.publicKey
        symmetric.mixHash(e)
        symmetric.mixKey(e)  // the psk modifier: `e` also mixes the key
        symmetric.mixKey(try ephemeral.sharedSecret(with: remoteStatic))
        symmetric.mixKey(try staticKey.sharedSecret(with: remoteStatic))
        return e + (try symmetric.encryptAndHash(payload))
    }

    /// Reads message 2 and returns its payload and the transport it keys.
    public mutating func readMessage2(_ message: [UInt8]) throws(NoiseError) -> (payload: [UInt8], transport: NoiseTransport) {
        guard message.count >= 32 + 16 else { throw NoiseError("Noise message 2 is \(message.count) bytes, too short") }
        let re = Array(message.prefix(32))
        symmetric.mixHash(re)
        symmetric.mixKey(re)
        symmetric.mixKey(try ephemeral.sharedSecret(with: re))
        symmetric.mixKey(try staticKey.sharedSecret(with: re))
        symmetric.mixKeyAndHash(psk)
        let payload = try symmetric.decryptAndHash(Array(message.dropFirst(32)))
        let (initiatorToResponder, responderToInitiator) = symmetric.split()
        return (payload, NoiseTransport(sending: initiatorToResponder, receiving: responderToInitiator))
    }
}

/// The responder of the same pattern: what a Sendspin client runs against a server's message 1.
/// The PSK comes after message 1 is read, since that message's payload names it.
public struct NoiseKKResponder: Sendable {
    private var symmetric: NoiseSymmetric
    private let staticKey: X25519KeyPair
    private let ephemeral: X25519KeyPair
    private let remoteStatic: [UInt8]
    private var remoteEphemeral: [UInt8] = []

    public init(suite: NoiseSuite, staticKey: X25519KeyPair, remoteStatic: [UInt8], prologue: [UInt8], ephemeral: X25519KeyPair = .init()) {
        symmetric = NoiseSymmetric(protocolName: "Noise_KKpsk2_" + suite.rawValue, suite: suite)
        self.staticKey = staticKey
        self.ephemeral = ephemeral
        self.remoteStatic = remoteStatic
        symmetric.mixHash(prologue)
        // The pre-messages in pattern order: the initiator's static first.
        symmetric.mixHash(remoteStatic)
        symmetric.mixHash(staticKey.publicKey)
    }

    /// Reads message 1 (`e, es, ss`) and returns its payload.
    public mutating func readMessage1(_ message: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard message.count >= 32 + 16 else { throw NoiseError("Noise message 1 is \(message.count) bytes, too short") }
        let re = Array(message.prefix(32))
        symmetric.mixHash(re)
        symmetric.mixKey(re)  // the psk modifier
        symmetric.mixKey(try staticKey.sharedSecret(with: re))
        symmetric.mixKey(try staticKey.sharedSecret(with: remoteStatic))
        remoteEphemeral = re
        return try symmetric.decryptAndHash(Array(message.dropFirst(32)))
    }

    /// Message 2 (`e, ee, se, psk`) carrying `payload`, and the transport it keys.
    public mutating func writeMessage2(payload: [UInt8], psk: [UInt8]) throws(NoiseError) -> (message: [UInt8], transport: NoiseTransport) {
        guard remoteEphemeral.count == 32 else { throw NoiseError("message 2 before message 1") }
        let e = ephemeral.publicKey
        symmetric.mixHash(e)
        symmetric.mixKey(e)
        symmetric.mixKey(try ephemeral.sharedSecret(with: remoteEphemeral))
        symmetric.mixKey(try ephemeral.sharedSecret(with: remoteStatic))
        symmetric.mixKeyAndHash(psk)
        let message = e + (try symmetric.encryptAndHash(payload))
        let (initiatorToResponder, responderToInitiator) = symmetric.split()
        return (message, NoiseTransport(sending: responderToInitiator, receiving: initiatorToResponder))
    }
}
