import Foundation
import NIOConcurrencyHelpers
import PartyCastControlSeam
import PartyCastCore
import PartyCastWire

/// The bodies of the control port's key handshake: SPAKE2 (`Spake2`) carried by two requests, so a
/// remote proves the key without sending it, and learns that the broadcaster holds it before it
/// sends anything else. Byte fields are base64.
public enum ControlSession {
    /// The remote's fresh random id for its run, which names it in the confirmation.
    public static let sessionIDBytes = 16

    /// POST /api/session: the remote's session id and SPAKE2 share (pA).
    public struct Start: Codable, Sendable {
        public var sessionID: String
        public var share: String
        public init(sessionID: String, share: String) { self.sessionID = sessionID; self.share = share }
    }

    /// Its answer: the broadcaster's share (pB) and its confirmation (cB), to check before going on.
    public struct Challenge: Codable, Sendable {
        public var share: String
        public var confirmation: String
        public init(share: String, confirmation: String) { self.share = share; self.confirmation = confirmation }
    }

    /// POST /api/session/confirm: the remote's confirmation (cA).
    public struct Confirm: Codable, Sendable {
        public var sessionID: String
        public var confirmation: String
        public init(sessionID: String, confirmation: String) { self.sessionID = sessionID; self.confirmation = confirmation }
    }

    /// Its answer: a token for `Authorization: Bearer`, good for `expiresInSeconds`.
    public struct Token: Codable, Sendable {
        public var token: String
        public var expiresInSeconds: Int
        public init(token: String, expiresInSeconds: Int) { self.token = token; self.expiresInSeconds = expiresInSeconds }
    }
}

/// Handshakes in flight and the tokens they earned, each bounded in number and time: a stranger can
/// make the broadcaster hold at most `maxPending` half-done handshakes for `pendingLifetime`.
final class ControlSessions: Sendable {
    static let pendingLifetime: UInt64 = 10_000_000_000
    static let tokenLifetimeSeconds = 15 * 60
    static let maxPending = 256
    static let maxTokens = 1024

    struct Pending {
        var confirmations: Spake2.Confirmations
        var address: String
        var expires: UInt64
    }

    struct State {
        var pending: [String: Pending] = [:]
        var tokens: [String: UInt64] = [:]
    }

    private let state = NIOLockedValueBox(State())

    /// Answers a remote's share: nil when it is no valid share, its session id is pending already
    /// (ids cross the Wi-Fi in clear: a guest who saw one must not replace its handshake), or too many
    /// handshakes are pending.
    func start(_ start: ControlSession.Start, key: PartyKey, address: String,
               now: UInt64 = monotonicNanoseconds()) -> ControlSession.Challenge? {
        guard Data(base64Encoded: start.sessionID)?.count == ControlSession.sessionIDBytes, let share = Data(base64Encoded: start.share) else { return nil }
        let broadcaster = Spake2.Party(role: .b, key: key)
        guard let confirmations = broadcaster.finish(peerShare: [UInt8](share)) else { return nil }
        let admitted = state.withLockedValue { s in
            s.pending = s.pending.filter { $0.value.expires > now }
            guard s.pending.count < Self.maxPending, s.pending[start.sessionID] == nil else { return false }
            s.pending[start.sessionID] = Pending(confirmations: confirmations, address: address, expires: now &+ Self.pendingLifetime)
            return true
        }
        guard admitted else { return nil }
        return ControlSession.Challenge(share: Data(broadcaster.share).base64EncodedString(),
                                        confirmation: Data(confirmations.own).base64EncodedString())
    }

    /// A token when the remote's confirmation verifies for a handshake from the same address; the
    /// handshake is used up either way (one guess each).
    func confirm(_ confirm: ControlSession.Confirm, address: String, now: UInt64 = monotonicNanoseconds()) -> ControlSession.Token? {
        guard let confirmation = Data(base64Encoded: confirm.confirmation) else { return nil }
        return state.withLockedValue { s in
            guard let pending = s.pending.removeValue(forKey: confirm.sessionID), pending.expires > now, pending.address == address,
                  pending.confirmations.verify([UInt8](confirmation)) else { return nil }
            s.tokens = s.tokens.filter { $0.value > now }
            if s.tokens.count >= Self.maxTokens, let oldest = s.tokens.min(by: { $0.value < $1.value })?.key { s.tokens.removeValue(forKey: oldest) }
            let token = Data(KeyHandshake.randomBytes(32)).base64EncodedString()
            s.tokens[token] = now &+ UInt64(Self.tokenLifetimeSeconds) * 1_000_000_000
            return ControlSession.Token(token: token, expiresInSeconds: Self.tokenLifetimeSeconds)
        }
    }

    func isValid(token: String, now: UInt64 = monotonicNanoseconds()) -> Bool {
        state.withLockedValue { ($0.tokens[token] ?? 0) > now }
    }
}
