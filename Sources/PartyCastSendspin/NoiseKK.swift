import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The Noise suites aiosendspin 10 offers for `Noise_KKpsk2_<suite>` (its `NoiseCipherSuite`).
public enum NoiseSuite: String, Sendable, CaseIterable {
    case chachaPoly = "25519_ChaChaPoly_SHA256"
    case aesGCM = "25519_AESGCM_SHA256"
}

public struct NoiseError: Error, Equatable, Sendable {
    public let reason: String
    init(_ reason: String) { self.reason = reason }
}

/// One direction's cipher (Noise §5.1): a key and a counter nonce, AEAD with the suite's cipher.
struct NoiseCipher: Sendable {
    let suite: NoiseSuite
    var key: SymmetricKey?
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
        do {
            switch suite {
            case .chachaPoly:
                let box = try ChaChaPoly.seal(plaintext, using: key, nonce: try ChaChaPoly.Nonce(data: nonceBytes()), authenticating: ad)
                return Array(box.ciphertext) + Array(box.tag)
            case .aesGCM:
                let box = try AES.GCM.seal(plaintext, using: key, nonce: try AES.GCM.Nonce(data: nonceBytes()), authenticating: ad)
                return Array(box.ciphertext) + Array(box.tag)
            }
        } catch {
            throw NoiseError("encryption failed: \(error)")
        }
    }

    mutating func decrypt(_ ciphertext: some Collection<UInt8>, ad: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let key else { return Array(ciphertext) }
        guard nonce < UInt64.max else { throw NoiseError("nonce exhausted") }
        guard ciphertext.count >= 16 else { throw NoiseError("a message shorter than its tag") }
        let body = Array(ciphertext.dropLast(16)), tag = Array(ciphertext.suffix(16))
        let plaintext: Data
        do {
            switch suite {
            case .chachaPoly:
                plaintext = try ChaChaPoly.open(try ChaChaPoly.SealedBox(nonce: try ChaChaPoly.Nonce(data: nonceBytes()), ciphertext: body, tag: tag),
                                                using: key, authenticating: ad)
            case .aesGCM:
                plaintext = try AES.GCM.open(try AES.GCM.SealedBox(nonce: try AES.GCM.Nonce(data: nonceBytes()), ciphertext: body, tag: tag),
                                             using: key, authenticating: ad)
            }
        } catch {
            throw NoiseError("a message failed authentication")
        }
        nonce += 1  // only after success: a forged message must not desynchronise the nonces
        return Array(plaintext)
    }
}

/// Noise's SymmetricState (§5.2) over SHA-256 and HMAC from swift-crypto.
struct NoiseSymmetric: Sendable {
    var cipher: NoiseCipher
    var chainingKey: [UInt8]
    var hash: [UInt8]

    init(protocolName: String, suite: NoiseSuite) {
        let name = Array(protocolName.utf8)
        hash = name.count <= 32 ? name + [UInt8](repeating: 0, count: 32 - name.count) : Array(SHA256.hash(data: name))
        chainingKey = hash
        cipher = NoiseCipher(suite: suite)
    }

    /// Noise's HKDF (§4.3): HMAC-SHA256 extract, then up to three chained outputs.
    static func hkdf(_ chainingKey: [UInt8], _ input: [UInt8], outputs: Int) -> [[UInt8]] {
        let temp = SymmetricKey(data: Array(HMAC<SHA256>.authenticationCode(for: input, using: SymmetricKey(data: chainingKey))))
        var results: [[UInt8]] = []
        var previous: [UInt8] = []
        for index in 1...outputs {
            previous = Array(HMAC<SHA256>.authenticationCode(for: previous + [UInt8(index)], using: temp))
            results.append(previous)
        }
        return results
    }

    mutating func mixHash(_ data: some Sequence<UInt8>) {
        hash = Array(SHA256.hash(data: hash + Array(data)))
    }

    mutating func mixKey(_ input: [UInt8]) {
        let out = Self.hkdf(chainingKey, input, outputs: 2)
        chainingKey = out[0]
        cipher = NoiseCipher(suite: cipher.suite, key: SymmetricKey(data: out[1]))
    }

