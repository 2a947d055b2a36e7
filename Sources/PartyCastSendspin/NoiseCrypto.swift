import CSodium
import PartyCastWire

/// An X25519 key pair (libsodium's crypto_scalarmult_curve25519): a Sendspin server's static key,
/// or one handshake's ephemeral.
public struct X25519KeyPair: Sendable {
    let secret: [UInt8]
    /// The public key, 32 bytes as X25519 writes them.
    public let publicKey: [UInt8]

    /// A fresh key from the system's random source.
    public init() {
        _ = SecretKey.sodiumReady
        var secret = [UInt8](repeating: 0, count: Int(crypto_scalarmult_curve25519_SCALARBYTES))
        randombytes_buf(&secret, secret.count)
        var publicKey = [UInt8](repeating: 0, count: Int(crypto_scalarmult_curve25519_BYTES))
        // Fails only for an all-zero result, which no clamped scalar times the base point gives.
        precondition(crypto_scalarmult_curve25519_base(&publicKey, secret) == 0)
        self.secret = secret
        self.publicKey = publicKey
    }

    /// The shared secret with a peer's public key (Noise's DH). libsodium refuses an all-zero
    /// result (a low-order peer key): that fails the handshake.
    func sharedSecret(with peer: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard peer.count == Int(crypto_scalarmult_curve25519_BYTES) else { throw NoiseError("a peer key of \(peer.count) bytes") }
        var shared = [UInt8](repeating: 0, count: Int(crypto_scalarmult_curve25519_BYTES))
        guard crypto_scalarmult_curve25519(&shared, secret, peer) == 0 else { throw NoiseError("a key agreement failed (a low-order key?)") }
        return shared
    }
}

/// The hash and AEAD calls Noise's suites need, on libsodium.
enum NoiseCrypto {
    static let tagBytes = 16

    static func sha256(_ data: [UInt8]) -> [UInt8] {
        _ = SecretKey.sodiumReady
        var digest = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        _ = crypto_hash_sha256(&digest, data, UInt64(data.count))  // no failure mode: returns 0
        return digest
    }

    /// Whether this machine can run AES-256-GCM: libsodium has it only with AES-NI (x86), not on a
    /// Raspberry Pi's ARM, where the AESGCM suite is then neither offered nor accepted.
    static let aesGCMAvailable: Bool = {
        _ = SecretKey.sodiumReady
        return crypto_aead_aes256gcm_is_available() == 1
    }()

    /// Ciphertext ‖ tag, as Noise's ENCRYPT returns it. Key 32 bytes, nonce 12.
    static func seal(_ suite: NoiseSuite, key: [UInt8], nonce: [UInt8], _ plaintext: [UInt8], ad: [UInt8]) throws(NoiseError) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: plaintext.count + tagBytes)
        var written: UInt64 = 0
        let status: Int32
        switch suite {
        case .chachaPoly:
            status = crypto_aead_chacha20poly1305_ietf_encrypt(&output, &written, plaintext, UInt64(plaintext.count), ad, UInt64(ad.count), nil, nonce, key)
        case .aesGCM:
            guard aesGCMAvailable else { throw NoiseError("AES-256-GCM is not available on this machine") }
            status = crypto_aead_aes256gcm_encrypt(&output, &written, plaintext, UInt64(plaintext.count), ad, UInt64(ad.count), nil, nonce, key)
        }
        guard status == 0, written == UInt64(output.count) else { throw NoiseError("encryption failed") }
        return output
    }

    /// The plaintext of ciphertext ‖ tag, or nil when it fails authentication.
    static func open(_ suite: NoiseSuite, key: [UInt8], nonce: [UInt8], _ sealed: [UInt8], ad: [UInt8]) -> [UInt8]? {
        guard sealed.count >= tagBytes else { return nil }
        // One spare byte: an empty plaintext still gets a buffer to point at.
        var output = [UInt8](repeating: 0, count: sealed.count - tagBytes + 1)
        var written: UInt64 = 0
        let status: Int32
        switch suite {
        case .chachaPoly:
            status = crypto_aead_chacha20poly1305_ietf_decrypt(&output, &written, nil, sealed, UInt64(sealed.count), ad, UInt64(ad.count), nonce, key)
        case .aesGCM:
            guard aesGCMAvailable else { return nil }
            status = crypto_aead_aes256gcm_decrypt(&output, &written, nil, sealed, UInt64(sealed.count), ad, UInt64(ad.count), nonce, key)
        }
        guard status == 0, written == UInt64(sealed.count - tagBytes) else { return nil }
        return Array(output.prefix(Int(written)))
    }
}
