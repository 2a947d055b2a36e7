import CSodium

/// Key material, and the libsodium calls that use it: the keyed hash that derives keys, HMAC-SHA-256
/// and HMAC-SHA-512. Everything secret is compared in constant time (sodium_memcmp), so a timing
/// difference never tells how much of a guess or a forgery matched.
public struct SecretKey: Sendable, Equatable {
    let bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public static func == (lhs: SecretKey, rhs: SecretKey) -> Bool { constantTimeEqual(lhs.bytes, rhs.bytes) }

    /// libsodium must be initialised once before use (it picks its implementations and opens its random
    /// source); its own call is idempotent and thread-safe. -1: no system random source, nothing is safe.
    public static let sodiumReady: Void = {
        precondition(sodium_init() >= 0, "libsodium could not initialise (no system random source)")
    }()

    /// A 32-byte key for one purpose: BLAKE2b (crypto_generichash) keyed with `key` (16 to 64 bytes,
    /// high-entropy or a fixed label) over `message`. What libsodium 1.0.18 offers for deriving keys of
    /// arbitrary inputs (its HKDF arrived in 1.0.19).
    static func derived(key: [UInt8], message: [UInt8]) -> SecretKey {
        _ = sodiumReady
        precondition((Int(crypto_generichash_KEYBYTES_MIN)...Int(crypto_generichash_KEYBYTES_MAX)).contains(key.count))
        var output = [UInt8](repeating: 0, count: 32)
        // Fails only for out-of-range lengths, ruled out above.
        let status = crypto_generichash(&output, output.count, message, UInt64(message.count), key, key.count)
        precondition(status == 0)
        return SecretKey(output)
    }

    /// HMAC-SHA-256 of `message` under this key, of any length.
    public func hmacSHA256(_ message: [UInt8]) -> [UInt8] {
        _ = SecretKey.sodiumReady
        var state = crypto_auth_hmacsha256_state()
        var tag = [UInt8](repeating: 0, count: Int(crypto_auth_hmacsha256_BYTES))
        // The streaming calls return 0 always; they take keys of any length (hashing long ones, as HMAC does).
        _ = crypto_auth_hmacsha256_init(&state, bytes, bytes.count)
        _ = crypto_auth_hmacsha256_update(&state, message, UInt64(message.count))
        _ = crypto_auth_hmacsha256_final(&state, &tag)
        return tag
    }

    /// HMAC-SHA-512 of `message` under this key, of any length.
    func hmacSHA512(_ message: [UInt8]) -> [UInt8] {
        _ = SecretKey.sodiumReady
        var state = crypto_auth_hmacsha512_state()
        var tag = [UInt8](repeating: 0, count: Int(crypto_auth_hmacsha512_BYTES))
        // The streaming calls return 0 always; they take keys of any length (hashing long ones, as HMAC does).
        _ = crypto_auth_hmacsha512_init(&state, bytes, bytes.count)
        _ = crypto_auth_hmacsha512_update(&state, message, UInt64(message.count))
        _ = crypto_auth_hmacsha512_final(&state, &tag)
        return tag
    }
}

/// Whether two byte strings are equal, in time that depends only on their length.
func constantTimeEqual(_ lhs: some Collection<UInt8>, _ rhs: some Collection<UInt8>) -> Bool {
    let (left, right) = (Array(lhs), Array(rhs))
    return left.count == right.count && sodium_memcmp(left, right, left.count) == 0
}
