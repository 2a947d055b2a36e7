/// The wire protocol this build speaks, sent in Hello and Welcome. Peers must speak the same one:
/// there is no negotiation, so a change to the meaning of any message bumps it.
/// 2: the party key handshake (Hello.has_key/listener_nonce, KeyChallenge, KeyProof).
/// 3: clock exchanges over UDP (Welcome.clock_port/clock_token, ClockDatagram), TCP as the fallback.
/// 4: the live timeline (Withdraw, Gain, PartyState, ListenerSettings; Metadata.start_position).
/// 5: the party key handshake is CPace (Hello.key_session_id/listener_share, KeyChallenge and KeyProof
///    carry shares and confirmations), and a private party's stream is sealed records after it.
/// 6: channel assignment (ListenerSettings.channel, Status.channel); ListenerSettings carries only
///    what the remote set (latency_offset_milliseconds absent when it did not).
/// 7: a private party's clock datagrams are sealed (ClockDatagram.sealed), not only authenticated.
public let partyCastProtocolVersion: UInt32 = 7

/// Checks the version a peer announced (in its Hello when `peerRole` is "listener", in its Welcome
/// when it is "broadcaster"). Returns nil when it matches, otherwise the Error envelope to send and
/// show, which names the side to upgrade: the one speaking the older protocol.
public func protocolMismatch(peerVersion: UInt32, peerRole: String) -> PCEnvelope? {
    precondition(peerRole == "listener" || peerRole == "broadcaster", "unknown peer role \(peerRole)")
    guard peerVersion != partyCastProtocolVersion else { return nil }
    let ourRole = peerRole == "listener" ? "broadcaster" : "listener"
    let older = peerVersion < partyCastProtocolVersion ? peerRole : ourRole
    return .failure(.protocolVersionMismatch,
                    "the \(peerRole) speaks PartyCast protocol \(peerVersion), this \(ourRole) speaks \(partyCastProtocolVersion): upgrade the \(older)")
}

extension PCEnvelope {
    /// An Error message: why a peer is being refused.
    public static func failure(_ code: PCErrorCode, _ message: String) -> PCEnvelope {
        var error = PCError()
        error.code = code
        error.message = message
        var envelope = PCEnvelope()
        envelope.body = .error(error)
        return envelope
    }
}
