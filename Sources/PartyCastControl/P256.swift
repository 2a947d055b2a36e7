import CLibCrypto

/// What SPAKE2's P256-SHA256-HKDF-HMAC suite needs, from OpenSSL's libcrypto, over bytes: points
/// as uncompressed SEC1 (65 bytes), scalars as 32 big-endian bytes. Each call makes its own
/// group and frees everything it made (`Scope`), so nothing here is shared between threads.
enum P256 {
    static let pointBytes = 65
    static let scalarBytes = 32

    /// Big-endian bytes of any length, reduced modulo the group's order.
    static func reduce(_ bytes: [UInt8]) -> [UInt8] {
        Scope.run { scope in scope.scalarBytes(scope.reduced(scope.number(bytes))) }
    }

    /// Uniform in [1, order): libcrypto's private random range over [0, order − 1), plus one.
    static func randomScalar() -> [UInt8] {
        Scope.run { scope in
            let range = scope.newNumber(), scalar = scope.newNumber()
            BN_sub(range, EC_GROUP_get0_order(scope.group), BN_value_one())
            // Fails only when the process has no entropy, which nothing here could answer.
            precondition(BN_priv_rand_range(scalar, range) == 1, "libcrypto has no randomness")
            BN_add(scalar, scalar, BN_value_one())
            return scope.scalarBytes(scalar)
        }
    }

    /// scalar·G + other·point, each product on its own (libcrypto's single-point multiplication is
    /// constant-time; its two-point one is not).
    static func multiplyAdd(scalar: [UInt8], other: [UInt8], point: [UInt8]) -> [UInt8]? {
        Scope.run { scope in
            guard let point = scope.point(point) else { return nil }
            let sum = scope.multiply(nil, by: scope.number(scalar))
            EC_POINT_add(scope.group, sum, sum, scope.multiply(point, by: scope.number(other)), scope.context)
            return scope.pointBytes(sum)
        }
    }

    /// scalar·(peer − other·point): nil when `peer` is no point of the curve, or the result is the
    /// identity (RFC 9382's abort on an invalid share).
    static func unmaskMultiply(scalar: [UInt8], peer: [UInt8], other: [UInt8], point: [UInt8]) -> [UInt8]? {
        Scope.run { scope in
            guard let peer = scope.point(peer), let point = scope.point(point) else { return nil }
            let mask = scope.multiply(point, by: scope.number(other))
            EC_POINT_invert(scope.group, mask, scope.context)
            EC_POINT_add(scope.group, mask, peer, mask, scope.context)
            let product = scope.multiply(mask, by: scope.number(scalar))
            return EC_POINT_is_at_infinity(scope.group, product) == 1 ? nil : scope.pointBytes(product)
        }
    }

    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        precondition(EVP_Digest(bytes, bytes.count, &digest, &length, EVP_sha256(), nil) == 1, "libcrypto has no SHA-256")
        return digest
    }

    static func hmac(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        var tag = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        precondition(HMAC(EVP_sha256(), key, Int32(key.count), message, message.count, &tag, &length) != nil, "libcrypto has no HMAC")
        return tag
    }

    /// HKDF-SHA256 (RFC 5869) without salt.
    static func hkdf(_ secret: [UInt8], info: [UInt8], count: Int) -> [UInt8] {
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nil) else { preconditionFailure("libcrypto has no HKDF") }
        defer { EVP_PKEY_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: count)
        var length = count
        precondition(EVP_PKEY_derive_init(context) == 1 && EVP_PKEY_CTX_set_hkdf_md(context, EVP_sha256()) == 1
                     && EVP_PKEY_CTX_set1_hkdf_key(context, secret, Int32(secret.count)) == 1
                     && EVP_PKEY_CTX_add1_hkdf_info(context, info, Int32(info.count)) == 1
                     && EVP_PKEY_derive(context, &output, &length) == 1 && length == count, "libcrypto's HKDF failed")
        return output
    }

    /// The group and what one computation allocates, freed together when it ends.
    private final class Scope {
        let group: OpaquePointer
        let context: OpaquePointer
        private var numbers: [OpaquePointer] = []
        private var points: [OpaquePointer] = []

        static func run<T>(_ body: (Scope) -> T) -> T { body(Scope()) }

        private init() {
            guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1), let context = BN_CTX_new() else {
                preconditionFailure("libcrypto has no P-256")
            }
            self.group = group
            self.context = context
        }

        deinit {
            numbers.forEach { BN_clear_free($0) }
            points.forEach { EC_POINT_clear_free($0) }
            BN_CTX_free(context)
            EC_GROUP_free(group)
        }

        func newNumber() -> OpaquePointer {
            guard let number = BN_new() else { preconditionFailure("out of memory") }
            numbers.append(number)
            return number
        }

        func number(_ bytes: [UInt8]) -> OpaquePointer {
            let number = newNumber()
            BN_bin2bn(bytes, Int32(bytes.count), number)
            return number
        }

        func reduced(_ number: OpaquePointer) -> OpaquePointer {
            let remainder = newNumber()
            BN_div(nil, remainder, number, EC_GROUP_get0_order(group), context)
            return remainder
        }

        func scalarBytes(_ number: OpaquePointer) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: P256.scalarBytes)
            BN_bn2binpad(number, &bytes, Int32(P256.scalarBytes))
            return bytes
        }

        func newPoint() -> OpaquePointer {
            guard let point = EC_POINT_new(group) else { preconditionFailure("out of memory") }
            points.append(point)
            return point
        }

        /// A point of the curve other than the identity, from SEC1 bytes (either form), or nil.
        func point(_ bytes: [UInt8]) -> OpaquePointer? {
            let point = newPoint()
            guard EC_POINT_oct2point(group, point, bytes, bytes.count, context) == 1,
                  EC_POINT_is_on_curve(group, point, context) == 1, EC_POINT_is_at_infinity(group, point) == 0 else { return nil }
            return point
        }

        /// number·point, or number·G for nil.
        func multiply(_ point: OpaquePointer?, by number: OpaquePointer) -> OpaquePointer {
            let product = newPoint()
            let done = point.map { EC_POINT_mul(group, product, nil, $0, number, context) } ?? EC_POINT_mul(group, product, number, nil, nil, context)
            precondition(done == 1, "libcrypto's P-256 multiplication failed")
            return product
        }

        func pointBytes(_ point: OpaquePointer) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: P256.pointBytes)
            let written = EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, &bytes, bytes.count, context)
            return Array(bytes.prefix(written))
        }
    }
}