    mutating func mixKeyAndHash(_ input: [UInt8]) {
        let out = Self.hkdf(chainingKey, input, outputs: 3)
        chainingKey = out[0]
        mixHash(out[1])
        cipher = NoiseCipher(suite: cipher.suite, key: SymmetricKey(data: out[2]))
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
        return (NoiseCipher(suite: cipher.suite, key: SymmetricKey(data: out[0])), NoiseCipher(suite: cipher.suite, key: SymmetricKey(data: out[1])))
    }
}

/// The initiator of `Noise_KKpsk2_25519_<suite>` (both statics known beforehand; the PSK mixed in at
/// message 2): what a Sendspin server runs. `-> e, es, ss` then `<- e, ee, se, psk`.
public struct NoiseKKInitiator: Sendable {
    public struct Transport: Sendable {
        var sending: NoiseCipher
        var receiving: NoiseCipher

        public mutating func seal(_ plaintext: [UInt8]) throws(NoiseError) -> [UInt8] { try sending.encrypt(plaintext, ad: []) }
        public mutating func open(_ ciphertext: some Collection<UInt8>) throws(NoiseError) -> [UInt8] { try receiving.decrypt(ciphertext, ad: []) }
    }

    private var symmetric: NoiseSymmetric
    private let staticKey: Curve25519.KeyAgreement.PrivateKey
    private let ephemeral: Curve25519.KeyAgreement.PrivateKey
    private let remoteStatic: Curve25519.KeyAgreement.PublicKey
    private let psk: [UInt8]

    public init(suite: NoiseSuite, staticKey: Curve25519.KeyAgreement.PrivateKey, remoteStatic: Curve25519.KeyAgreement.PublicKey,
                prologue: [UInt8], psk: [UInt8], ephemeral: Curve25519.KeyAgreement.PrivateKey = .init()) {
        symmetric = NoiseSymmetric(protocolName: "Noise_KKpsk2_" + suite.rawValue, suite: suite)
        self.staticKey = staticKey
        self.ephemeral = ephemeral
        self.remoteStatic = remoteStatic
        self.psk = psk
        symmetric.mixHash(prologue)
        symmetric.mixHash(staticKey.publicKey.rawRepresentation)
        symmetric.mixHash(remoteStatic.rawRepresentation)
    }

    static func dh(_ key: Curve25519.KeyAgreement.PrivateKey, _ peer: Curve25519.KeyAgreement.PublicKey) throws(NoiseError) -> [UInt8] {
        do {
            return try key.sharedSecretFromKeyAgreement(with: peer).withUnsafeBytes { Array($0) }
        } catch {
            throw NoiseError("a key agreement failed (a low-order key?)")
        }
    }

    /// Message 1 carrying `payload`.
    public mutating func writeMessage1(payload: [UInt8]) throws(NoiseError) -> [UInt8] {
        let e = Array(ephemeral.publicKey.rawRepresentation)
        symmetric.mixHash(e)
        symmetric.mixKey(e)  // the psk modifier: `e` also mixes the key
        symmetric.mixKey(try Self.dh(ephemeral, remoteStatic))
        symmetric.mixKey(try Self.dh(staticKey, remoteStatic))
        return e + (try symmetric.encryptAndHash(payload))
    }

    /// Reads message 2 and returns its payload and the transport it keys.
    public mutating func readMessage2(_ message: [UInt8]) throws(NoiseError) -> (payload: [UInt8], transport: Transport) {
        guard message.count >= 32 + 16 else { throw NoiseError("Noise message 2 is \(message.count) bytes, too short") }
        let re = Array(message.prefix(32))
        let remoteEphemeral: Curve25519.KeyAgreement.PublicKey
        do { remoteEphemeral = try .init(rawRepresentation: re) } catch { throw NoiseError("a malformed ephemeral key") }
        symmetric.mixHash(re)
        symmetric.mixKey(re)
        symmetric.mixKey(try Self.dh(ephemeral, remoteEphemeral))
        symmetric.mixKey(try Self.dh(staticKey, remoteEphemeral))
        symmetric.mixKeyAndHash(psk)
        let payload = try symmetric.decryptAndHash(Array(message.dropFirst(32)))
        let (initiatorToResponder, responderToInitiator) = symmetric.split()
        return (payload, Transport(sending: initiatorToResponder, receiving: responderToInitiator))
    }
}
