/// The wire protocol this build speaks, sent in Hello and Welcome. Peers must speak the same one:
/// there is no negotiation, so a change to the meaning of any message bumps it.
public let partyCastProtocolVersion: UInt32 = 1

/// Checks the version a peer announced (in its Hello when `peerRole` is "listener", in its Welcome
/// when it is "broadcaster"). Returns nil when it matches, otherwise the Error envelope to send and
/// show, which names the side to upgrade: the one speaking the older protocol.
public func protocolMismatch(peerVersion: UInt32, peerRole: String) -> PCEnvelope? {
    precondition(peerRole == "listener" || peerRole == "broadcaster", "unknown peer role \(peerRole)")
    guard peerVersion != partyCastProtocolVersion else { return nil }
    let ourRole = peerRole == "listener" ? "broadcaster" : "listener"
    let older = peerVersion < partyCastProtocolVersion ? peerRole : ourRole
    var error = PCError()
    error.code = .protocolVersionMismatch
    error.message = "the \(peerRole) speaks PartyCast protocol \(peerVersion), this \(ourRole) speaks \(partyCastProtocolVersion): upgrade the \(older)"
    var envelope = PCEnvelope()
    envelope.body = .error(error)
    return envelope
}
