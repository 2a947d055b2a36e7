#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A private party's shared secret. It never leaves the host: the stream's handshake runs CPace over
/// it (`KeyHandshake`), the control port's SPAKE2 (PartyCastControl's `Spake2`), so what crosses the
/// network are random-looking points and MACs under keys that only a run with the right secret yields.
public struct PartyKey: Sendable {
    /// CPace's PRS: the passphrase as typed, in UTF-8; also what the control port's SPAKE2 derives w from.
    package let password: [UInt8]

    public init(secret: String) {
        password = Array(secret.utf8)
    }
}

/// The stream's key handshake: CPace (draft-irtf-cfrg-cpace, initiator-responder setting) with the
/// listener as initiator A and the broadcaster as responder B, then the draft's explicit key
/// confirmation, responder first:
///
///     listener → Hello { session_id, listener_share Ya }
///     broadcaster → KeyChallenge { broadcaster_share Yb, broadcaster_confirmation Tb }
///     listener → KeyProof { listener_confirmation Ta }       (only once Tb verified)
///     … every byte after that, both ways, sealed under keys from ISK (`SessionRecords`).
///
/// The broadcaster confirms only after it holds the listener's share, which commits the listener to
/// one guess of the key: Tb is useless to anyone who cannot compute ISK from Ya's secret scalar and
/// the right key, so a connection without the key, or a recorded one, tests one guess at most, online.
public enum KeyHandshake {
    /// CPace's CI: binds every run to this protocol, so no other protocol's run can be relayed into ours.
    static let channel = Array("PartyCast stream protocol \(partyCastProtocolVersion)".utf8)
    /// ADa and ADb: each role's name (never sent; both sides know them), so a share is never
    /// accepted back as its own role's (the draft's guidance on role information).
    static let listenerData = Array("PartyCast listener".utf8)
    static let broadcasterData = Array("PartyCast broadcaster".utf8)
    /// The listener's fresh random sid; 16 bytes as in the draft's examples.
    public static let sessionIDBytes = 16
    /// HMAC-SHA-512 tags, whole.
    public static let confirmationBytes = 64

    /// The listener's side, from its Hello to its KeyProof.
    public struct Initiator: Sendable {
        public let sessionID: [UInt8]
        /// Ya, for the Hello.
        public let share: [UInt8]
        private let scalar: [UInt8]

        public init(key: PartyKey, sessionID: [UInt8] = randomBytes(KeyHandshake.sessionIDBytes)) {
            self.init(key: key, sessionID: sessionID, scalar: CPace.sampleScalar())
        }

        init(key: PartyKey, sessionID: [UInt8], scalar: [UInt8]) {
            self.sessionID = sessionID
            self.scalar = scalar
            let generator = CPace.generator(password: key.password, channel: KeyHandshake.channel, sessionID: sessionID)
            // A fresh nonzero scalar times a valid generator is never the identity but with negligible odds.
            share = CPace.multiply(scalar: scalar, point: generator) ?? []
        }

        /// The broadcaster's answer checked: the listener's KeyProof confirmation and the session's
        /// keys, or nil when the share is invalid (the draft's abort) or the confirmation is not over
        /// this run (another key, or a replayed answer).
        public func finish(broadcasterShare: [UInt8], broadcasterConfirmation: [UInt8]) -> (confirmation: [UInt8], session: KeySession)? {
            guard share.count == CPace.pointBytes,
                  let sharedPoint = CPace.multiply(scalar: scalar, point: broadcasterShare) else { return nil }
            let run = Run(sessionID: sessionID, sharedPoint: sharedPoint, listenerShare: share, broadcasterShare: broadcasterShare)
            guard run.verify(broadcasterConfirmation, of: run.broadcasterMessage) else { return nil }
            return (run.confirmation(of: run.listenerMessage), run.session)
        }
    }

    /// The broadcaster's side: everything it sends in its KeyChallenge and the check of the KeyProof.
    public struct Responder: Sendable {
        /// Yb and Tb, for the KeyChallenge.
        public let share: [UInt8]
        public let confirmation: [UInt8]
        /// Valid only once the listener's confirmation verified.
        public let session: KeySession
        private let run: Run

