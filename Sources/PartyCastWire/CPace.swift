import CSodium

/// CPace, the balanced PAKE of draft-irtf-cfrg-cpace, in its CPACE-RISTR255-SHA512 suite: pure
/// functions over bytes, the group and hash from libsodium, the string encodings from the draft.
///
/// Both sides derive a generator from the password (PRS) and send a multiple of it; each share is a
/// random point to anyone without the password, and each guess at the password needs a fresh run
/// with one of the two parties: a transcript, or a connection made without it, yields no offline test.
public enum CPace {
    /// G_Ristretto255.DSI.
    public static let domainSeparator = Array("CPaceRistretto255".utf8)
    /// Encoded points and scalars.
    public static let pointBytes = Int(crypto_core_ristretto255_BYTES)
    public static let scalarBytes = Int(crypto_core_ristretto255_SCALARBYTES)
    /// SHA-512's input block size (H.s_in_bytes), which pads the generator string.
    static let hashBlockBytes = 128

    /// prepend_len: the length as LEB128, then the bytes.
    public static func prependLength(_ data: [UInt8]) -> [UInt8] {
        var length = data.count
        var encoded: [UInt8] = []
        repeat {
            encoded.append(length < 128 ? UInt8(length) : UInt8(length & 0x7f) | 0x80)
            length >>= 7
        } while length > 0
        return encoded + data
    }

    /// lv_cat: every part with its length prepended.
    public static func lengthValueConcatenation(_ parts: [UInt8]...) -> [UInt8] {
        parts.flatMap(prependLength)
    }

    /// generator_string(DSI, PRS, CI, sid, s_in_bytes): zero padding fills the first hash block
    /// after DSI and PRS.
    public static func generatorString(password: [UInt8], channel: [UInt8], sessionID: [UInt8]) -> [UInt8] {
        let padding = max(0, hashBlockBytes - 1 - prependLength(password).count - prependLength(domainSeparator).count)
        return lengthValueConcatenation(domainSeparator, password, [UInt8](repeating: 0, count: padding), channel, sessionID)
    }

    public static func sha512(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(crypto_hash_sha512_BYTES))
        // crypto_hash_sha512 returns 0 always (it has no failure mode).
        _ = crypto_hash_sha512(&digest, bytes, UInt64(bytes.count))
        return digest
    }

    /// G.calculate_generator(H, PRS, CI, sid): the encoded generator, from ristretto255's element
    /// derivation (crypto_core_ristretto255_from_hash) of the hashed generator string.
    public static func generator(password: [UInt8], channel: [UInt8], sessionID: [UInt8]) -> [UInt8] {
        let hash = sha512(generatorString(password: password, channel: channel, sessionID: sessionID))
        var point = [UInt8](repeating: 0, count: pointBytes)
        // Returns 0 always: every 64-byte string maps to a point.
        _ = crypto_core_ristretto255_from_hash(&point, hash)
        return point
    }

    /// G.sample_scalar(): uniform in ]0, group order[ (the draft's alternative to masked bytes).
    public static func sampleScalar() -> [UInt8] {
        _ = SecretKey.sodiumReady
        var scalar = [UInt8](repeating: 0, count: scalarBytes)
        crypto_core_ristretto255_scalar_random(&scalar)
        return scalar
    }

    /// G.scalar_mult_vfy(y, X): y·X encoded, or nil (the draft's G.I) when X does not decode to a
    /// group element or the product is the identity. libsodium's crypto_scalarmult_ristretto255 makes
    /// exactly these checks. Also serves as G.scalar_mult for a share: the generator always decodes.
    public static func multiply(scalar: [UInt8], point: [UInt8]) -> [UInt8]? {
        guard scalar.count == scalarBytes, point.count == pointBytes else { return nil }
        var product = [UInt8](repeating: 0, count: pointBytes)
        guard crypto_scalarmult_ristretto255(&product, scalar, point) == 0 else { return nil }
        return product
    }

    /// transcript_ir(Ya, ADa, Yb, ADb), for the initiator-responder setting PartyCast uses.
    public static func initiatorResponderTranscript(initiatorShare: [UInt8], initiatorData: [UInt8],
                                                    responderShare: [UInt8], responderData: [UInt8]) -> [UInt8] {
        lengthValueConcatenation(initiatorShare, initiatorData) + lengthValueConcatenation(responderShare, responderData)
    }

    /// ISK = H.hash(lv_cat(DSI ‖ "_ISK", sid, K) ‖ transcript). K itself never leaves this function's caller.
    public static func intermediateSessionKey(sessionID: [UInt8], sharedPoint: [UInt8], transcript: [UInt8]) -> [UInt8] {
        sha512(lengthValueConcatenation(domainSeparator + Array("_ISK".utf8), sessionID, sharedPoint) + transcript)
    }

    /// The key-confirmation MAC key of the draft's "Key confirmation" section:
    /// mac_key = H.hash("CPaceMac" ‖ sid ‖ ISK).
    public static func confirmationKey(sessionID: [UInt8], intermediateSessionKey: [UInt8]) -> [UInt8] {
        sha512(Array("CPaceMac".utf8) + sessionID + intermediateSessionKey)
    }
}