        /// Nil when the Hello's session id or share is invalid (the draft's abort on G.I or a
        /// string that is no group element).
        public init?(key: PartyKey, sessionID: [UInt8], listenerShare: [UInt8]) {
            self.init(key: key, sessionID: sessionID, listenerShare: listenerShare, scalar: CPace.sampleScalar())
        }

        init?(key: PartyKey, sessionID: [UInt8], listenerShare: [UInt8], scalar: [UInt8]) {
            guard sessionID.count == KeyHandshake.sessionIDBytes else { return nil }
            let generator = CPace.generator(password: key.password, channel: KeyHandshake.channel, sessionID: sessionID)
            guard let share = CPace.multiply(scalar: scalar, point: generator),
                  let sharedPoint = CPace.multiply(scalar: scalar, point: listenerShare) else { return nil }
            run = Run(sessionID: sessionID, sharedPoint: sharedPoint, listenerShare: listenerShare, broadcasterShare: share)
            self.share = share
            confirmation = run.confirmation(of: run.broadcasterMessage)
            session = run.session
        }

        /// Whether the KeyProof's confirmation is this run's (constant-time).
        public func verify(listenerConfirmation: some Collection<UInt8>) -> Bool {
            run.verify(listenerConfirmation, of: run.listenerMessage)
        }
    }

    /// What both sides derive from one run: ISK, the confirmation MAC key, the session keys.
    struct Run: Sendable {
        let listenerMessage: [UInt8]
        let broadcasterMessage: [UInt8]
        let macKey: SecretKey
        let session: KeySession

        init(sessionID: [UInt8], sharedPoint: [UInt8], listenerShare: [UInt8], broadcasterShare: [UInt8]) {
            listenerMessage = CPace.lengthValueConcatenation(listenerShare, KeyHandshake.listenerData)
            broadcasterMessage = CPace.lengthValueConcatenation(broadcasterShare, KeyHandshake.broadcasterData)
            let isk = CPace.intermediateSessionKey(sessionID: sessionID, sharedPoint: sharedPoint,
                                                   transcript: listenerMessage + broadcasterMessage)
            macKey = SecretKey(CPace.confirmationKey(sessionID: sessionID, intermediateSessionKey: isk))
            session = KeySession(intermediateSessionKey: isk, sessionID: sessionID)
        }

        /// The draft's Ta = MAC(mac_key, lv_cat(Ya, ADa)) and Tb = MAC(mac_key, lv_cat(Yb, ADb)).
        func confirmation(of message: [UInt8]) -> [UInt8] {
            macKey.hmacSHA512(message)
        }

        func verify(_ tag: some Collection<UInt8>, of message: [UInt8]) -> Bool {
            tag.count == KeyHandshake.confirmationBytes && constantTimeEqual(tag, macKey.hmacSHA512(message))
        }
    }

    /// `count` bytes from the system's cryptographic random source.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}

/// The keys one handshake yields (BLAKE2b keyed with ISK over a purpose and the run's session id):
/// one for the stream's sealed records, one for the clock datagrams. No other run shares them.
public struct KeySession: Sendable, Equatable {
    let recordKey: SecretKey
    public let clockKey: ClockDatagramKey

    /// ISK is a SHA-512 digest: 64 bytes, as a BLAKE2b key may be at most.
    init(intermediateSessionKey isk: [UInt8], sessionID: [UInt8]) {
        recordKey = SecretKey.derived(key: isk, message: Array("PartyCast stream records".utf8) + sessionID)
        clockKey = ClockDatagramKey(SecretKey.derived(key: isk, message: Array("PartyCast clock datagrams".utf8) + sessionID))
    }

    /// The same run's keys (constant-time).
    public static func == (lhs: KeySession, rhs: KeySession) -> Bool { lhs.recordKey == rhs.recordKey }

    /// Seals what `role` sends; opens what its peer sends.
    public func sealer(sending role: RecordDirection) -> RecordSealer { RecordSealer(key: recordKey, direction: role) }
    public func opener(receiving role: RecordDirection) -> RecordOpener { RecordOpener(key: recordKey, direction: role) }
}
